/*
 * nvml_probe.c — NVML read directly, for the attribution proof's reference numbers. Polls every
 * device every interval and appends one line per observation to <out-file>:
 *
 *   S <uuid> <pid> <timestamp-us> <sm%> <mem%>       per-process utilization sample (cursor-based:
 *                                                    each NVML sample appears once)
 *   P <now-us> <uuid> <pid> <used-bytes>              compute process (running list)
 *   U <now-us> <uuid> <gpu%> <mem%>                   device utilization rates
 *   E <now-us> <uuid> <millijoules>                   total energy counter (when supported)
 *
 * Loads libnvidia-ml.so.1 with dlopen and declares the few NVML types itself (from NVIDIA's public
 * API), so it builds without nvml.h or the -dev symlink.
 *
 *   nvml_probe <out-file> <seconds> [interval-ms]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil, memUtil, encUtil, decUtil;
} sample_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} proc_v2_t;
typedef struct {
  unsigned int gpu, memory;
} util_t;

#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_NOT_FOUND 6
#define MAXDEV 16

static nvmlReturn_t (*p_init)(void);
static nvmlReturn_t (*p_count)(unsigned int *);
static nvmlReturn_t (*p_handle)(unsigned int, nvmlDevice_t *);
static nvmlReturn_t (*p_uuid)(nvmlDevice_t, char *, unsigned int);
static nvmlReturn_t (*p_samples)(nvmlDevice_t, sample_t *, unsigned int *, unsigned long long);
static nvmlReturn_t (*p_procs)(nvmlDevice_t, unsigned int *, proc_v2_t *);
static nvmlReturn_t (*p_util)(nvmlDevice_t, util_t *);
static nvmlReturn_t (*p_energy)(nvmlDevice_t, unsigned long long *);

static unsigned long long now_us(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (unsigned long long)tv.tv_sec * 1000000ULL + (unsigned long long)tv.tv_usec;
}

static void *sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "nvml_probe: missing %s\n", name);
    exit(2);
  }
  return p;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s <out-file> <seconds> [interval-ms]\n", argv[0]);
    return 1;
  }
  long seconds = strtol(argv[2], NULL, 10);
  long interval_ms = argc > 3 ? strtol(argv[3], NULL, 10) : 100;
  void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "nvml_probe: %s\n", dlerror());
    return 2;
  }
  p_init = (nvmlReturn_t(*)(void))sym(lib, "nvmlInit_v2");
  p_count = (nvmlReturn_t(*)(unsigned int *))sym(lib, "nvmlDeviceGetCount_v2");
  p_handle = (nvmlReturn_t(*)(unsigned int, nvmlDevice_t *))sym(lib, "nvmlDeviceGetHandleByIndex_v2");
  p_uuid = (nvmlReturn_t(*)(nvmlDevice_t, char *, unsigned int))sym(lib, "nvmlDeviceGetUUID");
  p_samples = (nvmlReturn_t(*)(nvmlDevice_t, sample_t *, unsigned int *, unsigned long long))sym(
      lib, "nvmlDeviceGetProcessUtilization");
  p_procs = (nvmlReturn_t(*)(nvmlDevice_t, unsigned int *, proc_v2_t *))sym(
      lib, "nvmlDeviceGetComputeRunningProcesses_v2");
  p_util = (nvmlReturn_t(*)(nvmlDevice_t, util_t *))sym(lib, "nvmlDeviceGetUtilizationRates");
  p_energy = (nvmlReturn_t(*)(nvmlDevice_t, unsigned long long *))dlsym(
      lib, "nvmlDeviceGetTotalEnergyConsumption"); /* optional */
  nvmlReturn_t r = p_init();
  if (r != 0) {
    fprintf(stderr, "nvml_probe: nvmlInit_v2 returned %d\n", r);
    return 3;
  }
  FILE *out = fopen(argv[1], "w");
  if (!out) {
    perror("nvml_probe: out");
    return 1;
  }
  unsigned int n = 0;
  p_count(&n);
  if (n > MAXDEV) n = MAXDEV;
  nvmlDevice_t dev[MAXDEV];
  char uuid[MAXDEV][96];
  unsigned long long cursor[MAXDEV] = {0};
  for (unsigned int i = 0; i < n; i++) {
    p_handle(i, &dev[i]);
    p_uuid(dev[i], uuid[i], sizeof uuid[i]);
  }
  static sample_t samples[4096];
  static proc_v2_t procs[1024];
  unsigned long long end = now_us() + (unsigned long long)seconds * 1000000ULL;
  while (now_us() < end) {
    for (unsigned int i = 0; i < n; i++) {
      unsigned long long t = now_us();
      unsigned int count = 4096;
      r = p_samples(dev[i], samples, &count, cursor[i]);
      if (r == 0) {
        for (unsigned int k = 0; k < count; k++) {
          if (samples[k].pid == 0) continue;
          fprintf(out, "S %s %u %llu %u %u\n", uuid[i], samples[k].pid, samples[k].timeStamp,
                  samples[k].smUtil, samples[k].memUtil);
          if (samples[k].timeStamp > cursor[i]) cursor[i] = samples[k].timeStamp;
        }
      } else if (r != NVML_ERROR_NOT_FOUND) {
        fprintf(stderr, "nvml_probe: GetProcessUtilization returned %d\n", r);
      }
      unsigned int pc = 1024;
      if (p_procs(dev[i], &pc, procs) == 0) {
        for (unsigned int k = 0; k < pc; k++) {
          fprintf(out, "P %llu %s %u %llu\n", t, uuid[i], procs[k].pid, procs[k].usedGpuMemory);
        }
      }
      util_t u;
      if (p_util(dev[i], &u) == 0) {
        fprintf(out, "U %llu %s %u %u\n", t, uuid[i], u.gpu, u.memory);
      }
      unsigned long long mj;
      if (p_energy && p_energy(dev[i], &mj) == 0) {
        fprintf(out, "E %llu %s %llu\n", now_us(), uuid[i], mj);
      }
    }
    fflush(out);
    usleep((useconds_t)interval_ms * 1000);
  }
  fclose(out);
  return 0;
}

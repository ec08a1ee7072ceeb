/*
 * gpu_common.h — helpers shared by the GPU test programs (driver API, no nvml.h needed: NVML is
 * dlopen-ed). Reads the libvgpu region the process writes, and NVML's per-process usage.
 */
#ifndef VGPU_GPU_COMMON_H
#define VGPU_GPU_COMMON_H

#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/vgpu_region.h"

#define MiB (1ull << 20)
#define CK(call)                                                                                   \
  do {                                                                                             \
    CUresult rc_ = (call);                                                                         \
    if (rc_ != CUDA_SUCCESS) {                                                                     \
      const char *s_ = NULL;                                                                       \
      cuGetErrorString(rc_, &s_);                                                                  \
      fprintf(stderr, "%s:%d: %s -> %d (%s)\n", __FILE__, __LINE__, #call, rc_, s_ ? s_ : "?");    \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline const vgpu_region_t *region(void) {
  static const vgpu_region_t *r;
  if (r) return r;
  const char *p = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  /* The path may be a symlink, a FIFO or an empty file (degraded-mode probes): never follow,
   * never block, and never map past the end (SIGBUS). */
  int fd = p ? open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK) : -1;
  if (fd < 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(vgpu_region_t)) {
    close(fd);
    return NULL;
  }
  void *m = mmap(NULL, sizeof(vgpu_region_t), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  return r = (m == MAP_FAILED ? NULL : (const vgpu_region_t *)m);
}

/* This process's tracked bytes on region device d (0 when not preloaded). */
static inline unsigned long long tracked_self(int d) {
  const vgpu_region_t *r = region();
  if (!r) return 0;
  for (int i = 0; i < r->proc_num && i < VGPU_MAX_PROCS; i++)
    if (r->procs[i].pid == getpid() && r->procs[i].status)
      return __atomic_load_n(&r->procs[i].used[d].total, __ATOMIC_ACQUIRE);
  return 0;
}
/* The container's tracked bytes (all live slots). */
static inline unsigned long long tracked_all(int d) {
  const vgpu_region_t *r = region();
  unsigned long long s = 0;
  if (!r) return 0;
  for (int i = 0; i < r->proc_num && i < VGPU_MAX_PROCS; i++)
    if (r->procs[i].pid && r->procs[i].status) s += r->procs[i].used[d].total;
  return s;
}

/* NVML-reported usage of this process on CUDA device `dev`, -1 when unknown. */
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gi, ci;
} proc_info_v2;
static inline long long nvml_pid_used(CUdevice dev, unsigned pid);
static inline long long nvml_self_used(CUdevice dev) { return nvml_pid_used(dev, 0); }
/* NVML-reported usage of process `pid` (0: this process, also by its NSpid) on CUDA device `dev`. */
static inline long long nvml_pid_used(CUdevice dev, unsigned pid) {
  static void *h;
  static int (*init)(void), (*by_uuid)(const char *, void **), (*procs)(void *, unsigned *, proc_info_v2 *);
  if (!h) {
    h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!h) return -1;
    init = (int (*)(void))dlsym(h, "nvmlInit_v2");
    by_uuid = (int (*)(const char *, void **))dlsym(h, "nvmlDeviceGetHandleByUUID");
    procs = (int (*)(void *, unsigned *, proc_info_v2 *))dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v2");
    if (!init || !by_uuid || !procs || init() != 0) return -1;
  }
  CUuuid u;
  if (cuDeviceGetUuid(&u, dev) != CUDA_SUCCESS) return -1;
  const unsigned char *b = (const unsigned char *)u.bytes;
  char s[64];
  snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  void *nd = NULL;
  if (by_uuid(s, &nd) != 0) return -1;
  proc_info_v2 infos[256];
  unsigned n = 256;
  if (procs(nd, &n, infos) != 0) return -1;
  unsigned me = pid ? pid : (unsigned)getpid(), host = 0;
  FILE *f = pid ? NULL : fopen("/proc/self/status", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "NSpid:", 6) == 0) host = (unsigned)strtoul(line + 6, NULL, 10);
  if (f) fclose(f);
  for (unsigned i = 0; i < n && i < 256; i++)
    if (infos[i].pid == me || (host && infos[i].pid == host)) return (long long)infos[i].usedGpuMemory;
  return -1;
}

#endif /* VGPU_GPU_COMMON_H */

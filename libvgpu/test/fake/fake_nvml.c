/*
 * fake_nvml.c — a scripted stand-in for libnvidia-ml.so.1, for CPU-only tests of the exporter
 * (loaded through the same JNA path as the real library) and of libvgpu (LD_PRELOAD / dlopen).
 *
 * Only the NVML subset those two use is implemented; every struct is declared here from NVIDIA's
 * public API documentation (there is no nvml.h on the build machines).
 *
 * Scripting: env FAKE_NVML_CONFIG=<file>. The file is re-read whenever its mtime, size or inode
 * changes (checked on every call), so a test can change the GPU under a running process; write it
 * with rename() for atomic updates. A missing file means "no devices" (init still succeeds).
 * One directive per line, '#' starts a comment, tokens separated by blanks:
 *
 *   device <i> uuid=<u> name=<n> total=<bytes> used=<bytes> util=<pct> memutil=<pct> [energy=<mJ>]
 *          [period=<usec>]
 *       a physical GPU at NVML index i (0..15); the device count is highest index + 1.
 *       name may not contain blanks; use '_' (returned verbatim). energy is what
 *       nvmlDeviceGetTotalEnergyConsumption returns (millijoules since the driver loaded; a
 *       script that models power rewrites it as it grows); without it that call returns
 *       NVML_ERROR_NOT_SUPPORTED, as on GPUs older than Volta and on MIG devices.
 *       period is the GPU's sampling period: nvmlDeviceGetSamples(NVML_GPU_UTILIZATION_SAMPLES)
 *       then returns a device sample (value util) at every tick, whether or not a process ran:
 *       ticks at the multiples of period (epoch microseconds; scripts put their per-process
 *       samples on the same ticks), the newest FAKE_DEVICE_TICKS of them up to now (realtime=1)
 *       or up to the device's newest per-process sample. Without period that call returns
 *       NVML_ERROR_NOT_SUPPORTED (a driver or GPU without device samples).
 *       gpm=1: the GPU has GPM counters (Hopper and newer; nvmlGpmQueryDeviceSupport says so).
 *   process <dev> pid=<pid> used=<bytes> [gi=<id>] [ci=<id>]
 *       a compute process in nvmlDeviceGetComputeRunningProcesses* of device <dev>.
 *   sample <dev> pid=<pid> sm=<pct> mem=<pct> ts=<usec> [enc=<pct>] [dec=<pct>]
 *       a per-process utilization sample; nvmlDeviceGetProcessUtilization returns the samples
 *       with ts > lastSeenTimeStamp (NVML_ERROR_NOT_FOUND when there are none).
 *   fail <function> <nvmlReturn>
 *       every call of <function> returns that code (e.g. `fail nvmlInit 9` no driver,
 *       `fail * 15` GPU lost: every device query fails, init/shutdown/strings still work).
 *       <function> also matches its versioned variants (nvmlInit matches nvmlInit_v2 and
 *       nvmlInitWithFlags; nvmlDeviceGetMemoryInfo matches nvmlDeviceGetMemoryInfo_v2).
 *   mig <parent> <j> uuid=<u> [name=<n>] [total=<bytes>] [used=<bytes>] [gi=<id>] [ci=<id>]
 *       [sm=<pct>]
 *       MIG device j (0..6) of physical GPU <parent> (GPU instance gi, default j+1; compute
 *       instance ci, default 0; sm: how busy its SMs are, for GPM): the parent then reports MIG
 *       mode enabled and hands out a handle for it; per-process and device utilization on a MIG
 *       handle return NVML_ERROR_NOT_SUPPORTED, as on real drivers. See fake_nvml_mig.inc for the
 *       handles' lifetime, the parent's aggregate process list and GPM.
 *   migprocess <parent> <j> pid=<pid> used=<bytes>
 *       a compute process on that MIG device.
 *   option v3_stride=<16|24|32>     bytes per entry written by *_v3 running-process calls
 *                                   (24 = nvmlProcessInfo_v2_t, 32 = the R535.54 struct)
 *   option driver=<version>         string returned by nvmlSystemGetDriverVersion
 *   option realtime=1               as the driver: a sample is returned only once its timestamp
 *                                   has passed (a script may then lay out samples ahead of time),
 *                                   and a device's energy grows at its power= (milliwatts) from the
 *                                   time the script was read, on top of its energy=
 *   option buffer=<usec>            with realtime=1: per-process samples older than that before
 *                                   now are no longer returned (the driver answers with the
 *                                   recent periods only; a reader must poll to see them all)
 *
 *   health <dev> ... / xid <dev> id=<n> xid=<code>
 *       device health and XID events: see fake_nvml_health.inc (included at the end).
 *
 * Emulating the 535-560 driver bug: list container-namespace pids in `process` lines and host
 * pids in `sample` lines. Bad lines are ignored with a note on stderr ("fake_nvml: ...").
 *
 * Call log: env FAKE_NVML_CALL_LOG=<file> appends one line per call with the function name, so a
 * test can count e.g. how often nvmlInit ran.
 *
 * Thread safety: one mutex around all state; calls may come from any thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_UNKNOWN = 999,
};

typedef struct fake_device *nvmlDevice_t;

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
#define NVML_MEMORY_V2_VERSION ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t; /* 16 bytes */

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t; /* 24 bytes */

typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t; /* 32 bytes */

_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "v1 process info");
_Static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "v2 process info");
_Static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "utilization sample");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "memory v2");

#define FAKE_MAX_DEVICES 16
#define FAKE_MAX_MIG 7 /* MIG devices per GPU: an A100/H100 has at most 7 */
#define FAKE_MAX_PROCS 256
#define FAKE_MAX_SAMPLES 4096
#define FAKE_DEVICE_TICKS 120 /* device samples the driver keeps: 24 s at 200 ms */
#define FAKE_MAX_FAILS 64
#define FAKE_NAME_LEN 96
#define NVML_VALUE_NOT_AVAILABLE_UINT 0xFFFFFFFFu

struct fake_proc {
  unsigned int pid;
  unsigned long long used;
  unsigned int gi, ci;
};

struct fake_device {
  int present;
  int is_mig;
  unsigned int index;
  char uuid[FAKE_NAME_LEN];
  char name[FAKE_NAME_LEN];
  unsigned long long total, used;
  unsigned int util, memutil;
  int has_energy;
  unsigned long long energy_mj;
  unsigned long long power_mw;
  unsigned long long period_us;
  int gpm;                  /* physical: GPM counters (Hopper and newer) */
  unsigned int gi, ci, sm;  /* MIG: GPU and compute instance ids, SM busy percent */
  int nprocs;
  struct fake_proc procs[FAKE_MAX_PROCS];
};

struct fake_sample {
  int dev;
  nvmlProcessUtilizationSample_t s;
};

struct fake_fail {
  char function[64];
  int code;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_device g_devices[FAKE_MAX_DEVICES];
static struct fake_device g_migs[FAKE_MAX_DEVICES][FAKE_MAX_MIG];
static int g_device_count;
static struct fake_sample g_samples[FAKE_MAX_SAMPLES];
static int g_nsamples;
static struct fake_fail g_fails[FAKE_MAX_FAILS];
static int g_nfails;
static int g_v3_stride = 24;
static int g_realtime;
static unsigned long long g_buffer_us; /* 0: every scripted sample stays */
static unsigned long long g_loaded_us; /* CLOCK_REALTIME when the script was read */
static char g_driver[64] = "580.00-fake";
static int g_init_count;
static int g_loaded;
static struct stat g_config_stat;

#include "fake_nvml_script.inc" /* the script: its parser and re-reading on change */

static void log_call(const char *fn) {
  const char *path = getenv("FAKE_NVML_CALL_LOG");
  if (!path) return;
  FILE *f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "%s\n", fn);
  fclose(f);
}

/* Scripted failure for fn, 0 when none. Caller holds g_lock. */
static int scripted_failure(const char *fn, int is_device_call) {
  for (int i = 0; i < g_nfails; i++) {
    const char *f = g_fails[i].function;
    size_t n = strlen(f);
    if (strcmp(f, "*") == 0 && is_device_call) return g_fails[i].code;
    if (strncmp(fn, f, n) == 0 && (fn[n] == '\0' || fn[n] == '_' || strncmp(fn + n, "WithFlags", 9) == 0))
      return g_fails[i].code;
  }
  return 0;
}

/* Common prologue: lock, refresh, log, scripted failure, init check. Returns 0 to proceed. */
static nvmlReturn_t enter(const char *fn, int is_device_call) {
  pthread_mutex_lock(&g_lock);
  refresh_locked();
  log_call(fn);
  int fail = scripted_failure(fn, is_device_call);
  if (fail) return fail;
  if (is_device_call && g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  return NVML_SUCCESS;
}

static nvmlReturn_t leave(nvmlReturn_t r) {
  pthread_mutex_unlock(&g_lock);
  return r;
}

static nvmlReturn_t check_device(nvmlDevice_t d) {
  int physical = d >= g_devices && d < g_devices + FAKE_MAX_DEVICES;
  int mig = d >= &g_migs[0][0] && d < &g_migs[0][0] + FAKE_MAX_DEVICES * FAKE_MAX_MIG;
  if (!physical && !mig) return NVML_ERROR_INVALID_ARGUMENT;
  if (mig && !g_devices[d->index].present) return NVML_ERROR_GPU_IS_LOST;
  if (mig && !d->present) return NVML_ERROR_INVALID_ARGUMENT; /* the instance was destroyed */
  return d->present ? NVML_SUCCESS : NVML_ERROR_GPU_IS_LOST;
}

static int mig_count(nvmlDevice_t d) {
  int n = 0;
  if (d->is_mig) return 0;
  for (int j = 0; j < FAKE_MAX_MIG; j++) n += g_migs[d->index][j].present;
  return n;
}

static unsigned int process_count(nvmlDevice_t d);                                /* mig.inc */
static const struct fake_proc *process_at(nvmlDevice_t d, unsigned int i, struct fake_proc *tmp); /* mig.inc */

#define ENTER(fn, dev_call)                  \
  do {                                       \
    nvmlReturn_t r_ = enter((fn), (dev_call)); \
    if (r_ != NVML_SUCCESS) return leave(r_); \
  } while (0)

#define ENTER_DEVICE(fn, d)                  \
  do {                                       \
    ENTER((fn), 1);                          \
    nvmlReturn_t c_ = check_device(d);       \
    if (c_ != NVML_SUCCESS) return leave(c_); \
  } while (0)

static nvmlReturn_t do_init(const char *fn) {
  ENTER(fn, 0);
  g_init_count++;
  return leave(NVML_SUCCESS);
}

FAKE_EXPORT nvmlReturn_t nvmlInit(void) { return do_init("nvmlInit"); }
FAKE_EXPORT nvmlReturn_t nvmlInit_v2(void) { return do_init("nvmlInit_v2"); }
FAKE_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  (void)flags;
  return do_init("nvmlInitWithFlags");
}

FAKE_EXPORT nvmlReturn_t nvmlShutdown(void) {
  ENTER("nvmlShutdown", 0);
  if (g_init_count == 0) return leave(NVML_ERROR_UNINITIALIZED);
  if (--g_init_count == 0) health_on_release();
  return leave(NVML_SUCCESS);
}

FAKE_EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_UNKNOWN: return "Unknown Error";
    default: return "Unknown Error";
  }
}

FAKE_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
  ENTER("nvmlSystemGetDriverVersion", 1);
  if (!version) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (strlen(g_driver) + 1 > length) return leave(NVML_ERROR_INSUFFICIENT_SIZE);
  memcpy(version, g_driver, strlen(g_driver) + 1);
  return leave(NVML_SUCCESS);
}

static nvmlReturn_t do_count(const char *fn, unsigned int *count) {
  ENTER(fn, 1);
  if (!count) return leave(NVML_ERROR_INVALID_ARGUMENT);
  *count = (unsigned)g_device_count;
  return leave(NVML_SUCCESS);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *c) { return do_count("nvmlDeviceGetCount", c); }
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *c) { return do_count("nvmlDeviceGetCount_v2", c); }

static nvmlReturn_t do_handle(const char *fn, unsigned int index, nvmlDevice_t *device) {
  ENTER(fn, 1);
  if (!device || index >= (unsigned)g_device_count) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (!g_devices[index].present) return leave(NVML_ERROR_GPU_IS_LOST);
  *device = &g_devices[index];
  return leave(NVML_SUCCESS);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d) {
  return do_handle("nvmlDeviceGetHandleByIndex", i, d);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
  return do_handle("nvmlDeviceGetHandleByIndex_v2", i, d);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
  ENTER("nvmlDeviceGetHandleByUUID", 1);
  if (!uuid || !device) return leave(NVML_ERROR_INVALID_ARGUMENT);
  for (int i = 0; i < g_device_count; i++) {
    if (g_devices[i].present && strcmp(g_devices[i].uuid, uuid) == 0) {
      *device = &g_devices[i];
      return leave(NVML_SUCCESS);
    }
  }
  return leave(NVML_ERROR_NOT_FOUND);
}

static nvmlReturn_t copy_string(const char *src, char *dst, unsigned int length) {
  if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(src) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(dst, src, strlen(src) + 1);
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
  ENTER_DEVICE("nvmlDeviceGetUUID", d);
  return leave(copy_string(d->uuid, uuid, length));
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
  ENTER_DEVICE("nvmlDeviceGetName", d);
  return leave(copy_string(d->name, name, length));
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index) {
  ENTER_DEVICE("nvmlDeviceGetIndex", d);
  if (!index) return leave(NVML_ERROR_INVALID_ARGUMENT);
  *index = d->index;
  return leave(NVML_SUCCESS);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *memory) {
  ENTER_DEVICE("nvmlDeviceGetMemoryInfo", d);
  if (!memory) return leave(NVML_ERROR_INVALID_ARGUMENT);
  memory->total = d->total;
  memory->used = d->used;
  memory->free = d->total - d->used;
  return leave(NVML_SUCCESS);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *memory) {
  ENTER_DEVICE("nvmlDeviceGetMemoryInfo_v2", d);
  if (!memory) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (memory->version != NVML_MEMORY_V2_VERSION) return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  memory->total = d->total;
  memory->reserved = 0;
  memory->used = d->used;
  memory->free = d->total - d->used;
  return leave(NVML_SUCCESS);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
  ENTER_DEVICE("nvmlDeviceGetUtilizationRates", d);
  if (!u) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (d->is_mig) return leave(NVML_ERROR_NOT_SUPPORTED);
  u->gpu = d->util;
  u->memory = d->memutil;
  return leave(NVML_SUCCESS);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *energy) {
  ENTER_DEVICE("nvmlDeviceGetTotalEnergyConsumption", d);
  if (!energy) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (d->is_mig || !d->has_energy) return leave(NVML_ERROR_NOT_SUPPORTED);
  *energy = d->energy_mj;
  if (g_realtime && d->power_mw > 0) {
    unsigned long long now = realtime_us();
    if (now > g_loaded_us) *energy += d->power_mw * (now - g_loaded_us) / 1000000ULL;
  }
  return leave(NVML_SUCCESS);
}

/* Writes the device's processes with the given stride; NVML's two-call sizing protocol. */
static nvmlReturn_t running_processes(nvmlDevice_t d, unsigned int *count, void *infos, int stride) {
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int n = process_count(d);
  if (*count < n || (n > 0 && !infos)) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  unsigned char *out = infos;
  for (unsigned int i = 0; i < n; i++) {
    unsigned char *e = out + (size_t)i * (size_t)stride;
    struct fake_proc mine;
    const struct fake_proc *p = process_at(d, i, &mine);
    memset(e, 0, (size_t)stride);
    memcpy(e, &p->pid, 4);
    memcpy(e + 8, &p->used, 8);
    if (stride >= 24) {
      memcpy(e + 16, &p->gi, 4);
      memcpy(e + 20, &p->ci, 4);
    }
  }
  *count = n;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v1_t *i) {
  ENTER_DEVICE("nvmlDeviceGetComputeRunningProcesses", d);
  return leave(running_processes(d, c, i, (int)sizeof(nvmlProcessInfo_v1_t)));
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v2_t *i) {
  ENTER_DEVICE("nvmlDeviceGetComputeRunningProcesses_v2", d);
  return leave(running_processes(d, c, i, (int)sizeof(nvmlProcessInfo_v2_t)));
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, void *i) {
  ENTER_DEVICE("nvmlDeviceGetComputeRunningProcesses_v3", d);
  return leave(running_processes(d, c, i, g_v3_stride));
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t *utilization,
                                                         unsigned int *count, unsigned long long lastSeenTimeStamp) {
  ENTER_DEVICE("nvmlDeviceGetProcessUtilization", d);
  if (!count) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (d->is_mig) return leave(NVML_ERROR_NOT_SUPPORTED);
  int dev = (int)(d - g_devices);
  unsigned long long until = g_realtime ? realtime_us() : ~0ULL; /* not yet published after it */
  if (g_realtime && g_buffer_us > 0 && until > g_buffer_us && until - g_buffer_us > lastSeenTimeStamp)
    lastSeenTimeStamp = until - g_buffer_us; /* older ones left the driver's buffer */
  unsigned int n = 0;
  for (int i = 0; i < g_nsamples; i++)
    if (g_samples[i].dev == dev && g_samples[i].s.timeStamp > lastSeenTimeStamp &&
        g_samples[i].s.timeStamp <= until)
      n++;
  if (n == 0) {
    *count = 0;
    return leave(NVML_ERROR_NOT_FOUND);
  }
  if (!utilization || *count < n) {
    *count = n;
    return leave(NVML_ERROR_INSUFFICIENT_SIZE);
  }
  unsigned int w = 0;
  for (int i = 0; i < g_nsamples; i++)
    if (g_samples[i].dev == dev && g_samples[i].s.timeStamp > lastSeenTimeStamp &&
        g_samples[i].s.timeStamp <= until && w < n)
      utilization[w++] = g_samples[i].s;
  *count = w;
  return leave(NVML_SUCCESS);
}

typedef struct {
  unsigned long long timeStamp;
  unsigned long long sampleValue; /* nvmlValue_t: a union of 8 bytes; uiVal for utilization */
} nvmlSample_t;                   /* 16 bytes */
_Static_assert(sizeof(nvmlSample_t) == 16, "device sample");

enum { NVML_GPU_UTILIZATION_SAMPLES = 1, NVML_VALUE_TYPE_UNSIGNED_INT = 1 };

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t d, int type, unsigned long long lastSeenTimeStamp,
                                              int *sampleValType, unsigned int *sampleCount, nvmlSample_t *samples) {
  ENTER_DEVICE("nvmlDeviceGetSamples", d);
  if (!sampleValType || !sampleCount) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (d->is_mig || d->period_us == 0 || type != NVML_GPU_UTILIZATION_SAMPLES) return leave(NVML_ERROR_NOT_SUPPORTED);
  int dev = (int)(d - g_devices);
  unsigned long long until = 0;
  if (g_realtime) {
    until = realtime_us();
  } else {
    for (int i = 0; i < g_nsamples; i++)
      if (g_samples[i].dev == dev && g_samples[i].s.timeStamp > until) until = g_samples[i].s.timeStamp;
  }
  unsigned long long newest = until / d->period_us; /* tick index */
  unsigned long long oldest = newest >= FAKE_DEVICE_TICKS - 1 ? newest - (FAKE_DEVICE_TICKS - 1) : 0;
  if (oldest == 0) oldest = 1; /* tick 0 would carry timestamp 0: no sample */
  unsigned long long after = lastSeenTimeStamp / d->period_us + 1; /* first tick newer than lastSeen */
  if (after > oldest) oldest = after;
  unsigned int n = until >= d->period_us && newest >= oldest ? (unsigned int)(newest - oldest + 1) : 0;
  *sampleValType = NVML_VALUE_TYPE_UNSIGNED_INT;
  if (n == 0) {
    *sampleCount = 0;
    return leave(NVML_ERROR_NOT_FOUND);
  }
  if (!samples) {
    *sampleCount = n;
    return leave(NVML_SUCCESS);
  }
  unsigned int w = 0; /* as NVML: as many as the buffer holds, the oldest first */
  for (unsigned long long k = oldest; k <= newest && w < *sampleCount; k++, w++) {
    samples[w].timeStamp = k * d->period_us;
    samples[w].sampleValue = d->util;
  }
  *sampleCount = w;
  return leave(NVML_SUCCESS);
}

#include "fake_nvml_health.inc"
#include "fake_nvml_mig.inc" /* MIG handles, instance ids and GPM; after health (g_epoch) */

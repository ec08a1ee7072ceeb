/*
 * cases.h — the one setup every preload test program shares (with check.h's assertions and region
 * readers): entering a device's primary context, the fake driver's physical count and the checks
 * against it, a device pool, a monotonic clock, which library a function pointer resolves into,
 * and the case table's dispatch. The programs, one topic each (test/run_preload.sh and
 * test/run_region.sh run them):
 *   cases.c          memory limits, contexts, launches, devices, NVML, the environment contract
 *   cases_procs.c    threads and processes: forks, SIGKILLed holders, dead slots, a lost slot
 *   cases_symbols.c  symbol resolution: dlsym, cuGetProcAddress (every version), trampolines
 *   memkinds.c, pools.c, routes.c, routes_mem.c, region_fail.c, stripped.c: see each file
 */
#ifndef VGPU_TEST_CASES_H
#define VGPU_TEST_CASES_H

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "check.h"

/* The fake driver's entry points for tests (test/fake/fake_cuda.c), and one the headers hide. */
unsigned long fakeCudaLaunchCount(void);
size_t fakeCudaDeviceUsed(int ordinal);
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

/* Initializes the driver and makes device dev's primary context current; returns it. */
static inline CUcontext setup_device(int dev) {
  CHECK(cuInit(0) == CUDA_SUCCESS);
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
  return ctx;
}
/* setup() (device 0) or setup(dev). */
#define setup(...) setup_device(__VA_ARGS__ + 0)

/* The container's count equals what the fake device physically holds. */
#define CHECK_EXACT(bytes)                                                                         \
  do {                                                                                             \
    CHECK_EQ_U(test_used(0), (bytes));                                                             \
    CHECK_EQ_U(fakeCudaDeviceUsed(0), (bytes));                                                    \
  } while (0)
#define CHECK_COUNTED() CHECK_EQ_U(test_used(0), fakeCudaDeviceUsed(0))

/* An explicit stream-ordered pool on device 0. */
static inline CUmemoryPool make_pool(void) {
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool;
  CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
  return pool;
}

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline const char *lib_of(void *fn) {
  Dl_info info;
  if (!fn || !dladdr(fn, &info) || !info.dli_fname) return "?";
  return info.dli_fname;
}
static inline int in_libvgpu(void *fn) { return strstr(lib_of(fn), "libvgpu") != NULL; }

typedef struct {
  const char *name;
  int (*fn)(void);
} test_case_t;

/* `<program> <case>`: runs the named case; exit 0 = pass, 2 = usage or unknown case. */
static inline int run_case(int argc, char **argv, const test_case_t *cases, size_t n) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <case>\n", argv[0]);
    return 2;
  }
  for (size_t i = 0; i < n; i++)
    if (strcmp(cases[i].name, argv[1]) == 0) return cases[i].fn();
  fprintf(stderr, "unknown case %s\n", argv[1]);
  return 2;
}

#endif /* VGPU_TEST_CASES_H */

/*
 * cases.h — what the preload case programs share: entering a device's primary context, a
 * monotonic clock, which library a function pointer resolves into, and the case table's dispatch.
 * The programs, one topic each (test/run_preload.sh runs them):
 *   cases.c          memory limits, contexts, launches, devices, NVML, the environment contract
 *   cases_procs.c    threads and processes: forks, SIGKILLed holders, dead slots, a lost slot
 *   cases_symbols.c  symbol resolution: dlsym, cuGetProcAddress (every version), trampolines
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

unsigned long fakeCudaLaunchCount(void);

static inline CUcontext setup(int dev) {
  CHECK(cuInit(0) == CUDA_SUCCESS);
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
  return ctx;
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

/*
 * sm_throttle.c — the SM limit throttles through the real hooks (LD_PRELOAD=libvgpu.so over the
 * fake libcuda with FAKE_CUDA_KERNEL_US > 0, whose kernels take time on a serial engine and whose
 * events complete when their stream's kernels have run).
 *
 *   sm_throttle throttle   saturating loop (bounded queue like a training loop); first with the
 *                          region's sm_limit set to 0 (the solo unlimited rate, same run), then
 *                          at CUDA_DEVICE_SM_LIMIT: kernels completed per second must be the
 *                          limit's share of the solo rate (within a tolerance for a loaded CI
 *                          machine, far from the 100 % an unthrottled run reaches)
 *
 * Exit 0 = pass. Prints the measured numbers on stderr.
 */
#include <cuda.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "check.h"

unsigned long fakeCudaKernelsDone(void);
long long fakeCudaBusyNs(int ordinal);

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The region mapped read-write: the test plays the node side that changes sm_limit at run time. */
static vgpu_region_t *region_rw(void) {
  const char *p = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  int fd = p ? open(p, O_RDWR) : -1;
  CHECK(fd >= 0);
  void *m = mmap(NULL, VGPU_REGION_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  CHECK(m != MAP_FAILED);
  return m;
}

#define DEPTH 4 /* batches in flight */
#define BATCH 4 /* kernels per batch */

typedef struct {
  CUstream stream;
  CUevent done[DEPTH];
  long batch;
} app_t;

/* Runs the saturating loop for `secs`; returns kernels completed per second over the run. */
static double run_for(app_t *a, double secs) {
  double t0 = now_s();
  unsigned long k0 = fakeCudaKernelsDone();
  while (now_s() - t0 < secs) {
    int slot = (int)(a->batch % DEPTH);
    if (a->batch >= DEPTH) CHECK(cuEventSynchronize(a->done[slot]) == CUDA_SUCCESS);
    for (int i = 0; i < BATCH; i++)
      CHECK(cuLaunchKernel(NULL, 132, 1, 1, 256, 1, 1, 0, a->stream, NULL, NULL) == CUDA_SUCCESS);
    CHECK(cuEventRecord(a->done[slot], a->stream) == CUDA_SUCCESS);
    a->batch++;
  }
  return (double)(fakeCudaKernelsDone() - k0) / (now_s() - t0);
}

static int case_throttle(void) {
  const char *lim_env = getenv("CUDA_DEVICE_SM_LIMIT");
  const char *us_env = getenv("FAKE_CUDA_KERNEL_US");
  CHECK(lim_env != NULL && us_env != NULL && atoi(us_env) > 0);
  int limit = atoi(lim_env);
  CHECK(cuInit(0) == CUDA_SUCCESS);
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, 1) == CUDA_SUCCESS); /* the region exists from here on */
  vgpu_region_t *r = region_rw();
  CHECK(r->sm_limit[0] == (uint64_t)limit);
  app_t a;
  memset(&a, 0, sizeof a);
  CHECK(cuStreamCreate(&a.stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  for (int i = 0; i < DEPTH; i++) CHECK(cuEventCreate(&a.done[i], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);

  __atomic_store_n(&r->sm_limit[0], 0, __ATOMIC_RELEASE); /* solo unlimited rate, same run */
  run_for(&a, 0.2);
  double b0 = (double)fakeCudaBusyNs(0), t0 = now_s();
  double solo = run_for(&a, 1.0);
  double solo_busy = ((double)fakeCudaBusyNs(0) - b0) / ((now_s() - t0) * 1e9);

  __atomic_store_n(&r->sm_limit[0], (uint64_t)limit, __ATOMIC_RELEASE);
  run_for(&a, 0.5); /* settle */
  const vgpu_region_ext_t *x = (const vgpu_region_ext_t *)((const char *)r + VGPU_EXT_OFFSET);
  uint64_t thr0 = __atomic_load_n(&x->devices[0].throttled_ns, __ATOMIC_ACQUIRE);
  b0 = (double)fakeCudaBusyNs(0);
  t0 = now_s();
  double limited = run_for(&a, 2.0);
  double lim_busy = ((double)fakeCudaBusyNs(0) - b0) / ((now_s() - t0) * 1e9);
  uint64_t thr1 = __atomic_load_n(&x->devices[0].throttled_ns, __ATOMIC_ACQUIRE);
  CHECK(cuCtxSynchronize() == CUDA_SUCCESS);

  double share = 100.0 * limited / solo;
  fprintf(stderr,
          "sm_throttle: %s us kernels, limit %d%%: solo %.0f kernels/s (device busy %.1f%%), "
          "limited %.0f kernels/s = %.1f%% of solo (device busy %.1f%%), throttled %.2f s\n",
          us_env, limit, solo, 100 * solo_busy, limited, share, 100 * lim_busy,
          (double)(thr1 - thr0) / 1e9);
  CHECK(solo_busy > 0.8); /* the loop saturates the fake GPU when nothing limits it */
  /* +-12 pp: wide enough for a loaded 2-core runner (the gate sleeps on the host clock), far
   * from the ~100 % of a run the limiter does not throttle. */
  CHECK(share > limit - 12 && share < limit + 12);
  CHECK(thr1 > thr0); /* launches were really held back */
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "throttle") == 0) return case_throttle();
  fprintf(stderr, "usage: %s throttle\n", argv[0]);
  return 2;
}

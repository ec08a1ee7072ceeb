/*
 * streams_bench.c — gpu/limiter_bench.cu's "streams" shape on the fake driver (issue 35): N
 * non-blocking streams, each kernel 132/N of the fake GPU's SMs (all N run side by side), two in
 * flight per stream, and one host thread that polls each stream's oldest completion event
 * (cuEventQuery) and refills it at once, with no sleeps. With FAKE_CUDA_CALL_NS set so that a
 * pass over the streams takes about one kernel's time, the application is host-bound like the
 * bench on an H200 (33 streams of 200 us kernels: ~5.8 us of launch + record + queries per
 * kernel): every driver call the library adds, and every time the gate holds the only thread
 * while the other streams drain, costs throughput.
 *
 * Phases in one process (the library is loaded throughout; a limit of 0 in the region is the
 * library's unlimited path, which adds no driver calls): unlimited, limited at
 * CUDA_DEVICE_SM_LIMIT, unlimited again. The limited rate is compared with the mean of the two
 * unlimited ones (paired: the host's load drifts). Prints
 *   streams_bench: N streams, limit L%: thr X% of unlimited (...), device busy B%, charged C%,
 *   slowest stream S% of the average
 * Checks (STREAMS_BENCH_MIN_THR, percent, default 0 = print only): throughput >= that share of
 * the unlimited rate; always: device busy and charged <= limit + 2 pp, charged >= busy - 3 pp,
 * every stream progresses (the slowest >= 1/4 of the average stream).
 */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "check.h"

long long fakeCudaBusyNs(int ordinal);
long long fakeCudaSmBusyNs(int ordinal);
unsigned long fakeCudaDriverCalls(int kind); /* 0 launches, 1 event records, 2 event queries */

#define MAX_N 128

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct {
  int n;
  unsigned blocks;
  CUstream st[MAX_N];
  CUevent ev[MAX_N][2];
  int out[MAX_N], oldest[MAX_N];
  long done[MAX_N];
} A;

/* The bench's loop for `secs`: completions per second; *slowest = the slowest stream's share of
 * the average stream (percent). */
static double run_loop(double secs, double *slowest) {
  long d0[MAX_N];
  for (int i = 0; i < A.n; i++) d0[i] = A.done[i];
  double t0 = now_s();
  while (now_s() - t0 < secs) {
    for (int i = 0; i < A.n; i++) {
      while (A.out[i] > 0 && cuEventQuery(A.ev[i][A.oldest[i]]) == CUDA_SUCCESS) {
        A.oldest[i] ^= 1;
        A.out[i]--;
        A.done[i]++;
      }
      while (A.out[i] < 2) {
        CHECK(cuLaunchKernel(NULL, A.blocks, 1, 1, 256, 1, 1, 0, A.st[i], NULL, NULL) ==
              CUDA_SUCCESS);
        CHECK(cuEventRecord(A.ev[i][A.oldest[i] ^ A.out[i]], A.st[i]) == CUDA_SUCCESS);
        A.out[i]++;
      }
    }
  }
  double wall = now_s() - t0;
  long total = 0, min = -1;
  for (int i = 0; i < A.n; i++) {
    long k = A.done[i] - d0[i];
    total += k;
    if (min < 0 || k < min) min = k;
  }
  *slowest = total > 0 ? 100.0 * (double)min * A.n / (double)total : 0;
  return (double)total / wall;
}

static vgpu_region_t *region_rw(void) {
  const char *p = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  int fd = p ? open(p, O_RDWR) : -1;
  CHECK(fd >= 0);
  void *m = mmap(NULL, VGPU_REGION_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  CHECK(m != MAP_FAILED);
  return m;
}

int main(void) {
  const char *lim_env = getenv("CUDA_DEVICE_SM_LIMIT"), *n_env = getenv("STREAMS");
  CHECK(lim_env != NULL && n_env != NULL && getenv("FAKE_CUDA_KERNEL_US") != NULL);
  int limit = atoi(lim_env);
  A.n = atoi(n_env);
  CHECK(A.n >= 1 && A.n <= MAX_N && limit > 0 && limit < 100);
  A.blocks = A.n >= 132 ? 1 : 132 / (unsigned)A.n;
  const char *min_env = getenv("STREAMS_BENCH_MIN_THR");
  double min_thr = min_env ? atof(min_env) : 0;
  double secs = getenv("STREAMS_BENCH_S") ? atof(getenv("STREAMS_BENCH_S")) : 2.0;
  CHECK(cuInit(0) == CUDA_SUCCESS);
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, 1) == CUDA_SUCCESS); /* the region exists from here on */
  for (int i = 0; i < A.n; i++) {
    CHECK(cuStreamCreate(&A.st[i], CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    for (int k = 0; k < 2; k++)
      CHECK(cuEventCreate(&A.ev[i][k], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
  }
  vgpu_region_t *r = region_rw();
  const vgpu_region_ext_t *x = (const vgpu_region_ext_t *)((const char *)r + VGPU_EXT_OFFSET);
  double slow;
  __atomic_store_n(&r->sm_limit[0], 0, __ATOMIC_RELEASE);
  run_loop(0.2, &slow);
  double sb0 = (double)fakeCudaBusyNs(0), sm0 = (double)fakeCudaSmBusyNs(0), st0 = now_s();
  double solo1 = run_loop(secs / 2, &slow);
  double solo_busy = 100.0 * ((double)fakeCudaBusyNs(0) - sb0) / ((now_s() - st0) * 1e9);
  double solo_sm = 100.0 * ((double)fakeCudaSmBusyNs(0) - sm0) / ((now_s() - st0) * 1e9);
  __atomic_store_n(&r->sm_limit[0], (uint64_t)limit, __ATOMIC_RELEASE);
  run_loop(0.5, &slow);
  double c0 = (double)__atomic_load_n(&x->devices[0].busy_ns, __ATOMIC_ACQUIRE);
  double b0 = (double)fakeCudaBusyNs(0), t0 = now_s(), lsm0 = (double)fakeCudaSmBusyNs(0);
  uint64_t dl0 = x->devices[0].launches_delayed, th0 = x->devices[0].throttled_ns;
  unsigned long l0 = fakeCudaDriverCalls(0), e0 = fakeCudaDriverCalls(1) + fakeCudaDriverCalls(2);
  double slow_lim;
  double lim = run_loop(secs, &slow_lim);
  double wall_ns = (now_s() - t0) * 1e9;
  double busy = 100.0 * ((double)fakeCudaBusyNs(0) - b0) / wall_ns;
  double charged =
      100.0 * ((double)__atomic_load_n(&x->devices[0].busy_ns, __ATOMIC_ACQUIRE) - c0) / wall_ns;
  double lim_sm = 100.0 * ((double)fakeCudaSmBusyNs(0) - lsm0) / wall_ns;
  unsigned long nl = fakeCudaDriverCalls(0) - l0;
  double calls = nl ? (double)(fakeCudaDriverCalls(1) + fakeCudaDriverCalls(2) - e0) / nl : 0;
  double waits = (double)(x->devices[0].launches_delayed - dl0) * 1e9 / wall_ns;
  double wait_ms = (double)(x->devices[0].throttled_ns - th0) / 1e6 * 1e9 / wall_ns;
  __atomic_store_n(&r->sm_limit[0], 0, __ATOMIC_RELEASE);
  run_loop(0.2, &slow);
  double solo2 = run_loop(secs / 2, &slow);
  double solo = (solo1 + solo2) / 2, thr = 100.0 * lim / solo;
  fprintf(stderr,
          "streams_bench: %d streams, limit %d%%: thr %.1f%% of unlimited (%.0f/s; unlimited "
          "%.0f and %.0f/s, busy %.1f%%, SMs %.1f%%), device busy %.1f%% (SMs %.1f%%), charged %.1f%%, slowest stream %.0f%% of the "
          "average, %.2f event calls per launch (the loop's own: ~2-3); gate: %.0f waits/s, %.0f ms/s\n",
          A.n, limit, thr, lim, solo1, solo2, solo_busy, solo_sm, busy, lim_sm, charged, slow_lim, calls, waits, wait_ms);
  CHECK(charged <= limit + 2.0 && busy <= limit + 2.0);
  CHECK(charged >= busy - 3.0);
  CHECK(slow_lim >= 25.0);
  CHECK(thr >= min_thr);
  return 0;
}

// limiter_trace.cu — the SM limiter's instance API on a real GPU, one line per admitted launch:
// what it charged so far, what it waited, its estimate, the context switches it saw. For
// diagnosing a cell of the limiter benchmark without instrumenting the library.
//
//   make -C libvgpu/gpu limiter_trace            (build/gpu/limiter_trace)
//   limiter_trace <limit %> <kernel ms> <kernels> <ipus from limiter_bench --calibrate>
//
// The workload is limiter_bench's: one fixed-work kernel per batch on the legacy default stream,
// at most three batches in flight. Standalone limiter (no region), policy force.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

#define _Static_assert static_assert  // the region header is C11
extern "C" {
#include "limiter.h"
}

__global__ void fma_spin(float *sink, long long iters) {
  float a = threadIdx.x * 1e-3f, b = 1.000001f, c = 0.999999f;
  for (long long i = 0; i < iters; i++) {
    a = fmaf(a, b, c);
    b = fmaf(b, c, a * 1e-9f);
  }
  if (a == 1234.5f && b == 6.5f) sink[blockIdx.x] = a;
}

static double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s <limit %%> <kernel ms> <kernels> <ipus>\n", argv[0]);
    return 2;
  }
  int limit = atoi(argv[1]), n = atoi(argv[3]);
  double kernel_ms = atof(argv[2]), ipus = atof(argv[4]);
  cudaFree(0);  // primary context current
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  float *sink = nullptr;
  cudaMalloc(&sink, 1 << 20);
  vgpu_limiter_driver_t drv = {};
  drv.cuEventCreate = cuEventCreate;
  drv.cuEventDestroy = cuEventDestroy_v2;
  drv.cuEventRecord = cuEventRecord;
  drv.cuEventQuery = cuEventQuery;
  drv.cuEventSynchronize = cuEventSynchronize;
  drv.cuEventElapsedTime = cuEventElapsedTime;
  drv.cuStreamCreate = cuStreamCreate;
  drv.cuStreamDestroy = cuStreamDestroy_v2;
  drv.cuCtxGetCurrent = cuCtxGetCurrent;
  vgpu_limiter_config_t cfg = {};
  cfg.device_count = 1;
  cfg.policy = VGPU_LIMITER_POLICY_FORCE;
  cfg.sm_limit_percent[0] = limit;
  vgpu_limiter_t *lim = vgpu_limiter_create(&drv, &cfg);
  if (lim == nullptr) return 1;
  long long iters = (long long)(ipus * kernel_ms * 1000.0 + 0.5);
  cudaEvent_t done[3];
  for (auto &e : done) cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  double t0 = now_s();
  for (int b = 0; b < n; b++) {
    double ta = now_s();
    vgpu_limiter_before(lim, 0, 0);
    double tb = now_s();
    fma_spin<<<sms * 8, 256>>>(sink, iters);
    vgpu_limiter_after(lim, 0, 0);
    cudaEventRecord(done[b % 3], 0);
    vgpu_limiter_stats_t st;
    vgpu_limiter_stats(lim, 0, &st);
    printf("launch %3d at %8.3f s (waited %7.3f s): charged %8.3f s, throttled %8.3f s, "
           "estimate %8.3f ms, in flight %llu, switches %llu (%.3f ms), trim %+.3f\n",
           b, tb - t0, tb - ta, st.busy_ns / 1e9, st.throttled_ns / 1e9, st.estimate_ns / 1e6,
           (unsigned long long)st.in_flight, (unsigned long long)st.switches,
           st.switch_ns / 1e6, st.trim);
    fflush(stdout);
    if (b >= 2) cudaEventSynchronize(done[(b - 2) % 3]);
  }
  cudaDeviceSynchronize();
  double wall = now_s() - t0;
  vgpu_limiter_poll(lim, 0);
  vgpu_limiter_stats_t st;
  vgpu_limiter_stats(lim, 0, &st);
  printf("done: %d kernels of %.0f ms in %.3f s = %.1f %% (limit %d), charged %.3f s\n", n,
         kernel_ms, wall, 100.0 * n * kernel_ms / 1000.0 / wall, limit, st.busy_ns / 1e9);
  vgpu_limiter_destroy(lim);
  return 0;
}

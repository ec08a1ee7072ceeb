// mem_patterns_runtime.cu — the runtime-API side of gpu/mem_patterns.c (the runtime reaches the
// driver through cuGetProcAddress): stream-ordered allocations captured into graphs, and
// cudaDeviceSetLimit of the malloc heap. Same output as mem_patterns.c ("STEP", "RESULT mode=...").
//   mem_patterns_runtime capture <n> <mib>   n captures of cudaMallocAsync(<mib>) + memset (no
//                                            free), each instantiated and launched until refused;
//                                            then cudaFree all + cudaDeviceGraphMemTrim
//   mem_patterns_runtime setlimit            heap 8 GiB (over a 4 GiB limit), then 1 GiB
#include <cuda_runtime.h>
#include <pthread.h>

// vgpu_region.h states its layout with C11 _Static_assert; C++ spells it static_assert.
#define _Static_assert static_assert
#include "gpu_common.h"

static CUdevice g_dev;
static volatile int g_stop;
static volatile long long g_max;
static int g_oom;

static void *sampler(void *) {
  while (!g_stop) {
    long long v = nvml_self_used(g_dev);
    if (v > g_max) g_max = v;
    usleep(2000);
  }
  return NULL;
}
static long long settled() {
  cudaDeviceSynchronize();
  usleep(300000);
  long long v = nvml_self_used(g_dev);
  if (v > g_max) g_max = v;
  return v;
}
static void note(const char *what, cudaError_t rc) {
  if (rc == cudaErrorMemoryAllocation) g_oom++;
  long long v = nvml_self_used(g_dev);
  if (v > g_max) g_max = v;
  printf("STEP %s rc=%d nvml=%lld tracked=%llu\n", what, (int)rc, v, tracked_self(0));
  fflush(stdout);
  cudaGetLastError();
}

static int do_capture(int n, size_t size) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void *d[64];
  cudaGraphExec_t x[64];
  int launched = 0;
  for (int i = 0; i < n && i < 64; i++) {
    cudaGraph_t g;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    cudaError_t rc = cudaMallocAsync(&d[i], size, s);
    if (rc == cudaSuccess) cudaMemsetAsync(d[i], 1, size, s);
    cudaError_t erc = cudaStreamEndCapture(s, &g);
    note("capture", rc != cudaSuccess ? rc : erc);
    if (rc != cudaSuccess || erc != cudaSuccess) break;
    rc = cudaGraphInstantiate(&x[i], g, 0);
    note("instantiate", rc);
    if (rc != cudaSuccess) break;
    rc = cudaGraphLaunch(x[i], s);
    if (rc == cudaSuccess) rc = cudaStreamSynchronize(s);
    note("launch", rc);
    if (rc != cudaSuccess) {
      cudaGraphExecDestroy(x[i]);
      break;
    }
    launched++;
  }
  settled();
  printf("RESULT launched=%d of=%d\n", launched, n);
  for (int i = 0; i < launched; i++) {
    cudaFree(d[i]);
    cudaGraphExecDestroy(x[i]);
  }
  cudaDeviceSynchronize();
  cudaDeviceGraphMemTrim(0);
  return launched;
}

static int do_setlimit() {
  note("heap_8GiB", cudaDeviceSetLimit(cudaLimitMallocHeapSize, 8192ull * MiB));
  note("heap_1GiB", cudaDeviceSetLimit(cudaLimitMallocHeapSize, 1024ull * MiB));
  void *p = NULL;
  cudaError_t rc = cudaMalloc(&p, 3072ull * MiB); /* fits beside the context, not beside the heap */
  note("malloc_3GiB_after_heap", rc);
  if (rc == cudaSuccess) cudaFree(p);
  note("heap_default", cudaDeviceSetLimit(cudaLimitMallocHeapSize, 8ull * MiB));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  cudaFree(0);
  CK(cuDeviceGet(&g_dev, 0));
  void *warm;
  cudaMalloc(&warm, 2 * MiB);
  cudaFree(warm);
  long long base = settled();
  unsigned long long tbase = tracked_self(0);
  g_max = base;
  pthread_t t;
  pthread_create(&t, NULL, sampler, NULL);
  if (!strcmp(argv[1], "capture")) do_capture(atoi(argv[2]), (size_t)atoll(argv[3]) * MiB);
  else if (!strcmp(argv[1], "setlimit")) do_setlimit();
  else return 2;
  long long after = settled();
  g_stop = 1;
  pthread_join(t, NULL);
  printf("RESULT mode=%s base=%lld max=%lld after=%lld oom=%d tracked_base=%llu tracked_after=%llu\n", argv[1], base,
         (long long)g_max, after, g_oom, tbase, tracked_self(0));
  return 0;
}

// bench.cu — overhead benchmark: empty-kernel launch cost and 1 MiB cudaMalloc+cudaFree pairs.
//   bench launch <n>   n launches of an empty kernel, then one sync; prints microseconds/launch
//   bench alloc <n>    n pairs of cudaMalloc(1 MiB)+cudaFree; prints microseconds/pair
// run_memory_tests.sh runs it repeatedly, alternating with and without LD_PRELOAD, and reports
// medians and spreads.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__global__ void empty_kernel() {}

static double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s launch|alloc <n>\n", argv[0]);
    return 2;
  }
  long n = atol(argv[2]);
  cudaFree(0);  // create the context outside the timed region
  if (strcmp(argv[1], "launch") == 0) {
    for (int i = 0; i < 1000; i++) empty_kernel<<<1, 1>>>();
    cudaDeviceSynchronize();
    double t = now_s();
    for (long i = 0; i < n; i++) empty_kernel<<<1, 1>>>();
    cudaDeviceSynchronize();
    t = now_s() - t;
    if (cudaGetLastError() != cudaSuccess) return 3;
    printf("RESULT bench=launch us_per_op=%.4f\n", t * 1e6 / (double)n);
  } else {
    void *p;
    for (int i = 0; i < 100; i++) {
      cudaMalloc(&p, 1 << 20);
      cudaFree(p);
    }
    double t = now_s();
    for (long i = 0; i < n; i++) {
      if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return 3;
      cudaFree(p);
    }
    t = now_s() - t;
    printf("RESULT bench=alloc us_per_op=%.4f\n", t * 1e6 / (double)n);
  }
  return 0;
}

// startup_probe.cu — start-up cost under the library (issue 30): a process that initializes CUDA
// and makes its first allocation, printing how long after a common start instant (argv[1],
// epoch microseconds, taken by the launcher just before it started every process) the first
// allocation succeeded:  "FIRST_ALLOC_US <us>".
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <sys/time.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: startup_probe <start_epoch_us>\n");
    return 2;
  }
  long long start = atoll(argv[1]);
  void *p = nullptr;
  cudaError_t e = cudaMalloc(&p, 1 << 20);
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  long long t = (long long)tv.tv_sec * 1000000LL + tv.tv_usec;
  if (e != cudaSuccess) {
    fprintf(stderr, "startup_probe: cudaMalloc failed: %s\n", cudaGetErrorString(e));
    return 1;
  }
  printf("FIRST_ALLOC_US %lld\n", t - start);
  return 0;
}

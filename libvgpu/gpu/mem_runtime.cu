// mem_runtime.cu — runtime-API memory checks under libvgpu (cudart reaches the driver through
// cuGetProcAddress, so this proves the interposition path real applications use).
//   mem_runtime oom <chunk_mib>     cudaMalloc until it fails
//   mem_runtime async <chunk_mib>   cudaMallocAsync until it fails (stream-ordered pool)
// Prints "RESULT key=value ..." lines for run_memory_tests.sh.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

// The container's tracked bytes on region device 0, read at HAMi v1.2 offsets (C++ cannot include
// vgpu_region.h's C11 static asserts; the offsets are the ABI anyway).
static unsigned long long tracked_all() {
  const char *p = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  int fd = p ? open(p, O_RDONLY) : -1;
  if (fd < 0) return 0;
  void *m = mmap(NULL, 2008952, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return 0;
  const char *b = (const char *)m;
  int n = *(const int *)(b + 2008896);
  unsigned long long sum = 0;
  for (int i = 0; i < n && i < 1024; i++) {
    const char *slot = b + 1856 + 1960 * (size_t)i;
    if (*(const int *)slot == 0 || *(const int *)(slot + 1928) == 0) continue;
    sum += *(const unsigned long long *)(slot + 8 + 32);
  }
  munmap(m, 2008952);
  return sum;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s oom|async <chunk_mib>\n", argv[0]);
    return 2;
  }
  size_t chunk = (size_t)atoll(argv[2]) << 20;
  bool async = strcmp(argv[1], "async") == 0;
  size_t f0 = 0, t0 = 0;
  if (cudaMemGetInfo(&f0, &t0) != cudaSuccess) return 2;
  size_t n = 0;
  void *p;
  cudaError_t rc;
  for (;;) {
    rc = async ? cudaMallocAsync(&p, chunk, 0) : cudaMalloc(&p, chunk);
    if (rc != cudaSuccess) break;
    if (async) cudaStreamSynchronize(0);
    n++;
  }
  cudaGetLastError();
  size_t f1 = 0, t1 = 0;
  cudaMemGetInfo(&f1, &t1);
  printf("RESULT mode=runtime_%s chunk=%zu allocated=%zu last_err=%d tracked_all=%llu "
         "meminfo_total=%zu meminfo_free_before=%zu meminfo_free_after=%zu\n",
         argv[1], chunk, n * chunk, (int)rc, tracked_all(), t0, f0, f1);
  return 0;
}

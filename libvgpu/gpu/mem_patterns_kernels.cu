// mem_patterns_kernels.cu — device code for gpu/mem_patterns.c (built with nvcc -cubin): a kernel
// that uses the device malloc heap, and a module whose __device__ array is module memory that no
// allocation call shows.
#define BIG_GLOBAL_BYTES (512u << 20)
__device__ char big_global[BIG_GLOBAL_BYTES];

extern "C" __global__ void use_heap(unsigned long long bytes, int *ok) {
  char *p = (char *)malloc(bytes);
  if (p) {
    p[0] = 1;
    p[bytes - 1] = 1;
    free(p);
    *ok = 1;
  }
}

extern "C" __global__ void touch_global(void) {
  big_global[(unsigned long long)blockIdx.x * 4096u + threadIdx.x] = 1;
}

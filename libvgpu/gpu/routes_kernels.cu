// routes_kernels.cu — kernels for routes_probe.c (nvcc -cubin -arch=sm_90): a spinning kernel for
// SM shares, a kernel with a 32 KiB per-thread local array, and a module with 512 MiB of globals.
extern "C" __global__ void spin(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

extern "C" __global__ void lmem32k(int *out, int n) {
  volatile int a[8192]; // 32 KiB per thread, indexed at run time: local memory
  for (int i = 0; i < 8192; i++) a[i] = i * n;
  if (out) out[threadIdx.x] = a[(threadIdx.x * 7 + n) % 8192];
}

__device__ char big_global[512u << 20];
extern "C" __global__ void touch_big(int n) {
  if (threadIdx.x == 0) big_global[(size_t)blockIdx.x * 4096 % (512u << 20)] = (char)n;
}

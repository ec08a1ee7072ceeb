// routes_kernels.cu — kernels for routes_probe.c (nvcc -cubin -arch=sm_90): a spinning kernel for
// SM shares, a kernel with a 32 KiB per-thread local array, a module with 512 MiB of globals, and a
// kernel spinning for a given time (route 20).
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

// A kernel that spins for `ns` nanoseconds of the GPU's global timer (route 20: a persistent kernel).
extern "C" __global__ void spin_ns(long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while ((long long)(t - t0) < ns);
}

// workload.cu — one "container" of the attribution proof: creates its CUDA context, allocates
// memory, registers itself in its shared region the way HAMi-core does (slot pid = its pid in its
// namespace, hostpid = that same pid, as HAMi-core's NVML diff records it inside a pid namespace),
// then runs kernels at a given intensity until killed or the duration ends.
//
//   workload <busy|matmul|medium|idle> <cache-file> <alloc-MiB> <seconds>
//
// busy: back-to-back SM-saturating spin kernels; matmul: back-to-back 4096 x 4096 single-precision
// matrix products (shared-memory tiles: real loads, stores and FMAs, not a clock spin); medium:
// 20 ms kernel then 30 ms sleep (~40 % duty when alone); idle: context and memory, no kernels.
#include <cuda_runtime.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>

#include "proof_region.h"

static volatile sig_atomic_t g_stop = 0;
static void on_signal(int) { g_stop = 1; }

__global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// C = A x B for n x n row-major matrices, one 16 x 16 tile of C per block.
constexpr int kTile = 16;
__global__ void matmul(const float *a, const float *b, float *c, int n) {
  __shared__ float ta[kTile][kTile];
  __shared__ float tb[kTile][kTile];
  int row = blockIdx.y * kTile + threadIdx.y;
  int col = blockIdx.x * kTile + threadIdx.x;
  float sum = 0.0f;
  for (int t = 0; t < n; t += kTile) {
    ta[threadIdx.y][threadIdx.x] = a[row * n + t + threadIdx.x];
    tb[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + col];
    __syncthreads();
    for (int k = 0; k < kTile; k++) {
      sum += ta[threadIdx.y][k] * tb[k][threadIdx.x];
    }
    __syncthreads();
  }
  c[row * n + col] = sum;
}

#define CHECK(call)                                                                \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "workload: %s failed: %s\n", #call, cudaGetErrorString(e_)); \
      return 2;                                                                    \
    }                                                                              \
  } while (0)

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s <busy|matmul|medium|idle> <cache-file> <alloc-MiB> <seconds>\n",
            argv[0]);
    return 1;
  }
  const char *mode = argv[1];
  long mib = strtol(argv[3], nullptr, 10);
  long seconds = strtol(argv[4], nullptr, 10);
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);

  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  char uuid[64];
  const unsigned char *u = reinterpret_cast<const unsigned char *>(prop.uuid.bytes);
  snprintf(uuid, sizeof uuid,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
           u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);

  if (proof_region_open(argv[2], uuid, 16ULL << 30) != 0 || proof_region_register() != 0) {
    return 3;
  }
  CHECK(cudaFree(nullptr));                 // creates the primary context
  proof_region_set_hostpid((int)getpid());  // HAMi-core inside a pid namespace: its own pid
  void *buffer = nullptr;
  size_t bytes = (size_t)mib << 20;
  CHECK(cudaMalloc(&buffer, bytes));
  CHECK(cudaMemset(buffer, 1, bytes));
  proof_region_add_memory(bytes);

  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  long long cycles_20ms = (long long)clock_khz * 20;
  int blocks = prop.multiProcessorCount * 8;
  printf("workload %s pid %d uuid %s alloc %ld MiB sms %d\n", mode, (int)getpid(), uuid, mib,
         prop.multiProcessorCount);
  fflush(stdout);

  // matmul: three 4096 x 4096 matrices (192 MiB) besides the allocation above.
  const int n = 4096;
  float *ma = nullptr, *mb = nullptr, *mc = nullptr;
  if (strcmp(mode, "matmul") == 0) {
    size_t mbytes = (size_t)n * n * sizeof(float);
    CHECK(cudaMalloc(&ma, mbytes));
    CHECK(cudaMalloc(&mb, mbytes));
    CHECK(cudaMalloc(&mc, mbytes));
    CHECK(cudaMemset(ma, 0, mbytes));
    CHECK(cudaMemset(mb, 0, mbytes));
    proof_region_add_memory(3 * mbytes);
  }

  time_t end = time(nullptr) + seconds;
  while (!g_stop && time(nullptr) < end) {
    if (strcmp(mode, "busy") == 0) {
      for (int i = 0; i < 5 && !g_stop; i++) {
        spin<<<blocks, 256>>>(cycles_20ms);
        proof_region_kernel_launched();
      }
      CHECK(cudaDeviceSynchronize());
    } else if (strcmp(mode, "matmul") == 0) {
      for (int i = 0; i < 5 && !g_stop; i++) {
        matmul<<<dim3(n / kTile, n / kTile), dim3(kTile, kTile)>>>(ma, mb, mc, n);
        proof_region_kernel_launched();
      }
      CHECK(cudaDeviceSynchronize());
    } else if (strcmp(mode, "medium") == 0) {
      spin<<<blocks, 256>>>(cycles_20ms);
      proof_region_kernel_launched();
      CHECK(cudaDeviceSynchronize());
      usleep(30 * 1000);
    } else {
      usleep(100 * 1000);
    }
  }
  proof_region_unregister();
  cudaFree(buffer);
  cudaFree(ma);
  cudaFree(mb);
  cudaFree(mc);
  return 0;
}

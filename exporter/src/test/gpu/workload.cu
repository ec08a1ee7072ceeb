// workload.cu — one "container" of the attribution proof: creates its CUDA context, allocates
// memory, registers itself in its shared region the way HAMi-core does (slot pid = its pid in its
// namespace, hostpid = that same pid, as HAMi-core's NVML diff records it inside a pid namespace),
// then runs kernels at a given intensity until killed or the duration ends.
//
//   workload <busy|medium|idle> <cache-file> <alloc-MiB> <seconds>
//
// busy: back-to-back SM-saturating spin kernels; medium: 20 ms kernel then 30 ms sleep (~40 %
// duty when alone); idle: context and memory, no kernels.
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
    fprintf(stderr, "usage: %s <busy|medium|idle> <cache-file> <alloc-MiB> <seconds>\n", argv[0]);
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

  time_t end = time(nullptr) + seconds;
  while (!g_stop && time(nullptr) < end) {
    if (strcmp(mode, "busy") == 0) {
      for (int i = 0; i < 5 && !g_stop; i++) {
        spin<<<blocks, 256>>>(cycles_20ms);
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
  return 0;
}

/*
 * duty.c — one "container" of the sharing proof (sharing_proof.sh): a CUDA driver-API program
 * with a known duty cycle. Every PERIOD ms it launches one kernel that spins for BUSY % of the
 * period on every SM (timed by the GPU's %globaltimer, so the busy time does not depend on the
 * SM clock), waits for it, and sleeps the rest of the period. It allocates and touches ALLOC MiB
 * first, so its NVML memory is its context plus that allocation, steady for the whole run.
 *
 *   duty <busy-percent> <alloc-MiB> <seconds> [period-ms]
 *
 * Prints "duty pid <pid> busy <pct> alloc <MiB> sms <n>" once started, and at the end the busy
 * share it measured itself (launch to completion over wall time): "measured busy <pct>".
 * Linked against libcuda.so.1 like any application: on the GPU machine the driver's; in the dry
 * run the repository's fake libcuda (kernels then last FAKE_CUDA_KERNEL_US), with libvgpu
 * preloaded or not, exactly as on the GPU.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* spin(ns): every thread spins until the GPU's nanosecond timer passed ns since it started. */
static const char kPtx[] =
    ".version 7.8\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry spin(.param .u64 ns)\n"
    "{\n"
    "  .reg .pred %p<2>;\n"
    "  .reg .b64 %rd<6>;\n"
    "  ld.param.u64 %rd1, [ns];\n"
    "  mov.u64 %rd2, %globaltimer;\n"
    "LOOP:\n"
    "  mov.u64 %rd3, %globaltimer;\n"
    "  sub.s64 %rd4, %rd3, %rd2;\n"
    "  setp.lt.u64 %p1, %rd4, %rd1;\n"
    "  @%p1 bra LOOP;\n"
    "  ret;\n"
    "}\n";

static volatile sig_atomic_t g_stop = 0;
static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

#define CHECK(call)                                              \
  do {                                                           \
    CUresult r_ = (call);                                        \
    if (r_ != CUDA_SUCCESS) {                                    \
      fprintf(stderr, "duty: %s failed: %d\n", #call, (int)r_); \
      return 2;                                                  \
    }                                                            \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <busy-percent> <alloc-MiB> <seconds> [period-ms]\n", argv[0]);
    return 1;
  }
  long busy = strtol(argv[1], NULL, 10);
  long mib = strtol(argv[2], NULL, 10);
  long seconds = strtol(argv[3], NULL, 10);
  long period_ms = argc > 4 ? strtol(argv[4], NULL, 10) : 50;
  if (busy < 0 || busy > 100 || mib < 0 || seconds <= 0 || period_ms <= 0) {
    fprintf(stderr, "duty: bad arguments\n");
    return 1;
  }
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);

  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction spin;
  CUdeviceptr buf = 0;
  int sms = 0;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev)); /* what the runtime does */
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  CHECK(cuModuleLoadData(&mod, kPtx));
  CHECK(cuModuleGetFunction(&spin, mod, "spin"));
  size_t bytes = (size_t)mib << 20;
  if (bytes > 0) {
    CHECK(cuMemAlloc(&buf, bytes));
    CHECK(cuMemsetD8(buf, 1, bytes));
    CHECK(cuCtxSynchronize());
  }
  printf("duty pid %d busy %ld alloc %ld sms %d\n", (int)getpid(), busy, mib, sms);
  fflush(stdout);

  unsigned long long ns = (unsigned long long)(period_ms * 1000000LL * busy / 100);
  void *params[] = {&ns};
  long long start = now_ns(), end = start + seconds * 1000000000LL, busy_ns = 0;
  unsigned blocks = (unsigned)(sms > 0 ? sms : 1) * 2;
  while (!g_stop && now_ns() < end) {
    long long t0 = now_ns();
    if (ns > 0) {
      CHECK(cuLaunchKernel(spin, blocks, 1, 1, 128, 1, 1, 0, NULL, params, NULL));
      CHECK(cuCtxSynchronize());
    }
    long long t1 = now_ns();
    busy_ns += t1 - t0;
    long long rest = t0 + period_ms * 1000000LL - t1;
    if (rest > 0) {
      struct timespec r = {rest / 1000000000LL, rest % 1000000000LL};
      nanosleep(&r, NULL);
    }
  }
  long long wall = now_ns() - start;
  printf("measured busy %.1f\n", wall > 0 ? 100.0 * (double)busy_ns / (double)wall : 0.0);
  fflush(stdout);
  if (buf) cuMemFree(buf);
  cuModuleUnload(mod);
  cuDevicePrimaryCtxRelease(dev);
  return 0;
}

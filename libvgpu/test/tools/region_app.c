/*
 * region_app.c — a minimal CUDA application for producing a region file with the real libvgpu:
 * run it under LD_PRELOAD=build/libvgpu.so against the fake libcuda. It allocates MIB MiB on
 * device 0, prints "ready <pid>", then waits for stdin to close (clean exit) or to be killed
 * (leaving a dead slot behind, as a SIGKILLed training job does).
 * Usage: region_app MIB
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
  CUcontext ctx;
  CUdeviceptr ptr;
  char buf[64];
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
  if (cuInit(0) != CUDA_SUCCESS) return 10;
  if (cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS) return 11;
  if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return 12;
  if (cuMemAlloc_v2(&ptr, mib << 20) != CUDA_SUCCESS) return 13;
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  while (read(0, buf, sizeof buf) > 0) {
  }
  cuMemFree_v2(ptr);
  return 0;
}

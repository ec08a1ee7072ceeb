/*
 * libctor.c — a library whose constructor uses the driver before main() and, depending on load
 * order, before any libvgpu initialisation has run (libfaketime's test_constructors idea). Linked
 * into test/preload/cases; the "ctor" case checks its allocation was counted.
 * With VGPU_CTOR_ALLOC unset the constructor does nothing.
 */
#include <cuda.h>
#include <stdlib.h>

CUdeviceptr vgpu_ctor_ptr;
int vgpu_ctor_rc = -1;

__attribute__((constructor)) static void ctor_alloc(void) {
  if (!getenv("VGPU_CTOR_ALLOC")) return;
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
      cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
    return;
  vgpu_ctor_rc = (int)cuMemAlloc(&vgpu_ctor_ptr, 24u << 20);
}

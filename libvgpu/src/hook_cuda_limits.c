/*
 * hook_cuda_limits.c — device-side reservations a context makes for its kernels: cuCtxSetLimit of
 * the malloc heap (CU_LIMIT_MALLOC_HEAP_SIZE), the printf FIFO (CU_LIMIT_PRINTF_FIFO_SIZE) and the
 * per-thread stack (CU_LIMIT_STACK_SIZE). The driver backs them with device memory that no
 * allocation call shows, so raising one is charged like an allocation, before the driver is asked
 * (refused with CUDA_ERROR_OUT_OF_MEMORY when it does not fit), and released when the limit is
 * lowered again or the context goes away (cuCtxDestroy, last primary release, reset).
 *
 * What is charged once the application sets a limit:
 *   heap, printf FIFO   the whole size: the driver allocates them at the first launch of a kernel
 *                       that needs them, after the context was measured (H100, driver 580: a 1 GiB
 *                       heap shows in NVML as +1028 MiB at the first kernel that mallocs, nothing at
 *                       cuCtxSetLimit), so they are charged ahead, at the set;
 *   stack               (new - the size the context had when first seen) bytes per thread x every
 *                       thread the device can hold at once (multiprocessors x max threads per
 *                       multiprocessor): the driver sizes local memory for all resident threads,
 *                       and the default stack is part of the measured context.
 * Records are one per (context, limit), tied to the context so its destruction drops them.
 */
#include "hook.h"

uint64_t vgpu_resident_threads(void) {
  CUdevice dev;
  int sms = 0, threads = 0;
  if (!vgpu_cuda.cuCtxGetDevice || !vgpu_cuda.cuDeviceGetAttribute ||
      vgpu_cuda.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
    return 0;
  if (vgpu_cuda.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS ||
      vgpu_cuda.cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev) !=
          CUDA_SUCCESS)
    return 0;
  return sms > 0 && threads > 0 ? (uint64_t)sms * (uint64_t)threads : 0;
}

static uint64_t charge_for(CUlimit limit, uint64_t first_seen, uint64_t value) {
  if (limit != CU_LIMIT_STACK_SIZE) return value;
  if (value <= first_seen) return 0;
  uint64_t extra = value - first_seen;
  if (limit != CU_LIMIT_STACK_SIZE) return extra;
  uint64_t f = vgpu_resident_threads();
  if (!f) return extra;
  return extra > UINT64_MAX / f ? UINT64_MAX : extra * f;
}

VGPU_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  VGPU_HOOK_BEGIN(cuCtxSetLimit, (limit, value));
  if (limit != CU_LIMIT_MALLOC_HEAP_SIZE && limit != CU_LIMIT_PRINTF_FIFO_SIZE && limit != CU_LIMIT_STACK_SIZE)
    return VGPU_CALL_REAL(cuCtxSetLimit, (limit, value));
  uintptr_t ctx = vgpu_current_ctx();
  int ridx = vgpu_current_ridx();
  if (!ctx || ridx < 0) return VGPU_CALL_REAL(cuCtxSetLimit, (limit, value));
  uint64_t key = ((uint64_t)ctx << 2) | (uint64_t)limit;
  struct vgpu_track_rec r;
  if (!vgpu_track_get(VGPU_TRACK_CTX_LIMIT, key, &r)) {
    size_t cur = 0;
    if (!vgpu_cuda.cuCtxGetLimit || VGPU_CALL_REAL(cuCtxGetLimit, (&cur, limit)) != CUDA_SUCCESS) cur = 0;
    struct vgpu_track_rec fresh = {.key = key, .bytes = 0, .ctx = ctx, .aux = cur, .kind = VGPU_TRACK_CTX_LIMIT,
                                   .ridx = (int8_t)ridx, .mem_kind = VGPU_MEM_DATA};
    r = fresh;
  }
  uint64_t want = charge_for(limit, r.aux, value);
  if (want > r.bytes && vgpu_mem_reserve(ridx, want - r.bytes, VGPU_MEM_DATA) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = VGPU_CALL_REAL(cuCtxSetLimit, (limit, value));
  if (rc != CUDA_SUCCESS) {
    if (want > r.bytes) vgpu_mem_release(ridx, want - r.bytes, VGPU_MEM_DATA);
    return rc;
  }
  if (want < r.bytes) vgpu_mem_release(ridx, r.bytes - want, VGPU_MEM_DATA);
  r.bytes = want;
  if (!vgpu_track_put(&r)) VGPU_LOG_ERROR("out of host memory tracking a context limit");
  return rc;
}

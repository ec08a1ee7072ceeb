/*
 * hook_cuda_lmem.c — local memory a kernel makes the driver reserve at its launch. A context holds
 * local memory for every thread the device can run at once (multiprocessors x max threads per
 * multiprocessor) at the largest per-thread size it has needed: its stack limit, or the local size
 * of the largest kernel launched in it (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES). Launching a kernel
 * that needs more grows it before the kernel runs (H200, driver 580: one launch of a kernel with a
 * 32 KiB per-thread array grew the context by 8.2 GiB) and it stays until the context goes away.
 *
 * So before a launch, a kernel needing more per thread than the context holds (the larger of the
 * stack limit now and the largest kernel charged so far) is charged the growth, refused with
 * CUDA_ERROR_OUT_OF_MEMORY when it does not fit (as the driver does on a full device). The record
 * (one per context) goes with the context (cuCtxDestroy, last primary release, reset). A raised
 * stack limit and a large kernel are charged separately, so both together can count up to one
 * growth twice: on the safe side.
 *
 * Cost: a per-thread cache of (function, context) pairs already seen skips every query on the
 * launches that follow (with or without a memory limit).
 */
#include <pthread.h>

#include "hook.h"

#define LMEM_CACHE 8
static __thread struct {
  CUfunction f;
  uintptr_t ctx;
  uint64_t gen;
} t_cache[LMEM_CACHE];
static pthread_mutex_t g_lmem_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t func_local_bytes(CUfunction f) {
  int v = 0;
  if (vgpu_cuda.cuFuncGetAttribute &&
      VGPU_CALL_REAL(cuFuncGetAttribute, (&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f)) == CUDA_SUCCESS && v > 0)
    return (uint64_t)v;
  /* A context-independent CUkernel passed as a function. */
  CUdevice dev;
  if (vgpu_cuda.cuKernelGetAttribute && vgpu_cuda.cuCtxGetDevice && vgpu_cuda.cuCtxGetDevice(&dev) == CUDA_SUCCESS &&
      VGPU_CALL_REAL(cuKernelGetAttribute, (&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, (CUkernel)f, dev)) ==
          CUDA_SUCCESS &&
      v > 0)
    return (uint64_t)v;
  return 0;
}

bool vgpu_lmem_before_launch(CUfunction f) {
  if (f == NULL) return true;
  uintptr_t ctx = vgpu_current_ctx();
  if (!ctx) return true; /* launched in a stream's context: not charged (README, routes) */
  uint64_t gen = vgpu_track_ctx_gen();
  size_t slot = ((uintptr_t)f >> 4 ^ ctx >> 4) % LMEM_CACHE;
  if (t_cache[slot].f == f && t_cache[slot].ctx == ctx && t_cache[slot].gen == gen) return true;
  int ridx = vgpu_current_ridx();
  bool limited = ridx >= 0 && vgpu_mem_limit(ridx) != 0; /* limits are set when the region is created */
  uint64_t need = limited ? func_local_bytes(f) : 0;
  bool ok = true;
  if (need > 0) {
    size_t stack = 0;
    if (!vgpu_cuda.cuCtxGetLimit || VGPU_CALL_REAL(cuCtxGetLimit, (&stack, CU_LIMIT_STACK_SIZE)) != CUDA_SUCCESS)
      stack = 0;
    uint64_t key = ((uint64_t)ctx << 2) | 3u; /* 3: beside the cuCtxSetLimit records (hook_cuda_limits.c) */
    pthread_mutex_lock(&g_lmem_mu);
    struct vgpu_track_rec r;
    if (!vgpu_track_get(VGPU_TRACK_CTX_LIMIT, key, &r)) {
      struct vgpu_track_rec fresh = {.key = key, .ctx = ctx, .kind = VGPU_TRACK_CTX_LIMIT, .ridx = (int8_t)ridx,
                                     .mem_kind = VGPU_MEM_DATA};
      r = fresh;
    }
    uint64_t have = r.aux > stack ? r.aux : (uint64_t)stack; /* bytes per thread the context holds */
    if (need > have) {
      uint64_t threads = vgpu_resident_threads();
      uint64_t grow = threads ? (need - have) * threads : need - have;
      if (vgpu_mem_reserve(ridx, grow, VGPU_MEM_DATA) != 0) {
        VGPU_LOG_ERROR("kernel needs %llu bytes of local memory per thread: the context's growth does not fit "
                       "the limit, launch refused",
                       (unsigned long long)need);
        ok = false;
      } else {
        r.aux = need;
        r.bytes += grow;
        if (!vgpu_track_put(&r)) VGPU_LOG_ERROR("out of host memory tracking local memory");
      }
    }
    pthread_mutex_unlock(&g_lmem_mu);
  }
  if (ok) {
    t_cache[slot].f = f;
    t_cache[slot].ctx = ctx;
    t_cache[slot].gen = gen;
  }
  return ok;
}

/*
 * hook_cuda_ctx.c — contexts count too: the primary context of each device once while retained,
 * and every context from cuCtxCreate. Their size is LIBVGPU_CONTEXT_SIZE when set (reserved
 * before creation), else what NVML reports for this process after minus before the creation
 * (reserved right after). Either way a context that does not fit the container's limit fails with
 * CUDA_ERROR_OUT_OF_MEMORY, as on a full GPU.
 * Destroying or resetting a context releases its allocations, which the driver frees with it.
 */
#include <pthread.h>
#include <string.h>

#include "hook.h"
#if __has_include("limiter.h")
#include "limiter.h"
#define VGPU_HAVE_LIMITER 1
#endif

#define VGPU_MAX_CUDA_DEVICES 64
#define VGPU_MAX_CONTEXT_BYTES (4ull << 30) /* sanity clamp for measured sizes */

static pthread_mutex_t g_ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int refs;
  uint64_t bytes;
  uintptr_t ctx;
} g_primary[VGPU_MAX_CUDA_DEVICES];

/* A forked child has no context yet: its first retain is counted again. */
static void ctx_atfork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g_ctx_mu = fresh;
  memset(g_primary, 0, sizeof g_primary);
}
__attribute__((constructor)) static void ctx_ctor(void) { pthread_atfork(NULL, NULL, ctx_atfork_child); }

struct ctx_measure {
  bool fixed;
  uint64_t before;
  bool have_before;
};

/* Before creating a context: reserve the configured minimum (LIBVGPU_CONTEXT_SIZE), if any, and
 * remember NVML's figure either way. */
static int ctx_pre(int ridx, struct ctx_measure *m) {
  const struct vgpu_config *cfg = vgpu_config_get();
  m->fixed = cfg->context_size_set;
  if (m->fixed && vgpu_mem_reserve(ridx, cfg->context_size, VGPU_MEM_CONTEXT) != 0) return -1;
  m->have_before = vgpu_nvml_process_used(ridx, &m->before);
  if (!m->have_before) m->before = 0;
  return 0;
}

/* After: the bytes this context is charged with (already in the slot on return). */
#define CTX_DOES_NOT_FIT UINT64_MAX

/* Returns CTX_DOES_NOT_FIT when a measured context would take the container over its limit:
 * the caller undoes the creation and reports OUT_OF_MEMORY, as a full GPU would. */
static uint64_t ctx_post(int ridx, const struct ctx_measure *m, bool ok) {
  const struct vgpu_config *cfg = vgpu_config_get();
  uint64_t reserved = m->fixed ? cfg->context_size : 0;
  if (!ok) {
    if (reserved) vgpu_mem_release(ridx, reserved, VGPU_MEM_CONTEXT);
    return 0;
  }
  uint64_t after = 0;
  if (!vgpu_nvml_process_used(ridx, &after) || after <= m->before) return reserved;
  uint64_t size = after - m->before;
  if (size > VGPU_MAX_CONTEXT_BYTES) return reserved; /* someone else's allocation, not our context */
  VGPU_LOG_DEBUG("context on device %d measured at %llu bytes", ridx, (unsigned long long)size);
  /* The configured size is a minimum: a larger measured context is charged in full. */
  if (size <= reserved) return reserved;
  if (vgpu_mem_reserve(ridx, size - reserved, VGPU_MEM_CONTEXT) == 0) return size;
  if (reserved) vgpu_mem_release(ridx, reserved, VGPU_MEM_CONTEXT);
  return CTX_DOES_NOT_FIT;
}

static void drop_ctx_allocations(uintptr_t ctx) {
  if (!ctx) return;
  size_t n = vgpu_track_take_ctx(ctx, vgpu_release_rec);
  if (n) VGPU_LOG_DEBUG("context %p gone: released %zu allocations", (void *)ctx, n);
  vgpu_pools_refresh();
  vgpu_graph_mem_refresh();                  /* graph pools go with the device's last context */
  vgpu_untracked_reconcile(vgpu_current_ridx()); /* and so does its module memory */
#ifdef VGPU_HAVE_LIMITER
  vgpu_limiter_context_destroyed((CUcontext)ctx);
#endif
}

VGPU_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  VGPU_HOOK_BEGIN(cuDevicePrimaryCtxRetain, (pctx, dev));
  if (dev < 0 || dev >= VGPU_MAX_CUDA_DEVICES)
    return VGPU_CALL_REAL(cuDevicePrimaryCtxRetain, (pctx, dev));
  int ridx = vgpu_ridx(dev);
  pthread_mutex_lock(&g_ctx_mu);
  bool first = g_primary[dev].refs == 0;
  struct ctx_measure m = {0};
  if (first && ctx_pre(ridx, &m) != 0) {
    pthread_mutex_unlock(&g_ctx_mu);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult rc = VGPU_CALL_REAL(cuDevicePrimaryCtxRetain, (pctx, dev));
  if (first) {
    uint64_t bytes = ctx_post(ridx, &m, rc == CUDA_SUCCESS);
    if (bytes == CTX_DOES_NOT_FIT) {
      VGPU_CALL_REAL(cuDevicePrimaryCtxRelease_v2, (dev));
      pthread_mutex_unlock(&g_ctx_mu);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g_primary[dev].bytes = bytes;
  }
  if (rc == CUDA_SUCCESS) {
    g_primary[dev].refs++;
    if (pctx) g_primary[dev].ctx = (uintptr_t)*pctx;
  }
  pthread_mutex_unlock(&g_ctx_mu);
  return rc;
}

VGPU_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  VGPU_HOOK_BEGIN(cuDevicePrimaryCtxRelease_v2, (dev));
  CUresult rc = VGPU_CALL_REAL(cuDevicePrimaryCtxRelease_v2, (dev));
  if (rc != CUDA_SUCCESS || dev < 0 || dev >= VGPU_MAX_CUDA_DEVICES) return rc;
  uintptr_t gone = 0;
  pthread_mutex_lock(&g_ctx_mu);
  if (g_primary[dev].refs > 0 && --g_primary[dev].refs == 0) {
    vgpu_mem_release(vgpu_ridx(dev), g_primary[dev].bytes, VGPU_MEM_CONTEXT);
    g_primary[dev].bytes = 0;
    gone = g_primary[dev].ctx;
  }
  pthread_mutex_unlock(&g_ctx_mu);
  drop_ctx_allocations(gone);
  return rc;
}

VGPU_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  VGPU_HOOK_BEGIN(cuDevicePrimaryCtxReset_v2, (dev));
  CUresult rc = VGPU_CALL_REAL(cuDevicePrimaryCtxReset_v2, (dev));
  if (rc != CUDA_SUCCESS || dev < 0 || dev >= VGPU_MAX_CUDA_DEVICES) return rc;
  pthread_mutex_lock(&g_ctx_mu);
  uintptr_t ctx = g_primary[dev].ctx;
  pthread_mutex_unlock(&g_ctx_mu);
  drop_ctx_allocations(ctx); /* the context's size stays counted while it is retained */
  return rc;
}

static void ctx_created(int ridx, CUcontext ctx, uint64_t bytes) {
  struct vgpu_track_rec rec = {.key = (uint64_t)(uintptr_t)ctx, .bytes = bytes, .ctx = 0,
                               .kind = VGPU_TRACK_CTX, .ridx = (int8_t)ridx,
                               .mem_kind = VGPU_MEM_CONTEXT};
  vgpu_track_put(&rec);
}

#define CTX_CREATE_BODY(name, args)                                                                \
  int ridx = vgpu_ridx(dev);                                                                       \
  struct ctx_measure m = {0};                                                                      \
  pthread_mutex_lock(&g_ctx_mu);                                                                   \
  if (ctx_pre(ridx, &m) != 0) {                                                                    \
    pthread_mutex_unlock(&g_ctx_mu);                                                               \
    return CUDA_ERROR_OUT_OF_MEMORY;                                                               \
  }                                                                                                \
  CUresult rc = VGPU_CALL_REAL(name, args);                                                        \
  uint64_t bytes = ctx_post(ridx, &m, rc == CUDA_SUCCESS);                                         \
  pthread_mutex_unlock(&g_ctx_mu);                                                                 \
  if (bytes == CTX_DOES_NOT_FIT) {                                                                 \
    VGPU_CALL_REAL(cuCtxDestroy_v2, (*pctx));                                                      \
    return CUDA_ERROR_OUT_OF_MEMORY;                                                               \
  }                                                                                                \
  if (rc == CUDA_SUCCESS && pctx) ctx_created(ridx, *pctx, bytes);                                 \
  return rc

VGPU_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  VGPU_HOOK_BEGIN(cuCtxCreate_v2, (pctx, flags, dev));
  CTX_CREATE_BODY(cuCtxCreate_v2, (pctx, flags, dev));
}

VGPU_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                    unsigned int flags, CUdevice dev) {
  VGPU_HOOK_BEGIN(cuCtxCreate_v3, (pctx, paramsArray, numParams, flags, dev));
  CTX_CREATE_BODY(cuCtxCreate_v3, (pctx, paramsArray, numParams, flags, dev));
}

VGPU_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                    unsigned int flags, CUdevice dev) {
  VGPU_HOOK_BEGIN(cuCtxCreate_v4, (pctx, ctxCreateParams, flags, dev));
  CTX_CREATE_BODY(cuCtxCreate_v4, (pctx, ctxCreateParams, flags, dev));
}

VGPU_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  VGPU_HOOK_BEGIN(cuCtxDestroy_v2, (ctx));
  CUresult rc = VGPU_CALL_REAL(cuCtxDestroy_v2, (ctx));
  if (rc != CUDA_SUCCESS) return rc;
  struct vgpu_track_rec rec;
  if (vgpu_track_take(VGPU_TRACK_CTX, (uint64_t)(uintptr_t)ctx, &rec)) vgpu_release_rec(&rec);
  drop_ctx_allocations((uintptr_t)ctx);
  return rc;
}

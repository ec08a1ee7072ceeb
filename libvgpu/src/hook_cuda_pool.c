/*
 * hook_cuda_pool.c — stream-ordered allocations and memory pools, counted as what each pool
 * reserves (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), and the synchronize hooks where pools release.
 *
 * The table of known pools grows with the pools the process creates or allocates from; when it
 * cannot grow (host memory exhausted) the allocation or pool creation is refused: a pool is never
 * "not counted".
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hook.h"

/* ---- stream-ordered allocations: counted as what each pool reserves
 *
 * A pool maps physical memory in steps larger than most requests (measured on H100/H200, driver
 * 580: 32 MiB, default and explicit pools alike; a request grows the pool by
 * roundup(request - free space at the pool's end, 32 MiB)). The count is a hard bound:
 *   1. before the real call, reserve the growth the request can cause, rounded up to the step;
 *   2. after it, move the count to what the pool reserves now; growth beyond the reservation is
 *      reserved too (checked against the limit, like any reservation);
 *   3. when that does not fit, undo: free the new allocation, synchronize its stream (the pool
 *      cannot release a block whose free it has not seen complete), trim the pool back to what is
 *      counted, settle, and fail with CUDA_ERROR_OUT_OF_MEMORY.
 * The count is re-read after frees, trims, attribute changes and every synchronize hook (a pool
 * releases memory above its release threshold when the host synchronizes). */

/* pool_rec.ridx of a managed pool with no preferred device before its first allocation. */
#define POOL_RIDX_AT_ALLOC (-2)

struct pool_rec {
  CUmemoryPool pool;
  int ridx; /* region device charged; -1: a host pool */
  uint64_t accounted; /* bytes of this pool currently in our slot */
};
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pool_rec *g_pools; /* grows by doubling; never shrinks */
static int g_npools, g_pools_cap;
/* Growth step used for the reservation ahead: starts at the measured 32 MiB and follows the
 * driver down (greatest common divisor of every growth seen), never up. Under g_pool_mu. */
#define VGPU_POOL_STEP_DEFAULT (32ull << 20)
static uint64_t g_pool_step = VGPU_POOL_STEP_DEFAULT;

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute attr) {
  cuuint64_t v = 0;
  if (!vgpu_cuda.cuMemPoolGetAttribute || vgpu_cuda.cuMemPoolGetAttribute(pool, attr, &v) != CUDA_SUCCESS)
    return 0;
  return (uint64_t)v;
}

static uint64_t round_up_u64(uint64_t v, uint64_t step) {
  if (step == 0) return v;
  uint64_t r = v % step;
  return r == 0 || v > UINT64_MAX - (step - r) ? v : v + (step - r);
}

/* Caller holds g_pool_mu. The pool's record, created when new; NULL only when the table cannot
 * grow (the caller refuses: an uncounted pool would be memory outside the limit). */
static struct pool_rec *pool_find(CUmemoryPool pool, int ridx_if_new) {
  for (int i = 0; i < g_npools; i++)
    if (g_pools[i].pool == pool) return &g_pools[i];
  if (g_npools == g_pools_cap) {
    int ncap = g_pools_cap ? g_pools_cap * 2 : 16;
    struct pool_rec *n = g_pools_cap < (1 << 24) ? realloc(g_pools, (size_t)ncap * sizeof *n) : NULL;
    if (!n) {
      VGPU_LOG_ERROR("cannot track memory pool %d (out of host memory): refused", g_npools + 1);
      return NULL;
    }
    g_pools = n;
    g_pools_cap = ncap;
  }
  struct pool_rec *p = &g_pools[g_npools];
  p->pool = pool;
  p->ridx = ridx_if_new;
  p->accounted = 0;
  __atomic_store_n(&g_npools, g_npools + 1, __ATOMIC_RELAXED);
  return p;
}

/* Caller holds g_pool_mu. Moves the count to `reserved` (what the pool reserves now); `pending`
 * bytes were reserved ahead for this pool and are folded in. Growth beyond what is counted is
 * added unchecked: it already exists (a pool that grew outside our hooks). */
static void pool_settle_to(struct pool_rec *p, uint64_t pending, uint64_t reserved) {
  uint64_t have = p->accounted + pending;
  if (reserved > have)
    vgpu_mem_add(p->ridx, reserved - have, VGPU_MEM_DATA);
  else if (reserved < have)
    vgpu_mem_release(p->ridx, have - reserved, VGPU_MEM_DATA);
  p->accounted = reserved;
}

static void pool_settle(struct pool_rec *p, uint64_t pending) {
  pool_settle_to(p, pending, pool_attr(p->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));
}

void vgpu_pools_refresh(void) {
  pthread_mutex_lock(&g_pool_mu);
  for (int i = 0; i < g_npools; i++) pool_settle(&g_pools[i], 0);
  pthread_mutex_unlock(&g_pool_mu);
}

/* Re-reads the pools after a synchronize, only when there are any (the common case costs one
 * relaxed load). */
void vgpu_pools_refresh_if_any(void) {
  if (__atomic_load_n(&g_npools, __ATOMIC_RELAXED) > 0) vgpu_pools_refresh();
  vgpu_graph_mem_refresh(); /* one relaxed load when no graph memory is counted */
  vgpu_untracked_maybe();
}

/* Calls the real function, then re-reads the pools: frees and trims change what a pool reserves,
 * a lower release threshold lets a pool give memory back, and synchronizing is when a pool
 * releases what it holds above that threshold. */
#define VGPU_POOL_REREAD_HOOK(name, params, args) \
  VGPU_EXPORT CUresult name params {              \
    VGPU_HOOK_BEGIN(name, args);                  \
    CUresult rc = VGPU_CALL_REAL(name, args);     \
    vgpu_pools_refresh_if_any();                       \
    return rc;                                    \
  }

static CUresult free_async_real(bool ptsz, CUdeviceptr dptr, CUstream stream) {
  return ptsz ? VGPU_CALL_REAL(cuMemFreeAsync_ptsz, (dptr, stream))
              : VGPU_CALL_REAL(cuMemFreeAsync, (dptr, stream));
}

/* Caller holds g_pool_mu. The pool grew past what the limit allows: give the growth back. Frees
 * `dptr` (when the allocation succeeded), waits for its stream so the pool sees the free complete,
 * trims to what is counted and settles. If the pool still holds more (it could not release), the
 * truth is counted and logged: the count never hides memory that exists. */
static void pool_undo(struct pool_rec *p, uint64_t pending, bool ptsz, bool allocated, CUdeviceptr dptr,
                      CUstream stream) {
  uint64_t keep = p->accounted + pending;
  if (allocated) {
    free_async_real(ptsz, dptr, stream);
    CUstream s = (ptsz && stream == NULL) ? CU_STREAM_PER_THREAD : stream;
    if (vgpu_cuda.cuStreamSynchronize) VGPU_CALL_REAL(cuStreamSynchronize, (s));
  }
  if (vgpu_cuda.cuMemPoolTrimTo) VGPU_CALL_REAL(cuMemPoolTrimTo, (p->pool, (size_t)keep));
  uint64_t reserved = pool_attr(p->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
  if (reserved > keep)
    VGPU_LOG_ERROR("memory pool %p keeps %llu bytes beyond the limit after an undone allocation",
                   (void *)p->pool, (unsigned long long)(reserved - keep));
  pool_settle_to(p, pending, reserved);
}

/* A stream that is being captured into a graph: its stream-ordered calls only add nodes (the pool
 * is not touched; graph memory is counted at instantiate/launch, hook_cuda_graph.c), and querying a
 * pool meanwhile invalidates a global or thread-local capture (measured on H100, driver 580:
 * cudaMallocAsync inside cudaStreamBeginCapture failed with cudaErrorStreamCaptureInvalidated). */
static bool stream_capturing(bool ptsz, CUstream stream) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  /* The legacy default stream never captures, and asking about it while another stream captures
   * is itself an error (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT). */
  if ((stream == NULL && !ptsz) || stream == CU_STREAM_LEGACY) return false;
  CUstream s = (ptsz && stream == NULL) ? CU_STREAM_PER_THREAD : stream;
  return vgpu_cuda.cuStreamIsCapturing && VGPU_CALL_REAL(cuStreamIsCapturing, (s, &st)) == CUDA_SUCCESS &&
         st != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* The device a stream-ordered call works on: the current context's; with no current context the
 * driver uses the explicit stream's own context, and so do we (pushed just for the lookup). */
static bool async_device(CUstream stream, CUdevice *dev) {
  if (vgpu_cuda.cuCtxGetDevice && vgpu_cuda.cuCtxGetDevice(dev) == CUDA_SUCCESS) return true;
  /* The default streams belong to the current context: there is none. */
  if (stream == NULL || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) return false;
  CUcontext c = NULL;
  if (!vgpu_cuda.cuStreamGetCtx || !vgpu_cuda.cuCtxPushCurrent_v2 || !vgpu_cuda.cuCtxPopCurrent_v2 ||
      VGPU_CALL_REAL(cuStreamGetCtx, (stream, &c)) != CUDA_SUCCESS || c == NULL ||
      VGPU_CALL_REAL(cuCtxPushCurrent_v2, (c)) != CUDA_SUCCESS)
    return false;
  bool ok = vgpu_cuda.cuCtxGetDevice(dev) == CUDA_SUCCESS;
  CUcontext popped = NULL;
  VGPU_CALL_REAL(cuCtxPopCurrent_v2, (&popped));
  return ok;
}

static CUresult alloc_async(bool ptsz, CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                            bool explicit_pool, CUstream stream) {
  vgpu_untracked_maybe(); /* NVML only: safe while a stream captures */
  if (stream_capturing(ptsz, stream)) {
    if (explicit_pool)
      return ptsz ? VGPU_CALL_REAL(cuMemAllocFromPoolAsync_ptsz, (dptr, bytesize, pool, stream))
                  : VGPU_CALL_REAL(cuMemAllocFromPoolAsync, (dptr, bytesize, pool, stream));
    return ptsz ? VGPU_CALL_REAL(cuMemAllocAsync_ptsz, (dptr, bytesize, stream))
                : VGPU_CALL_REAL(cuMemAllocAsync, (dptr, bytesize, stream));
  }
  CUdevice dev = -1;
  int ridx = -1;
  if (async_device(stream, &dev)) ridx = vgpu_ridx(dev);
  if (!explicit_pool && (!vgpu_cuda.cuDeviceGetMemPool || dev < 0 ||
                         vgpu_cuda.cuDeviceGetMemPool(&pool, dev) != CUDA_SUCCESS)) {
    /* No device and no pool to count: the driver could only fail (no context), and if it did not,
     * the memory would be outside the limit. Refused. */
    VGPU_LOG_WARN("stream-ordered allocation with no device to charge (no current context, stream %p): refused",
                  (void *)stream);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  pthread_mutex_lock(&g_pool_mu);
  struct pool_rec *p = pool_find(pool, ridx);
  if (p && p->ridx == POOL_RIDX_AT_ALLOC && ridx >= 0) p->ridx = ridx; /* a managed pool's first allocation */
  if (!p || p->ridx == POOL_RIDX_AT_ALLOC) { /* (no device to charge it to: refused) */
    pthread_mutex_unlock(&g_pool_mu);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  uint64_t pending = 0, before = 0;
  if (p) {
    /* Start from the truth: the pool may have released memory at a synchronize we did not see. */
    before = pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
    pool_settle_to(p, 0, before);
    /* Free space the pool already reserves absorbs (part of) the request; the rest grows the pool
     * by whole steps. */
    uint64_t used = pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
    uint64_t headroom = before > used ? before - used : 0;
    pending = bytesize > headroom ? round_up_u64(bytesize - headroom, g_pool_step) : 0;
    if (pending && vgpu_mem_reserve(p->ridx, pending, VGPU_MEM_DATA) != 0) {
      pthread_mutex_unlock(&g_pool_mu);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  CUresult rc;
  if (explicit_pool)
    rc = ptsz ? VGPU_CALL_REAL(cuMemAllocFromPoolAsync_ptsz, (dptr, bytesize, pool, stream))
              : VGPU_CALL_REAL(cuMemAllocFromPoolAsync, (dptr, bytesize, pool, stream));
  else
    rc = ptsz ? VGPU_CALL_REAL(cuMemAllocAsync_ptsz, (dptr, bytesize, stream))
              : VGPU_CALL_REAL(cuMemAllocAsync, (dptr, bytesize, stream));
  if (p) {
    uint64_t now = pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
    if (now > before) g_pool_step = vgpu_gcd_u64(g_pool_step, now - before);
    uint64_t have = p->accounted + pending;
    if (now > have && vgpu_mem_reserve(p->ridx, now - have, VGPU_MEM_DATA) != 0) {
      /* The pool grew by more than was reserved and the rest does not fit the limit. */
      pool_undo(p, pending, ptsz, rc == CUDA_SUCCESS, rc == CUDA_SUCCESS ? *dptr : 0, stream);
      pthread_mutex_unlock(&g_pool_mu);
      if (rc == CUDA_SUCCESS) *dptr = 0;
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (now > have) pending += now - have; /* reserved just now */
    pool_settle_to(p, pending, now);
  }
  pthread_mutex_unlock(&g_pool_mu);
  return rc;
}

VGPU_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuMemAllocAsync, (dptr, bytesize, hStream));
  return alloc_async(false, dptr, bytesize, NULL, false, hStream);
}
VGPU_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuMemAllocAsync_ptsz, (dptr, bytesize, hStream));
  return alloc_async(true, dptr, bytesize, NULL, false, hStream);
}
VGPU_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream hStream) {
  VGPU_HOOK_BEGIN(cuMemAllocFromPoolAsync, (dptr, bytesize, pool, hStream));
  return alloc_async(false, dptr, bytesize, pool, true, hStream);
}
VGPU_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                  CUmemoryPool pool, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuMemAllocFromPoolAsync_ptsz, (dptr, bytesize, pool, hStream));
  return alloc_async(true, dptr, bytesize, pool, true, hStream);
}

/* A free captured into a graph frees nothing now, and the pool must not be queried meanwhile. */
VGPU_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuMemFreeAsync, (dptr, hStream));
  CUresult rc = VGPU_CALL_REAL(cuMemFreeAsync, (dptr, hStream));
  if (!stream_capturing(false, hStream)) vgpu_pools_refresh_if_any();
  return rc;
}
VGPU_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuMemFreeAsync_ptsz, (dptr, hStream));
  CUresult rc = VGPU_CALL_REAL(cuMemFreeAsync_ptsz, (dptr, hStream));
  if (!stream_capturing(true, hStream)) vgpu_pools_refresh_if_any();
  return rc;
}

VGPU_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
  VGPU_HOOK_BEGIN(cuMemPoolCreate, (pool, poolProps));
  CUresult rc = VGPU_CALL_REAL(cuMemPoolCreate, (pool, poolProps));
  if (rc == CUDA_SUCCESS && poolProps) {
    /* A pinned pool on the host uses no device memory. A managed pool (CUDA 13) does once its
     * memory is touched or prefetched on a device, which no hook sees happen: it is charged at
     * allocation (the safe side, as cuMemAllocManaged), to its preferred device, or with none to
     * the device of the stream it allocates on. */
    int ridx = -1;
    if (poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
      ridx = vgpu_ridx((CUdevice)poolProps->location.id);
    else if (poolProps->allocType == CU_MEM_ALLOCATION_TYPE_MANAGED)
      ridx = POOL_RIDX_AT_ALLOC;
    pthread_mutex_lock(&g_pool_mu);
    struct pool_rec *p = pool_find(*pool, ridx);
    if (p) p->ridx = ridx;
    pthread_mutex_unlock(&g_pool_mu);
    if (!p) { /* a pool we cannot count is a pool the application does not get */
      VGPU_CALL_REAL(cuMemPoolDestroy, (*pool));
      *pool = NULL;
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  return rc;
}

VGPU_POOL_REREAD_HOOK(cuMemPoolTrimTo, (CUmemoryPool pool, size_t minBytesToKeep), (pool, minBytesToKeep))
VGPU_POOL_REREAD_HOOK(cuMemPoolSetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value),
                      (pool, attr, value))
VGPU_POOL_REREAD_HOOK(cuStreamSynchronize, (CUstream hStream), (hStream))
VGPU_POOL_REREAD_HOOK(cuStreamSynchronize_ptsz, (CUstream hStream), (hStream))
VGPU_POOL_REREAD_HOOK(cuCtxSynchronize, (void), ())
VGPU_POOL_REREAD_HOOK(cuCtxSynchronize_v2, (CUcontext ctx), (ctx))
VGPU_POOL_REREAD_HOOK(cuEventSynchronize, (CUevent hEvent), (hEvent))

VGPU_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  VGPU_HOOK_BEGIN(cuMemPoolDestroy, (pool));
  pthread_mutex_lock(&g_pool_mu); /* nobody queries the pool while it goes away */
  CUresult rc = VGPU_CALL_REAL(cuMemPoolDestroy, (pool));
  if (rc == CUDA_SUCCESS) {
    for (int i = 0; i < g_npools; i++) {
      if (g_pools[i].pool != pool) continue;
      vgpu_mem_release(g_pools[i].ridx, g_pools[i].accounted, VGPU_MEM_DATA);
      g_pools[i] = g_pools[g_npools - 1];
      __atomic_store_n(&g_npools, g_npools - 1, __ATOMIC_RELAXED);
      break;
    }
  }
  pthread_mutex_unlock(&g_pool_mu);
  return rc;
}

/* A forked child owns none of the parent's pools (nor their counted bytes). */
static void pools_atfork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g_pool_mu = fresh;
  __atomic_store_n(&g_npools, 0, __ATOMIC_RELAXED);
}
__attribute__((constructor)) static void mem_ctor(void) { pthread_atfork(NULL, NULL, pools_atfork_child); }


/*
 * hook_cuda_mem.c — device memory accounting: reserve before allocate (container-wide, through
 * the region), roll back on failure, release exactly once on free.
 *
 * What is counted, per region device (the container's NVML index):
 *   cuMemAlloc / cuMemAllocPitch (the pitch the driver returned x height) / cuMemAllocManaged,
 *   stream-ordered allocations as what their pool reserves (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT),
 *   VMM physical handles (cuMemCreate on a device location), arrays and mipmapped arrays (the
 *   driver's memory requirements when it reports them, else the texel estimate).
 */
#include <pthread.h>
#include <string.h>

#include "hook.h"

static int ridx_of_current(void) { return vgpu_current_ridx(); }

static void track(uint8_t kind, uint64_t key, int ridx, uint64_t bytes) {
  struct vgpu_track_rec rec = {.key = key, .bytes = bytes, .ctx = vgpu_current_ctx(),
                               .kind = kind, .ridx = (int8_t)ridx, .mem_kind = VGPU_MEM_DATA};
  if (!vgpu_track_put(&rec)) VGPU_LOG_ERROR("out of host memory tracking an allocation");
}

/* Grows or shrinks a reservation made with an estimate to the real size. Returns false when the
 * growth does not fit the limit (the caller frees the allocation and reports OOM). */
static bool settle(int ridx, uint64_t estimate, uint64_t actual) {
  if (actual > estimate) {
    if (vgpu_mem_reserve(ridx, actual - estimate, VGPU_MEM_DATA) != 0) {
      vgpu_mem_release(ridx, estimate, VGPU_MEM_DATA);
      return false;
    }
  } else if (actual < estimate) {
    vgpu_mem_release(ridx, estimate - actual, VGPU_MEM_DATA);
  }
  return true;
}

static CUresult alloc_simple(CUdeviceptr *dptr, size_t bytesize, unsigned int flags, bool managed) {
  vgpu_untracked_maybe(); /* memory no allocation shows (lazily loaded modules): at most once a second */
  int ridx = ridx_of_current();
  if (vgpu_mem_reserve(ridx, bytesize, VGPU_MEM_DATA) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = managed ? VGPU_CALL_REAL(cuMemAllocManaged, (dptr, bytesize, flags))
                        : VGPU_CALL_REAL(cuMemAlloc_v2, (dptr, bytesize));
  if (rc != CUDA_SUCCESS) {
    vgpu_mem_release(ridx, bytesize, VGPU_MEM_DATA);
    return rc;
  }
  track(VGPU_TRACK_PTR, (uint64_t)*dptr, ridx, bytesize);
  return rc;
}

VGPU_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  VGPU_HOOK_BEGIN(cuMemAlloc_v2, (dptr, bytesize));
  return alloc_simple(dptr, bytesize, 0, false);
}

VGPU_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  VGPU_HOOK_BEGIN(cuMemAllocManaged, (dptr, bytesize, flags));
  return alloc_simple(dptr, bytesize, flags, true);
}

VGPU_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                        size_t Height, unsigned int ElementSizeBytes) {
  VGPU_HOOK_BEGIN(cuMemAllocPitch_v2, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
  vgpu_untracked_maybe();
  int ridx = ridx_of_current();
  /* Pitch alignment is at most 512 bytes on every current GPU: a safe upper estimate. */
  uint64_t estimate = ((uint64_t)WidthInBytes + 511) / 512 * 512 * (uint64_t)Height;
  if (vgpu_mem_reserve(ridx, estimate, VGPU_MEM_DATA) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc =
      VGPU_CALL_REAL(cuMemAllocPitch_v2, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
  if (rc != CUDA_SUCCESS) {
    vgpu_mem_release(ridx, estimate, VGPU_MEM_DATA);
    return rc;
  }
  uint64_t actual = (uint64_t)*pPitch * (uint64_t)Height;
  if (!settle(ridx, estimate, actual)) {
    VGPU_CALL_REAL(cuMemFree_v2, (*dptr));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  track(VGPU_TRACK_PTR, (uint64_t)*dptr, ridx, actual);
  return rc;
}

static void pools_refresh_if_any(void);

VGPU_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  VGPU_HOOK_BEGIN(cuMemFree_v2, (dptr));
  CUresult rc = VGPU_CALL_REAL(cuMemFree_v2, (dptr));
  struct vgpu_track_rec rec;
  if (rc == CUDA_SUCCESS && dptr && vgpu_track_take(VGPU_TRACK_PTR, (uint64_t)dptr, &rec))
    vgpu_release_rec(&rec);
  else if (rc == CUDA_SUCCESS && dptr)
    pools_refresh_if_any(); /* cuMemFree may free a stream-ordered allocation */
  return rc;
}

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

#define VGPU_MAX_POOLS 256
struct pool_rec {
  CUmemoryPool pool;
  int ridx;
  uint64_t accounted; /* bytes of this pool currently in our slot */
};
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pool_rec g_pools[VGPU_MAX_POOLS];
static int g_npools;
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

static uint64_t gcd_u64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static uint64_t round_up_u64(uint64_t v, uint64_t step) {
  if (step == 0) return v;
  uint64_t r = v % step;
  return r == 0 || v > UINT64_MAX - (step - r) ? v : v + (step - r);
}

/* Caller holds g_pool_mu. */
static struct pool_rec *pool_find(CUmemoryPool pool, int ridx_if_new) {
  for (int i = 0; i < g_npools; i++)
    if (g_pools[i].pool == pool) return &g_pools[i];
  if (g_npools >= VGPU_MAX_POOLS) {
    static bool warned;
    if (!warned) VGPU_LOG_WARN("more than %d memory pools: further pools are not counted", VGPU_MAX_POOLS);
    warned = true;
    return NULL;
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
static void pools_refresh_if_any(void) {
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
    pools_refresh_if_any();                       \
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
  if (vgpu_cuda.cuCtxGetDevice && vgpu_cuda.cuCtxGetDevice(&dev) == CUDA_SUCCESS) ridx = vgpu_ridx(dev);
  if (!explicit_pool && (!vgpu_cuda.cuDeviceGetMemPool || dev < 0 ||
                         vgpu_cuda.cuDeviceGetMemPool(&pool, dev) != CUDA_SUCCESS))
    pool = NULL;
  pthread_mutex_lock(&g_pool_mu);
  struct pool_rec *p = pool ? pool_find(pool, ridx) : NULL;
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
    if (now > before) g_pool_step = gcd_u64(g_pool_step, now - before);
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
  if (!stream_capturing(false, hStream)) pools_refresh_if_any();
  return rc;
}
VGPU_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuMemFreeAsync_ptsz, (dptr, hStream));
  CUresult rc = VGPU_CALL_REAL(cuMemFreeAsync_ptsz, (dptr, hStream));
  if (!stream_capturing(true, hStream)) pools_refresh_if_any();
  return rc;
}

VGPU_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
  VGPU_HOOK_BEGIN(cuMemPoolCreate, (pool, poolProps));
  CUresult rc = VGPU_CALL_REAL(cuMemPoolCreate, (pool, poolProps));
  if (rc == CUDA_SUCCESS && poolProps) {
    int ridx = poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE
                   ? vgpu_ridx((CUdevice)poolProps->location.id)
                   : -1; /* host pools use no device memory */
    pthread_mutex_lock(&g_pool_mu);
    struct pool_rec *p = pool_find(*pool, ridx);
    if (p) p->ridx = ridx;
    pthread_mutex_unlock(&g_pool_mu);
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

/* Virtual memory management (cuMemCreate & co.): hook_cuda_vmm.c. Graph memory: hook_cuda_graph.c. */

/* ---- arrays */

static uint64_t format_bytes(CUarray_format f) {
  switch ((int)f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 4; /* packed/compressed formats: one channel count already covers them */
  }
}

static uint64_t array_estimate(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch) {
  uint64_t e = format_bytes(f) * (ch ? ch : 1) * (uint64_t)(w ? w : 1);
  return e * (h ? h : 1) * (d ? d : 1);
}

static CUresult array_created(int ridx, uint8_t kind, uint64_t key, uint64_t estimate, bool mipmap) {
  CUDA_ARRAY_MEMORY_REQUIREMENTS req;
  memset(&req, 0, sizeof req);
  CUdevice dev = 0;
  uint64_t actual = estimate;
  if (vgpu_cuda.cuCtxGetDevice && vgpu_cuda.cuCtxGetDevice(&dev) == CUDA_SUCCESS) {
    CUresult q = mipmap ? (vgpu_cuda.cuMipmappedArrayGetMemoryRequirements
                               ? vgpu_cuda.cuMipmappedArrayGetMemoryRequirements(
                                     &req, (CUmipmappedArray)(uintptr_t)key, dev)
                               : CUDA_ERROR_NOT_SUPPORTED)
                        : (vgpu_cuda.cuArrayGetMemoryRequirements
                               ? vgpu_cuda.cuArrayGetMemoryRequirements(&req, (CUarray)(uintptr_t)key, dev)
                               : CUDA_ERROR_NOT_SUPPORTED);
    if (q == CUDA_SUCCESS && req.size > 0) actual = req.size;
  }
  if (!settle(ridx, estimate, actual)) return CUDA_ERROR_OUT_OF_MEMORY;
  track(kind, key, ridx, actual);
  return CUDA_SUCCESS;
}

VGPU_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray) {
  VGPU_HOOK_BEGIN(cuArrayCreate_v2, (pHandle, pAllocateArray));
  if (!pAllocateArray) return VGPU_CALL_REAL(cuArrayCreate_v2, (pHandle, pAllocateArray));
  int ridx = ridx_of_current();
  const CUDA_ARRAY_DESCRIPTOR *a = pAllocateArray;
  uint64_t est = array_estimate(a->Width, a->Height, 1, a->Format, a->NumChannels);
  if (vgpu_mem_reserve(ridx, est, VGPU_MEM_DATA) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = VGPU_CALL_REAL(cuArrayCreate_v2, (pHandle, pAllocateArray));
  if (rc != CUDA_SUCCESS) {
    vgpu_mem_release(ridx, est, VGPU_MEM_DATA);
    return rc;
  }
  if (array_created(ridx, VGPU_TRACK_ARRAY, (uint64_t)(uintptr_t)*pHandle, est, false) != CUDA_SUCCESS) {
    VGPU_CALL_REAL(cuArrayDestroy, (*pHandle));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

VGPU_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray) {
  VGPU_HOOK_BEGIN(cuArray3DCreate_v2, (pHandle, pAllocateArray));
  if (!pAllocateArray) return VGPU_CALL_REAL(cuArray3DCreate_v2, (pHandle, pAllocateArray));
  int ridx = ridx_of_current();
  const CUDA_ARRAY3D_DESCRIPTOR *a = pAllocateArray;
  uint64_t est = array_estimate(a->Width, a->Height, a->Depth, a->Format, a->NumChannels);
  if (vgpu_mem_reserve(ridx, est, VGPU_MEM_DATA) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = VGPU_CALL_REAL(cuArray3DCreate_v2, (pHandle, pAllocateArray));
  if (rc != CUDA_SUCCESS) {
    vgpu_mem_release(ridx, est, VGPU_MEM_DATA);
    return rc;
  }
  if (array_created(ridx, VGPU_TRACK_ARRAY, (uint64_t)(uintptr_t)*pHandle, est, false) != CUDA_SUCCESS) {
    VGPU_CALL_REAL(cuArrayDestroy, (*pHandle));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

VGPU_EXPORT CUresult cuArrayDestroy(CUarray hArray) {
  VGPU_HOOK_BEGIN(cuArrayDestroy, (hArray));
  CUresult rc = VGPU_CALL_REAL(cuArrayDestroy, (hArray));
  struct vgpu_track_rec rec;
  if (rc == CUDA_SUCCESS && vgpu_track_take(VGPU_TRACK_ARRAY, (uint64_t)(uintptr_t)hArray, &rec))
    vgpu_release_rec(&rec);
  return rc;
}

VGPU_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                            const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                            unsigned int numMipmapLevels) {
  VGPU_HOOK_BEGIN(cuMipmappedArrayCreate, (pHandle, pMipmappedArrayDesc, numMipmapLevels));
  if (!pMipmappedArrayDesc)
    return VGPU_CALL_REAL(cuMipmappedArrayCreate, (pHandle, pMipmappedArrayDesc, numMipmapLevels));
  int ridx = ridx_of_current();
  const CUDA_ARRAY3D_DESCRIPTOR *a = pMipmappedArrayDesc;
  uint64_t est = 0;
  for (unsigned l = 0; l < (numMipmapLevels ? numMipmapLevels : 1) && l < 32; l++) {
    size_t w = a->Width >> l, h = a->Height >> l, d = a->Depth >> l;
    est += array_estimate(w ? w : 1, a->Height ? (h ? h : 1) : 0, a->Depth ? (d ? d : 1) : 0,
                          a->Format, a->NumChannels);
  }
  if (vgpu_mem_reserve(ridx, est, VGPU_MEM_DATA) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = VGPU_CALL_REAL(cuMipmappedArrayCreate, (pHandle, pMipmappedArrayDesc, numMipmapLevels));
  if (rc != CUDA_SUCCESS) {
    vgpu_mem_release(ridx, est, VGPU_MEM_DATA);
    return rc;
  }
  if (array_created(ridx, VGPU_TRACK_MIPMAP, (uint64_t)(uintptr_t)*pHandle, est, true) != CUDA_SUCCESS) {
    VGPU_CALL_REAL(cuMipmappedArrayDestroy, (*pHandle));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

VGPU_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  VGPU_HOOK_BEGIN(cuMipmappedArrayDestroy, (hMipmappedArray));
  CUresult rc = VGPU_CALL_REAL(cuMipmappedArrayDestroy, (hMipmappedArray));
  struct vgpu_track_rec rec;
  if (rc == CUDA_SUCCESS &&
      vgpu_track_take(VGPU_TRACK_MIPMAP, (uint64_t)(uintptr_t)hMipmappedArray, &rec))
    vgpu_release_rec(&rec);
  return rc;
}

/* ---- what the application sees */

VGPU_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  VGPU_HOOK_BEGIN(cuMemGetInfo_v2, (free_bytes, total_bytes));
  size_t rfree = 0, rtotal = 0;
  CUresult rc = VGPU_CALL_REAL(cuMemGetInfo_v2, (&rfree, &rtotal));
  if (rc != CUDA_SUCCESS) return rc;
  int ridx = ridx_of_current();
  vgpu_state_slot(); /* a process asking has a context: make sure the region exists */
  vgpu_pools_refresh();
  vgpu_graph_mem_refresh();
  vgpu_untracked_reconcile(ridx);
  uint64_t limit = vgpu_mem_limit(ridx);
  if (limit) {
    uint64_t used = vgpu_mem_used(ridx);
    uint64_t total = limit < rtotal ? limit : rtotal;
    uint64_t vfree = used < total ? total - used : 0;
    rfree = vfree < rfree ? (size_t)vfree : rfree;
    rtotal = (size_t)total;
  }
  if (free_bytes) *free_bytes = rfree;
  if (total_bytes) *total_bytes = rtotal;
  return rc;
}

VGPU_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  VGPU_HOOK_BEGIN(cuDeviceTotalMem_v2, (bytes, dev));
  CUresult rc = VGPU_CALL_REAL(cuDeviceTotalMem_v2, (bytes, dev));
  if (rc != CUDA_SUCCESS || !bytes) return rc;
  uint64_t limit = vgpu_mem_limit(vgpu_ridx(dev));
  if (limit && limit < *bytes) *bytes = (size_t)limit;
  return rc;
}

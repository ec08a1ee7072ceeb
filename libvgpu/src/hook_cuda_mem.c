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

VGPU_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  VGPU_HOOK_BEGIN(cuMemFree_v2, (dptr));
  CUresult rc = VGPU_CALL_REAL(cuMemFree_v2, (dptr));
  struct vgpu_track_rec rec;
  if (rc == CUDA_SUCCESS && dptr && vgpu_track_take(VGPU_TRACK_PTR, (uint64_t)dptr, &rec))
    vgpu_release_rec(&rec);
  else if (rc == CUDA_SUCCESS && dptr)
    vgpu_pools_refresh(); /* cuMemFree may free a stream-ordered allocation */
  return rc;
}

/* ---- stream-ordered allocations: counted as what each pool reserves */

#define VGPU_MAX_POOLS 256
struct pool_rec {
  CUmemoryPool pool;
  int ridx;
  uint64_t accounted; /* bytes of this pool currently in our slot */
};
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pool_rec g_pools[VGPU_MAX_POOLS];
static int g_npools;

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute attr) {
  cuuint64_t v = 0;
  if (!vgpu_cuda.cuMemPoolGetAttribute || vgpu_cuda.cuMemPoolGetAttribute(pool, attr, &v) != CUDA_SUCCESS)
    return 0;
  return (uint64_t)v;
}

/* Caller holds g_pool_mu. */
static struct pool_rec *pool_find(CUmemoryPool pool, int ridx_if_new) {
  for (int i = 0; i < g_npools; i++)
    if (g_pools[i].pool == pool) return &g_pools[i];
  if (g_npools >= VGPU_MAX_POOLS) return NULL;
  struct pool_rec *p = &g_pools[g_npools++];
  p->pool = pool;
  p->ridx = ridx_if_new;
  p->accounted = 0;
  return p;
}

/* Caller holds g_pool_mu. Moves the count to what the pool reserves now; `pending` bytes were
 * reserved ahead for this pool and are folded in. */
static void pool_settle(struct pool_rec *p, uint64_t pending) {
  uint64_t reserved = pool_attr(p->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
  uint64_t have = p->accounted + pending;
  if (reserved > have)
    vgpu_mem_add(p->ridx, reserved - have, VGPU_MEM_DATA);
  else if (reserved < have)
    vgpu_mem_release(p->ridx, have - reserved, VGPU_MEM_DATA);
  p->accounted = reserved;
}

void vgpu_pools_refresh(void) {
  pthread_mutex_lock(&g_pool_mu);
  for (int i = 0; i < g_npools; i++) pool_settle(&g_pools[i], 0);
  pthread_mutex_unlock(&g_pool_mu);
}

static CUresult alloc_async(bool ptsz, CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                            bool explicit_pool, CUstream stream) {
  CUdevice dev = -1;
  int ridx = -1;
  if (vgpu_cuda.cuCtxGetDevice && vgpu_cuda.cuCtxGetDevice(&dev) == CUDA_SUCCESS) ridx = vgpu_ridx(dev);
  if (!explicit_pool && (!vgpu_cuda.cuDeviceGetMemPool || dev < 0 ||
                         vgpu_cuda.cuDeviceGetMemPool(&pool, dev) != CUDA_SUCCESS))
    pool = NULL;
  pthread_mutex_lock(&g_pool_mu);
  struct pool_rec *p = pool ? pool_find(pool, ridx) : NULL;
  uint64_t pending = 0;
  if (p) {
    /* Free space already reserved by the pool absorbs the request; only growth needs room. */
    uint64_t reserved = pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
    uint64_t used = pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
    uint64_t headroom = reserved > used ? reserved - used : 0;
    pending = bytesize > headroom ? bytesize - headroom : 0;
    if (vgpu_mem_reserve(p->ridx, pending, VGPU_MEM_DATA) != 0) {
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
  if (p) pool_settle(p, pending);
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

VGPU_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuMemFreeAsync, (dptr, hStream));
  CUresult rc = VGPU_CALL_REAL(cuMemFreeAsync, (dptr, hStream));
  vgpu_pools_refresh();
  return rc;
}
VGPU_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuMemFreeAsync_ptsz, (dptr, hStream));
  CUresult rc = VGPU_CALL_REAL(cuMemFreeAsync_ptsz, (dptr, hStream));
  vgpu_pools_refresh();
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

VGPU_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  VGPU_HOOK_BEGIN(cuMemPoolTrimTo, (pool, minBytesToKeep));
  CUresult rc = VGPU_CALL_REAL(cuMemPoolTrimTo, (pool, minBytesToKeep));
  vgpu_pools_refresh();
  return rc;
}

VGPU_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  VGPU_HOOK_BEGIN(cuMemPoolDestroy, (pool));
  pthread_mutex_lock(&g_pool_mu); /* nobody queries the pool while it goes away */
  CUresult rc = VGPU_CALL_REAL(cuMemPoolDestroy, (pool));
  if (rc == CUDA_SUCCESS) {
    for (int i = 0; i < g_npools; i++) {
      if (g_pools[i].pool != pool) continue;
      vgpu_mem_release(g_pools[i].ridx, g_pools[i].accounted, VGPU_MEM_DATA);
      g_pools[i] = g_pools[--g_npools];
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
  g_npools = 0;
}
__attribute__((constructor)) static void mem_ctor(void) { pthread_atfork(NULL, NULL, pools_atfork_child); }

/* ---- virtual memory management */

VGPU_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags) {
  VGPU_HOOK_BEGIN(cuMemCreate, (handle, size, prop, flags));
  int ridx = (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
                 ? vgpu_ridx((CUdevice)prop->location.id)
                 : -1;
  if (vgpu_mem_reserve(ridx, size, VGPU_MEM_DATA) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = VGPU_CALL_REAL(cuMemCreate, (handle, size, prop, flags));
  if (rc != CUDA_SUCCESS) {
    vgpu_mem_release(ridx, size, VGPU_MEM_DATA);
    return rc;
  }
  track(VGPU_TRACK_VMM, (uint64_t)*handle, ridx, size);
  return rc;
}

VGPU_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  VGPU_HOOK_BEGIN(cuMemRelease, (handle));
  CUresult rc = VGPU_CALL_REAL(cuMemRelease, (handle));
  struct vgpu_track_rec rec;
  if (rc == CUDA_SUCCESS && vgpu_track_take(VGPU_TRACK_VMM, (uint64_t)handle, &rec))
    vgpu_release_rec(&rec);
  return rc;
}

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

/*
 * hook_cuda_mem.c — device memory accounting: reserve before allocate (container-wide, through
 * the region), roll back on failure, release exactly once on free.
 *
 * What is counted, per region device (the container's NVML index):
 *   cuMemAlloc / cuMemAllocPitch (the pitch the driver returned x height) / cuMemAllocManaged,
 *   stream-ordered allocations as what their pool reserves (hook_cuda_pool.c),
 *   VMM physical handles (cuMemCreate on a device location); arrays in hook_cuda_array.c.
 */
#include <pthread.h>
#include <string.h>

#include "hook.h"

static int ridx_of_current(void) { return vgpu_current_ridx(); }

/* The driver maps device memory in pages of the allocation granularity (2 MiB on H100/H200,
 * driver 580): an allocation of at least one page holds whole pages (1 785 x 2 MiB + 4 KiB held
 * 4.29 MiB each), so it is charged whole pages. Smaller ones share pages and are charged as
 * requested (what they hold beyond that shows in NVML and is reconciled). The granularity is the
 * driver's minimum for the device, asked once per device; 2 MiB when the driver cannot tell. */
#define VGPU_GRANULE_DEVICES 64
#define VGPU_GRANULE_FALLBACK (2ull << 20)
static uint64_t g_granule[VGPU_GRANULE_DEVICES]; /* 0: not asked yet */

uint64_t vgpu_alloc_granule(void) {
  CUdevice dev = -1;
  if (!vgpu_cuda.cuCtxGetDevice || vgpu_cuda.cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 ||
      dev >= VGPU_GRANULE_DEVICES)
    return VGPU_GRANULE_FALLBACK;
  uint64_t g = __atomic_load_n(&g_granule[dev], __ATOMIC_RELAXED);
  if (g) return g;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t q = 0;
  if (!vgpu_cuda.cuMemGetAllocationGranularity ||
      VGPU_CALL_REAL(cuMemGetAllocationGranularity, (&q, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)) != CUDA_SUCCESS ||
      q == 0 || (q & (q - 1)) != 0)
    q = VGPU_GRANULE_FALLBACK;
  __atomic_store_n(&g_granule[dev], (uint64_t)q, __ATOMIC_RELAXED);
  return q;
}

/* What an allocation of `bytes` holds on the current device. */
static uint64_t alloc_footprint(uint64_t bytes) {
  uint64_t g = vgpu_alloc_granule();
  if (bytes < g || bytes > UINT64_MAX - g) return bytes;
  return (bytes + g - 1) & ~(g - 1);
}

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
  uint64_t charge = alloc_footprint(bytesize);
  if (vgpu_mem_reserve(ridx, charge, VGPU_MEM_DATA) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = managed ? VGPU_CALL_REAL(cuMemAllocManaged, (dptr, bytesize, flags))
                        : VGPU_CALL_REAL(cuMemAlloc_v2, (dptr, bytesize));
  if (rc != CUDA_SUCCESS) {
    vgpu_mem_release(ridx, charge, VGPU_MEM_DATA);
    return rc;
  }
  track(VGPU_TRACK_PTR, (uint64_t)*dptr, ridx, charge);
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
  uint64_t estimate = alloc_footprint(((uint64_t)WidthInBytes + 511) / 512 * 512 * (uint64_t)Height);
  if (vgpu_mem_reserve(ridx, estimate, VGPU_MEM_DATA) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc =
      VGPU_CALL_REAL(cuMemAllocPitch_v2, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
  if (rc != CUDA_SUCCESS) {
    vgpu_mem_release(ridx, estimate, VGPU_MEM_DATA);
    return rc;
  }
  uint64_t actual = alloc_footprint((uint64_t)*pPitch * (uint64_t)Height);
  if (!settle(ridx, estimate, actual)) {
    VGPU_CALL_REAL(cuMemFree_v2, (*dptr));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  track(VGPU_TRACK_PTR, (uint64_t)*dptr, ridx, actual);
  return rc;
}

/* aux of a VGPU_TRACK_PTR record: exported through CUDA IPC or as a dmabuf. An importer (another
 * process, an open fd) can keep such memory alive after its cuMemFree, and that release is
 * invisible here: it stays charged to this container until the process exits (the safe side; the
 * same rule as exported VMM handles, hook_cuda_vmm.c). */
#define PTR_EXPORTED 1u

VGPU_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  VGPU_HOOK_BEGIN(cuMemFree_v2, (dptr));
  CUresult rc = VGPU_CALL_REAL(cuMemFree_v2, (dptr));
  struct vgpu_track_rec rec;
  if (rc == CUDA_SUCCESS && dptr && vgpu_track_take(VGPU_TRACK_PTR, (uint64_t)dptr, &rec)) {
    if (rec.aux & PTR_EXPORTED)
      VGPU_LOG_INFO("freed exported allocation %#llx: its %llu bytes stay counted (an importer may hold them)",
                    (unsigned long long)dptr, (unsigned long long)rec.bytes);
    else
      vgpu_release_rec(&rec);
  }
  else if (rc == CUDA_SUCCESS && dptr)
    vgpu_pools_refresh_if_any(); /* cuMemFree may free a stream-ordered allocation */
  return rc;
}

/* Virtual memory management (cuMemCreate & co.): hook_cuda_vmm.c. Graph memory: hook_cuda_graph.c. */

/* Marks the allocation that holds [dptr, dptr + size) exported (size 0: the one at dptr). A range
 * may start inside an allocation (a dmabuf of part of it keeps all of it alive): the driver names
 * the allocation's base (cuMemGetAddressRange). VMM memory (mappings) goes to hook_cuda_vmm.c. */
static void mark_exported(CUdeviceptr dptr, size_t size) {
  struct vgpu_track_rec rec;
  bool found = vgpu_track_get(VGPU_TRACK_PTR, (uint64_t)dptr, &rec);
  CUdeviceptr base = 0;
  size_t len = 0;
  if (!found && vgpu_cuda.cuMemGetAddressRange_v2 &&
      VGPU_CALL_REAL(cuMemGetAddressRange_v2, (&base, &len, dptr)) == CUDA_SUCCESS && base && base != dptr)
    found = vgpu_track_get(VGPU_TRACK_PTR, (uint64_t)base, &rec);
  if (found) {
    rec.aux |= PTR_EXPORTED;
    if (!vgpu_track_put(&rec)) VGPU_LOG_ERROR("out of host memory tracking an exported allocation");
  } else {
    vgpu_vmm_mark_exported(dptr, size, vgpu_alloc_granule());
  }
}

VGPU_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr) {
  VGPU_HOOK_BEGIN(cuIpcGetMemHandle, (pHandle, dptr));
  CUresult rc = VGPU_CALL_REAL(cuIpcGetMemHandle, (pHandle, dptr));
  if (rc == CUDA_SUCCESS) mark_exported(dptr, 0);
  return rc;
}

VGPU_EXPORT CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
                                                   CUmemRangeHandleType handleType, unsigned long long flags) {
  VGPU_HOOK_BEGIN(cuMemGetHandleForAddressRange, (handle, dptr, size, handleType, flags));
  CUresult rc = VGPU_CALL_REAL(cuMemGetHandleForAddressRange, (handle, dptr, size, handleType, flags));
  if (rc == CUDA_SUCCESS) mark_exported(dptr, size);
  return rc;
}

/* Arrays: hook_cuda_array.c. */

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

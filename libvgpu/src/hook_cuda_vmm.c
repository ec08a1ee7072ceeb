/*
 * hook_cuda_vmm.c — virtual memory management (cuMemCreate & co.): physical memory is counted
 * for as long as it physically exists, not for as long as the application holds a handle.
 *
 * The driver frees a physical allocation when its last handle is released AND its last mapping is
 * unmapped (measured on H100/H200, driver 580: create -> map -> release keeps the memory until
 * cuMemUnmap; that is how CUDA samples, PyTorch's expandable segments and Triton allocate). So each
 * allocation this process holds is a record keyed by its handle with two counts:
 *   refs  handles held: cuMemCreate (1), each cuMemRetainAllocationHandle (+1, the driver returns
 *         the same handle value), cuMemImportFromShareableHandle (a handle of its own);
 *         cuMemRelease (-1);
 *   maps  live mappings: cuMemMap (+1), cuMemUnmap of the mapping (-1; the driver only unmaps
 *         whole mappings, possibly several adjacent ones in one call).
 * The charge is released when both reach zero.
 *
 * Shared memory (cuMemExportToShareableHandle / cuMemImportFromShareableHandle) — who is charged:
 *   - the creator, from cuMemCreate; once it has exported a handle, until the process exits: an
 *     exported file descriptor or fabric handle keeps the allocation alive after the creator's own
 *     handle is released and unmapped (the driver frees it only when every shareable handle is
 *     closed too), and closes of those descriptors, here or in the process they were passed to,
 *     are invisible to a CUDA hook. Over-counting an exporter that releases early is the safe
 *     side; it cannot hold uncounted memory.
 *   - each importer, for what it maps: cuMemMap of an imported handle reserves offset + size of the
 *     largest mapping (the driver does not tell an importer the allocation's size), refused with
 *     CUDA_ERROR_OUT_OF_MEMORY when it does not fit, until the handle is released and unmapped.
 *     Two processes of one container sharing an allocation count it twice.
 * Sparse arrays: a handle mapped into a sparse CUDA array (cuMemMapArrayAsync) stays counted until
 * the process exits (the unmap operations do not name the handle they unmap).
 *
 * Threading: one mutex orders every change of the VMM records (lock order: g_vmm_mu -> the
 * region's locks -> the tracking table's mutex). VMM calls are allocation-time calls, not per-kernel.
 */
#include <pthread.h>
#include <string.h>

#include "hook.h"

#define VMM_IMPORTED 1u /* aux: an imported handle (size learnt from its mappings) */
#define VMM_STICKY 2u   /* aux: counted until the process exits (exported, or mapped into an array) */

static pthread_mutex_t g_vmm_mu = PTHREAD_MUTEX_INITIALIZER;

static void vmm_atfork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g_vmm_mu = fresh;
}
__attribute__((constructor)) static void vmm_ctor(void) { pthread_atfork(NULL, NULL, vmm_atfork_child); }

/* Caller holds g_vmm_mu. Stores the record back, or drops it and its charge when nothing keeps the
 * memory alive any more. */
static void vmm_settle(struct vgpu_track_rec *r) {
  if (r->refs == 0 && r->maps == 0 && !(r->aux & VMM_STICKY)) {
    if (vgpu_track_take(VGPU_TRACK_VMM, r->key, NULL)) vgpu_release_rec(r);
    return;
  }
  if (!vgpu_track_put(r)) VGPU_LOG_ERROR("out of host memory tracking a VMM allocation");
}

VGPU_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags) {
  VGPU_HOOK_BEGIN(cuMemCreate, (handle, size, prop, flags));
  vgpu_untracked_maybe(); /* memory no allocation shows: at most once a second */
  int ridx = (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
                 ? vgpu_ridx((CUdevice)prop->location.id)
                 : -1; /* host and host-NUMA locations use no device memory */
  if (vgpu_mem_reserve(ridx, size, VGPU_MEM_DATA) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = VGPU_CALL_REAL(cuMemCreate, (handle, size, prop, flags));
  if (rc != CUDA_SUCCESS) {
    vgpu_mem_release(ridx, size, VGPU_MEM_DATA);
    return rc;
  }
  /* Not tied to a context: VMM allocations outlive the context that was current. */
  struct vgpu_track_rec rec = {.key = (uint64_t)*handle, .bytes = size, .kind = VGPU_TRACK_VMM,
                               .ridx = (int8_t)ridx, .mem_kind = VGPU_MEM_DATA, .refs = 1};
  pthread_mutex_lock(&g_vmm_mu);
  if (!vgpu_track_put(&rec)) VGPU_LOG_ERROR("out of host memory tracking a VMM allocation");
  pthread_mutex_unlock(&g_vmm_mu);
  return rc;
}

VGPU_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  VGPU_HOOK_BEGIN(cuMemRelease, (handle));
  pthread_mutex_lock(&g_vmm_mu);
  CUresult rc = VGPU_CALL_REAL(cuMemRelease, (handle));
  struct vgpu_track_rec r;
  if (rc == CUDA_SUCCESS && vgpu_track_get(VGPU_TRACK_VMM, (uint64_t)handle, &r) && r.refs > 0) {
    r.refs--;
    vmm_settle(&r);
  }
  pthread_mutex_unlock(&g_vmm_mu);
  return rc;
}

VGPU_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
  VGPU_HOOK_BEGIN(cuMemRetainAllocationHandle, (handle, addr));
  pthread_mutex_lock(&g_vmm_mu);
  CUresult rc = VGPU_CALL_REAL(cuMemRetainAllocationHandle, (handle, addr));
  struct vgpu_track_rec r;
  if (rc == CUDA_SUCCESS && handle && vgpu_track_get(VGPU_TRACK_VMM, (uint64_t)*handle, &r)) {
    r.refs++;
    vmm_settle(&r);
  }
  pthread_mutex_unlock(&g_vmm_mu);
  return rc;
}

VGPU_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                              CUmemGenericAllocationHandle handle, unsigned long long flags) {
  VGPU_HOOK_BEGIN(cuMemMap, (ptr, size, offset, handle, flags));
  pthread_mutex_lock(&g_vmm_mu);
  struct vgpu_track_rec r;
  bool known = vgpu_track_get(VGPU_TRACK_VMM, (uint64_t)handle, &r);
  uint64_t grow = 0;
  if (known && (r.aux & VMM_IMPORTED)) {
    /* An importer learns the allocation's size only from what it maps: charge the extent. */
    uint64_t extent = (uint64_t)offset + (uint64_t)size;
    grow = extent > r.bytes ? extent - r.bytes : 0;
    if (grow && vgpu_mem_reserve(r.ridx, grow, VGPU_MEM_DATA) != 0) {
      pthread_mutex_unlock(&g_vmm_mu);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  CUresult rc = VGPU_CALL_REAL(cuMemMap, (ptr, size, offset, handle, flags));
  if (known) {
    if (rc != CUDA_SUCCESS) {
      vgpu_mem_release(r.ridx, grow, VGPU_MEM_DATA);
    } else {
      r.bytes += grow;
      r.maps++;
      vmm_settle(&r);
      struct vgpu_track_rec m = {.key = (uint64_t)ptr, .bytes = size, .aux = (uint64_t)handle,
                                 .kind = VGPU_TRACK_VMM_MAP, .ridx = -1};
      if (!vgpu_track_put(&m)) VGPU_LOG_ERROR("out of host memory tracking a VMM mapping");
    }
  }
  pthread_mutex_unlock(&g_vmm_mu);
  return rc;
}

VGPU_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  VGPU_HOOK_BEGIN(cuMemUnmap, (ptr, size));
  pthread_mutex_lock(&g_vmm_mu);
  CUresult rc = VGPU_CALL_REAL(cuMemUnmap, (ptr, size));
  if (rc == CUDA_SUCCESS) {
    /* The range is one or more whole, adjacent mappings: walk them from its start. */
    uint64_t va = (uint64_t)ptr, end = (uint64_t)ptr + (uint64_t)size;
    struct vgpu_track_rec m, r;
    while (va < end && vgpu_track_take(VGPU_TRACK_VMM_MAP, va, &m)) {
      if (vgpu_track_get(VGPU_TRACK_VMM, m.aux, &r) && r.maps > 0) {
        r.maps--;
        vmm_settle(&r);
      }
      if (m.bytes == 0) break;
      va += m.bytes;
    }
  }
  pthread_mutex_unlock(&g_vmm_mu);
  return rc;
}

VGPU_EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                                  CUmemAllocationHandleType handleType,
                                                  unsigned long long flags) {
  VGPU_HOOK_BEGIN(cuMemExportToShareableHandle, (shareableHandle, handle, handleType, flags));
  pthread_mutex_lock(&g_vmm_mu);
  CUresult rc = VGPU_CALL_REAL(cuMemExportToShareableHandle, (shareableHandle, handle, handleType, flags));
  struct vgpu_track_rec r;
  if (rc == CUDA_SUCCESS && vgpu_track_get(VGPU_TRACK_VMM, (uint64_t)handle, &r) && !(r.aux & VMM_STICKY)) {
    r.aux |= VMM_STICKY;
    vmm_settle(&r);
  }
  pthread_mutex_unlock(&g_vmm_mu);
  return rc;
}

/* Caller holds g_vmm_mu. */
static void vmm_mark_sticky_locked(uint64_t handle) {
  struct vgpu_track_rec r;
  if (vgpu_track_get(VGPU_TRACK_VMM, handle, &r) && !(r.aux & VMM_STICKY)) {
    r.aux |= VMM_STICKY;
    vmm_settle(&r);
  }
}

/* The mapping that starts at ptr is found in the table. A range that starts inside a mapping, or
 * runs past the first one, is walked one allocation granule at a time, asking the driver which
 * handle is mapped there: cuMemRetainAllocationHandle answers for any address inside a mapping
 * (the reference it takes is dropped at once), and mappings are whole granules, so none is
 * skipped. A dmabuf of the upper half of a mapping kept the whole allocation alive uncounted. */
void vgpu_vmm_mark_exported(CUdeviceptr ptr, size_t size, uint64_t granule) {
  if (granule == 0) granule = 2ull << 20;
  uint64_t start = (uint64_t)ptr;
  uint64_t end = size == 0 ? start + 1 : start + size < start ? UINT64_MAX : start + size;
  pthread_mutex_lock(&g_vmm_mu);
  struct vgpu_track_rec m;
  if (vgpu_track_get(VGPU_TRACK_VMM_MAP, start, &m)) {
    vmm_mark_sticky_locked(m.aux);
    start = m.bytes && start + m.bytes > start ? start + m.bytes : end; /* what is left of the range */
  }
  if (start < end && vgpu_cuda.cuMemRetainAllocationHandle && vgpu_cuda.cuMemRelease) {
    CUmemGenericAllocationHandle prev = 0;
    for (uint64_t va = start; va < end;) {
      CUmemGenericAllocationHandle h = 0;
      if (VGPU_CALL_REAL(cuMemRetainAllocationHandle, (&h, (void *)(uintptr_t)va)) == CUDA_SUCCESS) {
        VGPU_CALL_REAL(cuMemRelease, (h));
        if (h != prev) vmm_mark_sticky_locked((uint64_t)h);
        prev = h;
      }
      uint64_t next = (va / granule + 1) * granule;
      if (next <= va) break; /* the top of the address space */
      va = next;
    }
  }
  pthread_mutex_unlock(&g_vmm_mu);
}

VGPU_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                    CUmemAllocationHandleType shHandleType) {
  VGPU_HOOK_BEGIN(cuMemImportFromShareableHandle, (handle, osHandle, shHandleType));
  pthread_mutex_lock(&g_vmm_mu);
  CUresult rc = VGPU_CALL_REAL(cuMemImportFromShareableHandle, (handle, osHandle, shHandleType));
  if (rc == CUDA_SUCCESS && handle) {
    struct vgpu_track_rec r;
    if (vgpu_track_get(VGPU_TRACK_VMM, (uint64_t)*handle, &r)) {
      r.refs++; /* our own allocation came back under its handle value: already counted */
    } else {
      CUmemAllocationProp prop;
      memset(&prop, 0, sizeof prop);
      int ridx = -1;
      if (vgpu_cuda.cuMemGetAllocationPropertiesFromHandle &&
          vgpu_cuda.cuMemGetAllocationPropertiesFromHandle(&prop, *handle) == CUDA_SUCCESS &&
          prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE)
        ridx = vgpu_ridx((CUdevice)prop.location.id);
      else
        ridx = vgpu_current_ridx(); /* properties unknown: the device this process works on */
      memset(&r, 0, sizeof r);
      r.key = (uint64_t)*handle;
      r.kind = VGPU_TRACK_VMM;
      r.ridx = (int8_t)ridx;
      r.mem_kind = VGPU_MEM_DATA;
      r.refs = 1;
      r.aux = VMM_IMPORTED;
    }
    vmm_settle(&r);
  }
  pthread_mutex_unlock(&g_vmm_mu);
  return rc;
}

/* Sparse arrays: the handles a call maps stay counted until the process exits. */
static CUresult map_array(bool ptsz, CUarrayMapInfo *mapInfoList, unsigned int count, CUstream hStream) {
  pthread_mutex_lock(&g_vmm_mu);
  CUresult rc = ptsz ? VGPU_CALL_REAL(cuMemMapArrayAsync_ptsz, (mapInfoList, count, hStream))
                     : VGPU_CALL_REAL(cuMemMapArrayAsync, (mapInfoList, count, hStream));
  for (unsigned int i = 0; rc == CUDA_SUCCESS && mapInfoList && i < count; i++) {
    const CUarrayMapInfo *mi = &mapInfoList[i];
    struct vgpu_track_rec r;
    if (mi->memOperationType == CU_MEM_OPERATION_TYPE_MAP && mi->memHandleType == CU_MEM_HANDLE_TYPE_GENERIC &&
        vgpu_track_get(VGPU_TRACK_VMM, (uint64_t)mi->memHandle.memHandle, &r) && !(r.aux & VMM_STICKY)) {
      r.aux |= VMM_STICKY;
      vmm_settle(&r);
    }
  }
  pthread_mutex_unlock(&g_vmm_mu);
  return rc;
}

VGPU_EXPORT CUresult cuMemMapArrayAsync(CUarrayMapInfo *mapInfoList, unsigned int count, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuMemMapArrayAsync, (mapInfoList, count, hStream));
  return map_array(false, mapInfoList, count, hStream);
}

VGPU_EXPORT CUresult cuMemMapArrayAsync_ptsz(CUarrayMapInfo *mapInfoList, unsigned int count, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuMemMapArrayAsync_ptsz, (mapInfoList, count, hStream));
  return map_array(true, mapInfoList, count, hStream);
}

/*
 * hook.h — the prologue every interposed CUDA entry point starts with.
 *
 * VGPU_HOOK_BEGIN(name, args): loads the driver table; when the real function is missing returns
 * CUDA_ERROR_NOT_SUPPORTED (never calls NULL); when we are already inside a hook on this thread
 * (the driver calling its own exported names) or control is disabled, tail-calls the real one.
 * VGPU_CALL_REAL(name, args): calls the real function with the reentrancy guard raised.
 */
#ifndef VGPU_HOOK_H
#define VGPU_HOOK_H

#include "devices.h"
#include "real.h"
#include "state.h"
#include "track.h"
#include "vgpu.h"

#define VGPU_HOOK_BEGIN(name, args)                                                                \
  do {                                                                                             \
    if (!vgpu_cuda_load() || !vgpu_cuda.name) return CUDA_ERROR_NOT_SUPPORTED;                     \
    if (vgpu_hook_depth > 0 || vgpu_config_get()->disabled) return vgpu_cuda.name args;            \
  } while (0)

#define VGPU_CALL_REAL(name, args)                                                                 \
  __extension__({                                                                                  \
    vgpu_hook_depth++;                                                                             \
    CUresult vgpu_rc_ = vgpu_cuda.name args;                                                       \
    vgpu_hook_depth--;                                                                             \
    vgpu_rc_;                                                                                      \
  })

/* Greatest common divisor (granule and step arithmetic of pools and graphs). */
static inline uint64_t vgpu_gcd_u64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static inline uintptr_t vgpu_current_ctx(void) {
  CUcontext c = NULL;
  if (vgpu_cuda.cuCtxGetCurrent) vgpu_cuda.cuCtxGetCurrent(&c);
  return (uintptr_t)c;
}

/* Releases a tracked record's bytes (callback shape for vgpu_track_take_ctx). */
static inline void vgpu_release_rec(const struct vgpu_track_rec *r) {
  vgpu_mem_release(r->ridx, r->bytes, (enum vgpu_mem_kind)r->mem_kind);
}

/* Pools (hook_cuda_mem.c): re-read what every known pool reserves and fix the count. */
void vgpu_pools_refresh(void);
/* The same, only when any pool is known; also graph memory and untracked memory (cheap when none). */
void vgpu_pools_refresh_if_any(void);
/* Graph memory (hook_cuda_graph.c): re-read each counted device's graph pool and fix the count. */
void vgpu_graph_mem_refresh(void);
/* Before launching or uploading an executable graph: reserves the growth of the graph pool its
 * allocation nodes can cause. false: it does not fit the limit (OOM logged), do not launch. */
bool vgpu_graph_mem_before_launch(CUgraphExec exec);
/* Memory outside every counted allocation (hook_cuda_module.c): charge this process's NVML usage
 * beyond what is counted for it on region device `ridx` (now), or on the current device at most
 * once a second (_maybe). */
void vgpu_untracked_reconcile(int ridx);
void vgpu_untracked_maybe(void);
/* Local memory (hook_cuda_lmem.c): charges the growth of the current context's local memory a
 * launch of `f` causes. false: it does not fit the limit (logged), do not launch. */
bool vgpu_lmem_before_launch(CUfunction f);
/* Threads a device holds at once (multiprocessors x max threads per multiprocessor) for the
 * current context's device; 0 when the driver cannot tell (hook_cuda_limits.c). */
uint64_t vgpu_resident_threads(void);
/* VMM (hook_cuda_vmm.c): every handle mapped in [ptr, ptr + size) (size 0: the one at ptr) was
 * exported another way (dmabuf, CUDA IPC): counted until the process exits, like a handle exported
 * with cuMemExportToShareableHandle. granule: the device's allocation granularity (mappings are
 * whole granules; the caller asks vgpu_alloc_granule, which lives on the allocation side). */
void vgpu_vmm_mark_exported(CUdeviceptr ptr, size_t size, uint64_t granule);
/* The current device's allocation granularity (cuMemGetAllocationGranularity, minimum; 2 MiB when
 * the driver cannot tell), asked once per device (hook_cuda_mem.c). */
uint64_t vgpu_alloc_granule(void);
/* Reconciles region device ridx with NVML now and tells whether the container's count is over its
 * limit (hook_cuda_module.c): memory that appeared outside every charge is then refused. */
bool vgpu_reconcile_over_limit(int ridx);
/* Lookup for interpose.c: our hook for a driver pointer/symbol request, or `real`. */
void *vgpu_proc_resolve(const char *symbol, void *real, int cuda_version, cuuint64_t flags);

#endif /* VGPU_HOOK_H */

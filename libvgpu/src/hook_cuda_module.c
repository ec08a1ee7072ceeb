/*
 * hook_cuda_module.c — memory no allocation call shows: module and JIT code, __device__ globals of
 * loaded modules (eagerly at load, or lazily at a kernel's first launch), and whatever else the
 * driver takes for the process. Counted by reconciling with NVML: the process's own NVML usage on a
 * device, minus everything libvgpu counts there for it, is charged as module memory (the region's
 * module_size, part of used[d].total), never negative. It already exists, so it is added, not
 * reserved: it makes the next allocation that does not fit fail instead. A load that takes the
 * container over its limit is undone and refused, and no load starts while it is over.
 *
 * When: right after every module/library load and unload, on cuMemGetInfo, and at most once a
 * second from allocation and synchronize hooks (lazy loading maps a module's memory at its first
 * kernel launch, seen at the next synchronize or allocation). Where NVML cannot see the process
 * (no NVML, or a driver that lists processes in another pid namespace without our slot's host
 * pid), nothing is reconciled. Children of this process that run without libvgpu are charged
 * here too (nvml_procs.c), where NVML's pids are this namespace's.
 */
#include <pthread.h>
#include <string.h>

#include "hook.h"

#define RECONCILE_PERIOD_NS 1000000000ull

static pthread_mutex_t g_rec_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_untracked[VGPU_MAX_DEVICES]; /* bytes charged as module memory, per region device */
static uint64_t g_last_ns;                       /* last periodic reconcile (relaxed) */

static void module_atfork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g_rec_mu = fresh;
  memset(g_untracked, 0, sizeof g_untracked);
  __atomic_store_n(&g_last_ns, 0, __ATOMIC_RELAXED);
}
__attribute__((constructor)) static void module_ctor(void) { pthread_atfork(NULL, NULL, module_atfork_child); }

/* This process's counted bytes on region device `ridx` (its own slot). */
static bool self_counted(int ridx, uint64_t *out) {
  struct vgpu_region_map *m = vgpu_state_region(false);
  int slot = m ? vgpu_state_slot() : -1;
  if (slot < 0) return false;
  *out = vgpu_slot_total(m, slot, ridx);
  return true;
}

void vgpu_untracked_reconcile(int ridx) {
  if (ridx < 0 || ridx >= VGPU_MAX_DEVICES || vgpu_mem_limit(ridx) == 0) return;
  pthread_mutex_lock(&g_rec_mu);
  uint64_t nvml = 0, children = 0, counted = 0;
  if (vgpu_nvml_usage(ridx, &nvml, &children) && self_counted(ridx, &counted)) {
    nvml = nvml > UINT64_MAX - children ? UINT64_MAX : nvml + children; /* children without libvgpu */
    uint64_t others = counted > g_untracked[ridx] ? counted - g_untracked[ridx] : 0;
    uint64_t want = nvml > others ? nvml - others : 0;
    if (want > g_untracked[ridx]) {
      VGPU_LOG_DEBUG("device %d: %llu bytes in use outside any counted allocation (NVML)", ridx,
                     (unsigned long long)want);
      vgpu_mem_add(ridx, want - g_untracked[ridx], VGPU_MEM_MODULE);
    } else if (want < g_untracked[ridx]) {
      vgpu_mem_release(ridx, g_untracked[ridx] - want, VGPU_MEM_MODULE);
    }
    g_untracked[ridx] = want;
  }
  pthread_mutex_unlock(&g_rec_mu);
}

void vgpu_untracked_maybe(void) {
  uint64_t now = vgpu_now_monotonic_ns(), last = __atomic_load_n(&g_last_ns, __ATOMIC_RELAXED);
  if (now - last < RECONCILE_PERIOD_NS) return;
  if (!__atomic_compare_exchange_n(&g_last_ns, &last, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
  vgpu_untracked_reconcile(vgpu_current_ridx());
}

#define VGPU_RECONCILE_AFTER(name, params, args) \
  VGPU_EXPORT CUresult name params {             \
    VGPU_HOOK_BEGIN(name, args);                 \
    CUresult rc = VGPU_CALL_REAL(name, args);    \
    vgpu_untracked_reconcile(vgpu_current_ridx()); \
    return rc;                                   \
  }

/* Whether the container's count on ridx is above its limit. */
static bool over_limit(int ridx) {
  uint64_t limit = ridx >= 0 ? vgpu_mem_limit(ridx) : 0;
  return limit && vgpu_mem_used(ridx) > limit;
}

bool vgpu_reconcile_over_limit(int ridx) {
  vgpu_untracked_reconcile(ridx);
  return over_limit(ridx);
}

/* A load whose globals take the container over its limit is undone (unloaded) and fails with
 * CUDA_ERROR_OUT_OF_MEMORY, as on a device too full for them; while the container is over its
 * limit (memory that appeared outside every hook, e.g. a lazily loaded module) no load starts. */
static CUresult load_settle(int ridx, CUresult rc, bool loaded, bool is_library, void *handle) {
  vgpu_untracked_reconcile(ridx);
  if (rc != CUDA_SUCCESS || !loaded || !over_limit(ridx)) return rc;
  if (is_library)
    VGPU_CALL_REAL(cuLibraryUnload, ((CUlibrary)handle));
  else
    VGPU_CALL_REAL(cuModuleUnload, ((CUmodule)handle));
  vgpu_untracked_reconcile(ridx);
  VGPU_LOG_ERROR("Device %d: module load takes the container over the limit (%llu bytes): unloaded, refused", ridx,
                 (unsigned long long)vgpu_mem_limit(ridx));
  return CUDA_ERROR_OUT_OF_MEMORY;
}

/* From the count as it stands (the last reconciliation): one NVML query per load, not two. */
static bool load_allowed(int ridx) {
  if (!over_limit(ridx)) return true;
  VGPU_LOG_ERROR("Device %d: the container is over its limit (%llu of %llu bytes): module load refused", ridx,
                 (unsigned long long)vgpu_mem_used(ridx), (unsigned long long)vgpu_mem_limit(ridx));
  return false;
}

#define VGPU_LOAD_HOOK(name, params, args, out, is_library)                                        \
  VGPU_EXPORT CUresult name params {                                                               \
    VGPU_HOOK_BEGIN(name, args);                                                                   \
    int ridx_ = vgpu_current_ridx();                                                               \
    if (!load_allowed(ridx_)) return CUDA_ERROR_OUT_OF_MEMORY;                                     \
    CUresult rc_ = VGPU_CALL_REAL(name, args);                                                     \
    return load_settle(ridx_, rc_, (out) != NULL, is_library, (out) ? (void *)*(out) : NULL);      \
  }

VGPU_LOAD_HOOK(cuModuleLoad, (CUmodule *module, const char *fname), (module, fname), module, false)
VGPU_LOAD_HOOK(cuModuleLoadData, (CUmodule *module, const void *image), (module, image), module, false)
VGPU_LOAD_HOOK(cuModuleLoadDataEx,
               (CUmodule *module, const void *image, unsigned int numOptions, CUjit_option *options,
                void **optionValues),
               (module, image, numOptions, options, optionValues), module, false)
VGPU_LOAD_HOOK(cuModuleLoadFatBinary, (CUmodule *module, const void *fatCubin), (module, fatCubin), module, false)
VGPU_RECONCILE_AFTER(cuModuleUnload, (CUmodule hmod), (hmod))
VGPU_LOAD_HOOK(cuLibraryLoadData,
               (CUlibrary *library, const void *code, CUjit_option *jitOptions, void **jitOptionsValues,
                unsigned int numJitOptions, CUlibraryOption *libraryOptions, void **libraryOptionValues,
                unsigned int numLibraryOptions),
               (library, code, jitOptions, jitOptionsValues, numJitOptions, libraryOptions, libraryOptionValues,
                numLibraryOptions),
               library, true)
VGPU_LOAD_HOOK(cuLibraryLoadFromFile,
               (CUlibrary *library, const char *fileName, CUjit_option *jitOptions, void **jitOptionsValues,
                unsigned int numJitOptions, CUlibraryOption *libraryOptions, void **libraryOptionValues,
                unsigned int numLibraryOptions),
               (library, fileName, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                libraryOptionValues, numLibraryOptions),
               library, true)
VGPU_RECONCILE_AFTER(cuLibraryUnload, (CUlibrary library), (library))

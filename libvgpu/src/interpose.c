/*
 * interpose.c — how applications reach our hooks besides plain symbol interposition:
 *   dlsym(handle, "cuMemAlloc_v2")            -> our hook when the real lookup finds the symbol;
 *   cuGetProcAddress[_v2](name, ver, flags)   -> the driver answers first (so the caller's
 *     cudaVersion and per-thread-stream flags pick the ABI variant); we swap in our hook for the
 *     exact variant the driver chose, recognised by pointer identity with the variant's real
 *     function, falling back to the .def version table. Unknown symbols keep the driver's pointer.
 *
 * The lookup path never allocates, never logs and never initialises anything beyond resolving the
 * real dlsym (libfaketime's rule): it runs inside the dynamic loader and other libraries'
 * constructors. The table has ~50 entries and lookups happen at start-up, so a linear scan with a
 * prefix filter is cheaper than keeping a sorted copy consistent.
 */
#include <dlfcn.h>
#include <string.h>

#include "hook.h"

struct hook_entry {
  const char *name;
  void *hook;
  void **real; /* address of the typed pointer in vgpu_cuda / vgpu_nvml */
  const char *base;
  int since;
  int ptsz;
};

static const struct hook_entry g_cuda_hooks[] = {
#define VGPU_CUDA_HOOK(name, base, since, ptsz, ret, params, args)                                 \
  {#name, (void *)name, (void **)&vgpu_cuda.name, #base, since, ptsz},
#include "hooks/cuda.def"
};
static const struct hook_entry g_nvml_hooks[] = {
#define VGPU_NVML_HOOK(name, ret, params, args) {#name, (void *)name, (void **)&vgpu_nvml.name, #name, 0, 0},
#include "hooks/nvml.def"
};
#define N_CUDA (sizeof g_cuda_hooks / sizeof g_cuda_hooks[0])
#define N_NVML (sizeof g_nvml_hooks / sizeof g_nvml_hooks[0])

VGPU_NO_SANITIZE static const struct hook_entry *find_hook(const char *symbol) {
  if (!symbol) return NULL;
  if (symbol[0] == 'c' && symbol[1] == 'u') {
    for (size_t i = 0; i < N_CUDA; i++)
      if (strcmp(g_cuda_hooks[i].name, symbol) == 0) return &g_cuda_hooks[i];
  } else if (strncmp(symbol, "nvml", 4) == 0) {
    for (size_t i = 0; i < N_NVML; i++)
      if (strcmp(g_nvml_hooks[i].name, symbol) == 0) return &g_nvml_hooks[i];
  }
  return NULL;
}

/* glibc resolves RTLD_NEXT, and RTLD_DEFAULT's local scope, from the caller's return address: every
 * lookup we do not change must be a tail call (a jump, not a call) so the caller stays the
 * application's. The attribute forces sibling calls even in -O0/-O1 (sanitizer) builds. */
__attribute__((optimize("optimize-sibling-calls"))) VGPU_NO_SANITIZE VGPU_EXPORT void *dlsym(void *handle,
                                                                                            const char *symbol) {
  void *(*real_dlsym)(void *, const char *) = vgpu_real_dlsym_fn();
  if (!real_dlsym) return NULL;
  const struct hook_entry *e = handle == RTLD_NEXT ? NULL : find_hook(symbol);
  if (!e) return real_dlsym(handle, symbol);
  /* A hooked name: answer with the hook only where the real lookup finds the symbol at all. */
  return real_dlsym(handle, symbol) ? e->hook : NULL;
}

void *vgpu_proc_resolve(const char *symbol, void *real, int cuda_version, cuuint64_t flags) {
  if (!real || !symbol) return real;
  for (size_t i = 0; i < N_CUDA; i++)
    if (*g_cuda_hooks[i].real == real) return g_cuda_hooks[i].hook;
  /* The driver handed out a pointer we cannot place (an internal trampoline): pick our variant
   * of the same base symbol for this cudaVersion and stream flavour, if we have one. */
  int want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? 1 : 0;
  const struct hook_entry *best = NULL;
  for (size_t i = 0; i < N_CUDA; i++) {
    const struct hook_entry *e = &g_cuda_hooks[i];
    if (strcmp(e->base, symbol) != 0 || e->since > cuda_version || !*e->real) continue;
    if (e->ptsz != want_ptsz && strcmp(e->base, e->name) != 0 && e->ptsz) continue;
    if (!best || e->since > best->since || (e->since == best->since && e->ptsz == want_ptsz))
      best = e;
  }
  return best ? best->hook : real;
}

VGPU_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus) {
  if (!vgpu_cuda_load() || !vgpu_cuda.cuGetProcAddress_v2) return CUDA_ERROR_NOT_SUPPORTED;
  CUresult rc = vgpu_cuda.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (rc == CUDA_SUCCESS && pfn && *pfn && !vgpu_config_get()->disabled)
    *pfn = vgpu_proc_resolve(symbol, *pfn, cudaVersion, flags);
  return rc;
}

VGPU_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  if (!vgpu_cuda_load() || !vgpu_cuda.cuGetProcAddress) return CUDA_ERROR_NOT_SUPPORTED;
  CUresult rc = vgpu_cuda.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
  if (rc == CUDA_SUCCESS && pfn && *pfn && !vgpu_config_get()->disabled)
    *pfn = vgpu_proc_resolve(symbol, *pfn, cudaVersion, flags);
  return rc;
}

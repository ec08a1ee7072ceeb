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

/* The lookup functions themselves: glibc's dlsym reached through dlvsym (or dlsym) would answer
 * libcuda's raw functions (issue 35, route 9), so a lookup of "dlsym" or "dlvsym" that finds
 * glibc's answers ours. */
VGPU_NO_SANITIZE static void *self_lookup(const char *symbol) {
  if (!symbol || symbol[0] != 'd' || symbol[1] != 'l') return NULL;
  if (strcmp(symbol, "dlsym") == 0) return (void *)dlsym;
  if (strcmp(symbol, "dlvsym") == 0) return (void *)dlvsym;
  return NULL;
}

/* OpenCL (issue 35, routes 14 and 21): the NVIDIA ICD's allocations and kernels go around every
 * CUDA hook, so on a device with a memory or SM limit OpenCL is refused: a cl* symbol that the real
 * lookup finds in NVIDIA's OpenCL library (the ICD loader asks for clGetExtensionFunctionAddress
 * and clIcdGetPlatformIDsKHR there) is answered "not found", once logged. The loader then lists no
 * NVIDIA platform (CL_PLATFORM_NOT_FOUND_KHR). Runs only for a cl* name the real dlsym resolved
 * into that library, so never during start-up. */
static bool any_limit(void) {
  const struct vgpu_config *cfg = vgpu_config_get();
  for (int d = 0; d < VGPU_MAX_DEVICES; d++)
    if (cfg->mem_limit[d] != 0 || (cfg->sm_limit[d] > 0 && cfg->sm_limit[d] < 100)) return true;
  return false;
}

VGPU_NO_SANITIZE static bool is_cl_name(const char *symbol) {
  return symbol && symbol[0] == 'c' && symbol[1] == 'l';
}

VGPU_NO_SANITIZE static bool opencl_refused(const char *symbol, void *found) {
  if (!found || !is_cl_name(symbol)) return false;
  Dl_info info;
  if (!dladdr(found, &info) || !info.dli_fname) return false;
  const char *base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  if (strncmp(base, "libnvidia-opencl", 16) != 0 || vgpu_config_get()->disabled || !any_limit()) return false;
  static int logged;
  if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
    VGPU_LOG_ERROR("OpenCL refused on a GPU with a memory or SM limit: its memory and kernel time cannot be "
                   "counted (%s not provided)",
                   symbol);
  return true;
}

/* glibc resolves RTLD_NEXT, and RTLD_DEFAULT's local scope, from the caller's return address: every
 * lookup we do not change must be a tail call (a jump, not a call) so the caller stays the
 * application's. The attribute forces sibling calls even in -O0/-O1 (sanitizer) builds. */
__attribute__((optimize("optimize-sibling-calls"))) VGPU_NO_SANITIZE VGPU_EXPORT void *dlsym(void *handle,
                                                                                            const char *symbol) {
  void *(*real_dlsym)(void *, const char *) = vgpu_real_dlsym_fn();
  if (!real_dlsym) return NULL;
  const struct hook_entry *e = handle == RTLD_NEXT ? NULL : find_hook(symbol);
  void *self = self_lookup(symbol);
  if (self) return real_dlsym(handle, symbol) ? self : NULL;
  /* OpenCL from a library handle (how ICD loaders look up vendors): a handle, unlike RTLD_NEXT and
   * RTLD_DEFAULT, does not depend on the caller, so this lookup need not be a tail call. */
  if (!e && handle != RTLD_NEXT && handle != RTLD_DEFAULT && is_cl_name(symbol)) {
    void *found = real_dlsym(handle, symbol);
    return opencl_refused(symbol, found) ? NULL : found;
  }
  if (!e) return real_dlsym(handle, symbol);
  /* A hooked name: answer with the hook only where the real lookup finds the symbol at all. */
  return real_dlsym(handle, symbol) ? e->hook : NULL;
}

/* dlvsym: the same rules as dlsym. (libcuda's symbols carry no version; glibc's dlvsym does not
 * find unversioned definitions, but it does find glibc's own dlsym, whose answers bypass ours.) */
__attribute__((optimize("optimize-sibling-calls"))) VGPU_NO_SANITIZE VGPU_EXPORT void *dlvsym(void *handle,
                                                                                             const char *symbol,
                                                                                             const char *version) {
  void *(*real_dlvsym)(void *, const char *, const char *) = vgpu_real_dlvsym_fn();
  if (!real_dlvsym) return NULL;
  const struct hook_entry *e = handle == RTLD_NEXT ? NULL : find_hook(symbol);
  void *self = self_lookup(symbol);
  if (self) return real_dlvsym(handle, symbol, version) ? self : NULL;
  if (!e) return real_dlvsym(handle, symbol, version);
  return real_dlvsym(handle, symbol, version) ? e->hook : NULL;
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

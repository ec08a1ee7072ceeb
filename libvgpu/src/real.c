/*
 * real.c — finding the real dlsym/dlvsym, libcuda.so.1 and libnvidia-ml.so.1.
 *
 * libvgpu interposes dlsym and dlvsym (interpose.c), so glibc's own are found without either: in
 * the dynamic symbol table of the library that defines them (libc.so.6 since glibc 2.34,
 * libdl.so.2 before), read through dladdr1's link map and its GNU hash table. This path never
 * recurses into our own functions, never allocates and calls nothing a sanitizer intercepts.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "real.h"

struct vgpu_cuda_real vgpu_cuda;
struct vgpu_nvml_real vgpu_nvml;

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);
static _Atomic(dlsym_fn) g_real_dlsym;
static _Atomic(dlvsym_fn) g_real_dlvsym;

/* A dynamic-section address: glibc relocates them in place on most architectures, not on all. */
VGPU_NO_SANITIZE static uintptr_t dyn_ptr(const struct link_map *lm, uintptr_t p) {
  return p < (uintptr_t)lm->l_addr ? p + (uintptr_t)lm->l_addr : p;
}

/* `name`'s definition in the object `lm` (its default version when it has several), by the
 * object's GNU hash table; NULL when absent or the table is missing. */
VGPU_NO_SANITIZE static void *elf_lookup(const struct link_map *lm, const char *name) {
  if (!lm || !lm->l_ld) return NULL;
  const ElfW(Sym) *symtab = NULL;
  const char *strtab = NULL;
  const uint32_t *gnu = NULL;
  const ElfW(Half) *versym = NULL;
  for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
    uintptr_t p = dyn_ptr(lm, (uintptr_t)d->d_un.d_ptr);
    if (d->d_tag == DT_SYMTAB) symtab = (const ElfW(Sym) *)p;
    else if (d->d_tag == DT_STRTAB) strtab = (const char *)p;
    else if (d->d_tag == DT_GNU_HASH) gnu = (const uint32_t *)p;
    else if (d->d_tag == DT_VERSYM) versym = (const ElfW(Half) *)p;
  }
  if (!symtab || !strtab || !gnu || gnu[0] == 0) return NULL;
  uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_words = gnu[2];
  const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gnu + 4) + bloom_words);
  const uint32_t *chain = buckets + nbuckets;
  uint32_t h = 5381;
  for (const unsigned char *c = (const unsigned char *)name; *c; c++) h = h * 33 + *c;
  uint32_t i = buckets[h % nbuckets];
  if (i < symoffset) return NULL;
  void *fallback = NULL;
  for (;; i++) {
    uint32_t h2 = chain[i - symoffset];
    const ElfW(Sym) *sym = &symtab[i];
    if ((h | 1) == (h2 | 1) && sym->st_shndx != SHN_UNDEF) {
      const char *a = strtab + sym->st_name, *b = name; /* no strcmp: a sanitizer may not be ready */
      while (*a && *a == *b) a++, b++;
      if (*a == *b) {
        void *addr = (void *)((uintptr_t)lm->l_addr + (uintptr_t)sym->st_value);
        if (!versym || !(versym[i] & 0x8000)) return addr; /* the default version */
        fallback = addr;
      }
    }
    if (h2 & 1) break;
  }
  return fallback;
}

/* glibc's function `name`, in the object that defines dlerror (libc.so.6 since 2.34, libdl.so.2
 * before: the same one as dlsym and dlvsym). Found with dladdr1, never dlopen: this runs inside a
 * sanitizer runtime's start-up, whose dlopen interceptor is not ready yet. */
VGPU_NO_SANITIZE static void *glibc_fn(const char *name) {
  Dl_info info;
  struct link_map *lm = NULL;
  if (!dladdr1((void *)&dlerror, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm) return NULL;
  return elf_lookup(lm, name);
}

VGPU_NO_SANITIZE dlvsym_fn vgpu_real_dlvsym_fn(void) {
  dlvsym_fn f = atomic_load_explicit(&g_real_dlvsym, memory_order_acquire);
  if (!f) {
    f = (dlvsym_fn)glibc_fn("dlvsym");
    if (f) atomic_store_explicit(&g_real_dlvsym, f, memory_order_release);
  }
  return f;
}

VGPU_NO_SANITIZE static dlsym_fn find_real_dlsym(void) {
  dlsym_fn f = (dlsym_fn)glibc_fn("dlsym");
  if (f) return f;
  /* No GNU hash table to read: glibc's dlvsym, if found, under the versions dlsym has had. */
  dlvsym_fn v = vgpu_real_dlvsym_fn();
  static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
  for (size_t i = 0; v && i < sizeof versions / sizeof versions[0]; i++) {
    void *p = v(RTLD_NEXT, "dlsym", versions[i]);
    if (p) return (dlsym_fn)p;
  }
  return NULL;
}

VGPU_NO_SANITIZE dlsym_fn vgpu_real_dlsym_fn(void) {
  dlsym_fn f = atomic_load_explicit(&g_real_dlsym, memory_order_acquire);
  if (!f) {
    f = find_real_dlsym();
    if (f) atomic_store_explicit(&g_real_dlsym, f, memory_order_release);
  }
  return f;
}

VGPU_NO_SANITIZE void *vgpu_real_dlsym(void *handle, const char *name) {
  dlsym_fn f = vgpu_real_dlsym_fn();
  return f ? f(handle, name) : NULL;
}

static void *g_cuda_handle;
static pthread_once_t g_cuda_once = PTHREAD_ONCE_INIT;

static void cuda_load_once(void) {
  g_cuda_handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!g_cuda_handle) {
    VGPU_LOG_WARN("cannot load libcuda.so.1 (%s); CUDA hooks pass through", dlerror());
    return;
  }
#define VGPU_CUDA_HOOK(name, base, since, ptsz, ret, params, args)                                 \
  vgpu_cuda.name = (ret(*) params)vgpu_real_dlsym(g_cuda_handle, #name);
#define VGPU_CUDA_CALL(name, ret, params)                                                          \
  vgpu_cuda.name = (ret(*) params)vgpu_real_dlsym(g_cuda_handle, #name);
#include "hooks/cuda.def"
  if (!vgpu_cuda.cuEventElapsedTime_v2)
    vgpu_cuda.cuEventElapsedTime_v2 =
        (CUresult(*)(float *, CUevent, CUevent))vgpu_real_dlsym(g_cuda_handle, "cuEventElapsedTime");
}

bool vgpu_cuda_load(void) {
  pthread_once(&g_cuda_once, cuda_load_once);
  return g_cuda_handle != NULL;
}

static void *g_nvml_handle;
static bool g_nvml_ok;
static pthread_once_t g_nvml_once = PTHREAD_ONCE_INIT;

static void nvml_load_once(void) {
  g_nvml_handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!g_nvml_handle) {
    VGPU_LOG_INFO("libnvidia-ml.so.1 not available (%s); device order from CUDA_VISIBLE_DEVICES",
                  dlerror());
    return;
  }
#define VGPU_NVML_HOOK(name, ret, params, args)                                                    \
  vgpu_nvml.name = (ret(*) params)vgpu_real_dlsym(g_nvml_handle, #name);
#define VGPU_NVML_CALL(name, ret, params)                                                          \
  vgpu_nvml.name = (ret(*) params)vgpu_real_dlsym(g_nvml_handle, #name);
#include "hooks/nvml.def"
  if (vgpu_nvml.nvmlInit_v2 && vgpu_nvml.nvmlInit_v2() == VGPU_NVML_SUCCESS) {
    g_nvml_ok = true;
  } else {
    VGPU_LOG_WARN("nvmlInit failed inside libvgpu; NVML-based device matching disabled");
  }
}

bool vgpu_nvml_load(void) {
  pthread_once(&g_nvml_once, nvml_load_once);
  return g_nvml_ok;
}

/*
 * real.c — finding the real dlsym, libcuda.so.1 and libnvidia-ml.so.1.
 *
 * The real dlsym is looked up with dlvsym (not interposed) under the versions glibc has used
 * for it, so this path never recurses into our own dlsym and never allocates.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "real.h"

struct vgpu_cuda_real vgpu_cuda;
struct vgpu_nvml_real vgpu_nvml;

typedef void *(*dlsym_fn)(void *, const char *);
static _Atomic(dlsym_fn) g_real_dlsym;

VGPU_NO_SANITIZE static dlsym_fn find_real_dlsym(void) {
  static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
  for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
    void *p = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
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

/*
 * real.h — typed pointers to the real driver/NVML functions, generated from the hooks/ lists, and the
 * loaders that fill them. A missing function leaves its pointer NULL; every caller checks.
 *
 * Threading: vgpu_cuda_load()/vgpu_nvml_load() are idempotent and thread-safe (pthread_once);
 * the tables are written once before the once-call returns and only read afterwards.
 */
#ifndef VGPU_REAL_H
#define VGPU_REAL_H

#include <cuda.h>
/* cuda.h maps the v1 name to _v2; we define both variants, so we need the plain name back. */
#undef cuGetProcAddress
/* ... and the CUDA 10 cuGraphInstantiate, which the driver still exports with its old ABI. */
#undef cuGraphInstantiate

#include "vgpu.h"

/* NVML types we need (no nvml.h on build machines; layouts from NVIDIA's public API docs). */
typedef int nvmlReturn_t;
typedef struct vgpu_nvml_device_opaque *nvmlDevice_t;
typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;
typedef struct {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;
#define VGPU_NVML_SUCCESS 0
#define VGPU_NVML_ERROR_INSUFFICIENT_SIZE 7

struct vgpu_cuda_real {
#define VGPU_CUDA_HOOK(name, base, since, ptsz, ret, params, args) ret(*name) params;
#define VGPU_CUDA_CALL(name, ret, params) ret(*name) params;
#include "hooks/cuda.def"
};
struct vgpu_nvml_real {
#define VGPU_NVML_HOOK(name, ret, params, args) ret(*name) params;
#define VGPU_NVML_CALL(name, ret, params) ret(*name) params;
#include "hooks/nvml.def"
};

extern struct vgpu_cuda_real vgpu_cuda;
extern struct vgpu_nvml_real vgpu_nvml;

/* The dlsym that libvgpu's own dlsym override forwards to (resolved without recursion). */
void *vgpu_real_dlsym(void *handle, const char *name);
/* The same function pointer (NULL if glibc's dlsym cannot be found). */
void *(*vgpu_real_dlsym_fn(void))(void *, const char *);
/* glibc's dlvsym (NULL if it cannot be found). */
void *(*vgpu_real_dlvsym_fn(void))(void *, const char *, const char *);

/* Loads libcuda.so.1 and resolves every pointer. Returns false when the driver is absent. */
bool vgpu_cuda_load(void);
/* Loads libnvidia-ml.so.1 and calls its nvmlInit_v2 once. Returns false when unavailable. */
bool vgpu_nvml_load(void);

/* Prototypes of every interposed name (the definitions live in hook_*.c / interpose.c). */
#define VGPU_CUDA_HOOK(name, base, since, ptsz, ret, params, args) VGPU_EXPORT ret name params;
#include "hooks/cuda.def"
#define VGPU_NVML_HOOK(name, ret, params, args) VGPU_EXPORT ret name params;
#include "hooks/nvml.def"

#endif /* VGPU_REAL_H */

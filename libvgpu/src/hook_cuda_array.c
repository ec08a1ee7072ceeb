/*
 * hook_cuda_array.c — CUDA arrays and mipmapped arrays, charged what the driver lays out for them
 * (issue 35, route 5), not their texels.
 *
 * The driver lays arrays out block-linear in whole pages: on an H200 (driver 580) 66 816 small
 * layered arrays held 8 715 MiB where their texels came to 416 MiB. Its layout is not a formula we
 * can copy, and cuArrayGetMemoryRequirements answers only for an array created with
 * CUDA_ARRAY3D_DEFERRED_MAPPING (any other: CUDA_ERROR_INVALID_VALUE). So, before the real call:
 *   1. A deferred or sparse array holds nothing itself (memory handles are mapped into it,
 *      cuMemCreate charges them): charged 0.
 *   2. Otherwise the driver is asked for the layout of the same shape: a deferred-mapping twin
 *      (which holds no memory) is created, its requirement read and the twin destroyed; the
 *      footprint is the requirement rounded up to its alignment. Remembered per shape and device
 *      (ARRAY_SHAPES entries, oldest replaced), so a loop of equal arrays asks once.
 *   3. When the driver has no deferred mapping, the texels rounded up to the allocation
 *      granularity (2 MiB on H100/H200): more than the driver takes for a small array, the safe
 *      side.
 * After the real call the NVML reconciliation runs (one NVML query): whatever the array holds
 * beyond its charge is charged as it appears, and an array that takes the container over its limit
 * is destroyed and refused (CUDA_ERROR_OUT_OF_MEMORY). Where NVML cannot see the process, 2. and 3.
 * are the bound.
 */
#include <pthread.h>
#include <string.h>

#include "hook.h"

#define ARRAY_SHAPES 128

struct array_shape {
  CUDA_ARRAY3D_DESCRIPTOR desc;
  unsigned levels; /* 0: a plain array */
  CUdevice dev;
  uint64_t bytes;
};
static pthread_mutex_t g_shape_mu = PTHREAD_MUTEX_INITIALIZER;
static struct array_shape g_shapes[ARRAY_SHAPES];
static unsigned g_nshapes, g_next_shape;

static uint64_t format_bytes(CUarray_format f) {
  switch ((int)f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    default: return 4; /* 32-bit and packed formats; one channel count already covers them */
  }
}

/* Texels of one level, saturating (a hostile descriptor cannot wrap the charge to a small value). */
static uint64_t texels(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch) {
  uint64_t dims[4] = {(uint64_t)(w ? w : 1), (uint64_t)(h ? h : 1), (uint64_t)(d ? d : 1), (uint64_t)(ch ? ch : 1)};
  uint64_t e = format_bytes(f);
  for (int i = 0; i < 4; i++) {
    if (dims[i] && e > UINT64_MAX / dims[i]) return UINT64_MAX;
    e *= dims[i];
  }
  return e;
}

static uint64_t round_up(uint64_t v, uint64_t a) {
  if (a <= 1) return v;
  uint64_t r = v % a;
  return r == 0 || v > UINT64_MAX - (a - r) ? v : v + (a - r);
}

/* Texels of every level, each rounded up to the allocation granularity (rule 3). */
static uint64_t granule_estimate(const CUDA_ARRAY3D_DESCRIPTOR *a, unsigned levels) {
  uint64_t g = vgpu_alloc_granule(), sum = 0;
  for (unsigned l = 0; l < (levels ? levels : 1) && l < 32; l++) {
    size_t w = a->Width >> l, h = a->Height >> l, d = a->Depth >> l;
    uint64_t t = round_up(texels(w ? w : 1, a->Height ? (h ? h : 1) : 0, a->Depth ? (d ? d : 1) : 0, a->Format,
                                 a->NumChannels),
                          g);
    sum = sum > UINT64_MAX - t ? UINT64_MAX : sum + t;
  }
  return sum;
}

/* Rule 2: the driver's requirement for a deferred-mapping twin of the shape; 0 when it cannot tell. */
static uint64_t twin_requirement(const CUDA_ARRAY3D_DESCRIPTOR *a, unsigned levels, CUdevice dev) {
  CUDA_ARRAY3D_DESCRIPTOR t = *a;
  t.Flags |= CUDA_ARRAY3D_DEFERRED_MAPPING;
  CUDA_ARRAY_MEMORY_REQUIREMENTS req;
  memset(&req, 0, sizeof req);
  CUresult q = CUDA_ERROR_NOT_SUPPORTED;
  if (levels) {
    CUmipmappedArray m = NULL;
    if (vgpu_cuda.cuMipmappedArrayGetMemoryRequirements &&
        VGPU_CALL_REAL(cuMipmappedArrayCreate, (&m, &t, levels)) == CUDA_SUCCESS) {
      q = vgpu_cuda.cuMipmappedArrayGetMemoryRequirements(&req, m, dev);
      VGPU_CALL_REAL(cuMipmappedArrayDestroy, (m));
    }
  } else {
    CUarray x = NULL;
    if (vgpu_cuda.cuArrayGetMemoryRequirements && VGPU_CALL_REAL(cuArray3DCreate_v2, (&x, &t)) == CUDA_SUCCESS) {
      q = vgpu_cuda.cuArrayGetMemoryRequirements(&req, x, dev);
      VGPU_CALL_REAL(cuArrayDestroy, (x));
    }
  }
  return q == CUDA_SUCCESS && req.size > 0 ? round_up((uint64_t)req.size, (uint64_t)req.alignment) : 0;
}

/* What an array of this shape holds on the current device (rules 1-3). */
static uint64_t array_footprint(const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned levels) {
  if (desc->Flags & (CUDA_ARRAY3D_DEFERRED_MAPPING | CUDA_ARRAY3D_SPARSE)) return 0;
  /* The shape's key: the fields only (the application's padding bytes are not part of it). */
  CUDA_ARRAY3D_DESCRIPTOR key;
  memset(&key, 0, sizeof key);
  key.Width = desc->Width;
  key.Height = desc->Height;
  key.Depth = desc->Depth;
  key.Format = desc->Format;
  key.NumChannels = desc->NumChannels;
  key.Flags = desc->Flags;
  const CUDA_ARRAY3D_DESCRIPTOR *a = &key;
  CUdevice dev = -1;
  if (!vgpu_cuda.cuCtxGetDevice || vgpu_cuda.cuCtxGetDevice(&dev) != CUDA_SUCCESS) return granule_estimate(a, levels);
  pthread_mutex_lock(&g_shape_mu);
  for (unsigned i = 0; i < g_nshapes; i++) {
    const struct array_shape *s = &g_shapes[i];
    if (s->dev == dev && s->levels == levels && memcmp(&s->desc, a, sizeof *a) == 0) {
      uint64_t b = s->bytes;
      pthread_mutex_unlock(&g_shape_mu);
      return b;
    }
  }
  pthread_mutex_unlock(&g_shape_mu);
  uint64_t b = twin_requirement(a, levels, dev);
  if (b == 0) b = granule_estimate(a, levels);
  pthread_mutex_lock(&g_shape_mu);
  struct array_shape *s = &g_shapes[g_nshapes < ARRAY_SHAPES ? g_nshapes++ : g_next_shape++ % ARRAY_SHAPES];
  s->desc = *a;
  s->levels = levels;
  s->dev = dev;
  s->bytes = b;
  pthread_mutex_unlock(&g_shape_mu);
  return b;
}

static void destroy(bool mipmap, uint64_t handle) {
  if (mipmap)
    VGPU_CALL_REAL(cuMipmappedArrayDestroy, ((CUmipmappedArray)(uintptr_t)handle));
  else
    VGPU_CALL_REAL(cuArrayDestroy, ((CUarray)(uintptr_t)handle));
}

/* Reserve, create (`create` fills *handle), track; then reconcile and refuse what went over. */
static CUresult create_charged(const CUDA_ARRAY3D_DESCRIPTOR *a, unsigned levels, bool mipmap,
                               CUresult (*create)(const void *args), const void *args, uint64_t *handle) {
  int ridx = vgpu_current_ridx();
  uint64_t charge = array_footprint(a, levels);
  if (vgpu_mem_reserve(ridx, charge, VGPU_MEM_DATA) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = create(args);
  if (rc != CUDA_SUCCESS) {
    vgpu_mem_release(ridx, charge, VGPU_MEM_DATA);
    return rc;
  }
  struct vgpu_track_rec rec = {.key = *handle, .bytes = charge, .ctx = vgpu_current_ctx(),
                               .kind = mipmap ? VGPU_TRACK_MIPMAP : VGPU_TRACK_ARRAY, .ridx = (int8_t)ridx,
                               .mem_kind = VGPU_MEM_DATA};
  if (!vgpu_track_put(&rec)) {
    VGPU_LOG_ERROR("out of host memory tracking an array: refused");
    destroy(mipmap, *handle);
    vgpu_mem_release(ridx, charge, VGPU_MEM_DATA);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (charge > 0 && vgpu_reconcile_over_limit(ridx)) {
    struct vgpu_track_rec gone;
    destroy(mipmap, *handle);
    if (vgpu_track_take(rec.kind, *handle, &gone)) vgpu_release_rec(&gone);
    vgpu_untracked_reconcile(ridx);
    VGPU_LOG_ERROR("Device %d OOM: an array of %llu bytes charged takes the container over its limit "
                   "(%llu bytes) with what the driver holds for it (NVML): destroyed, refused",
                   ridx, (unsigned long long)charge, (unsigned long long)vgpu_mem_limit(ridx));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

struct create3d_args {
  CUarray *out;
  const CUDA_ARRAY3D_DESCRIPTOR *desc;
  const CUDA_ARRAY_DESCRIPTOR *desc2d; /* cuArrayCreate: the application's own descriptor */
  uint64_t *handle;
};
static CUresult create_array(const void *p) {
  const struct create3d_args *a = p;
  CUresult rc = a->desc2d ? VGPU_CALL_REAL(cuArrayCreate_v2, (a->out, a->desc2d))
                          : VGPU_CALL_REAL(cuArray3DCreate_v2, (a->out, a->desc));
  if (rc == CUDA_SUCCESS) *a->handle = (uint64_t)(uintptr_t)*a->out;
  return rc;
}

VGPU_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray) {
  VGPU_HOOK_BEGIN(cuArrayCreate_v2, (pHandle, pAllocateArray));
  if (!pAllocateArray || !pHandle) return VGPU_CALL_REAL(cuArrayCreate_v2, (pHandle, pAllocateArray));
  vgpu_untracked_maybe();
  /* A 2D array is the 3D one of depth 0 with no flags. */
  CUDA_ARRAY3D_DESCRIPTOR d;
  memset(&d, 0, sizeof d);
  d.Width = pAllocateArray->Width;
  d.Height = pAllocateArray->Height;
  d.Format = pAllocateArray->Format;
  d.NumChannels = pAllocateArray->NumChannels;
  uint64_t h = 0;
  struct create3d_args args = {pHandle, &d, pAllocateArray, &h};
  return create_charged(&d, 0, false, create_array, &args, &h);
}

VGPU_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray) {
  VGPU_HOOK_BEGIN(cuArray3DCreate_v2, (pHandle, pAllocateArray));
  if (!pAllocateArray || !pHandle) return VGPU_CALL_REAL(cuArray3DCreate_v2, (pHandle, pAllocateArray));
  vgpu_untracked_maybe();
  uint64_t h = 0;
  struct create3d_args args = {pHandle, pAllocateArray, NULL, &h};
  return create_charged(pAllocateArray, 0, false, create_array, &args, &h);
}

VGPU_EXPORT CUresult cuArrayDestroy(CUarray hArray) {
  VGPU_HOOK_BEGIN(cuArrayDestroy, (hArray));
  CUresult rc = VGPU_CALL_REAL(cuArrayDestroy, (hArray));
  struct vgpu_track_rec rec;
  if (rc == CUDA_SUCCESS && vgpu_track_take(VGPU_TRACK_ARRAY, (uint64_t)(uintptr_t)hArray, &rec))
    vgpu_release_rec(&rec);
  return rc;
}

struct create_mip_args {
  CUmipmappedArray *out;
  const CUDA_ARRAY3D_DESCRIPTOR *desc;
  unsigned levels;
  uint64_t *handle;
};
static CUresult create_mipmap(const void *p) {
  const struct create_mip_args *a = p;
  CUresult rc = VGPU_CALL_REAL(cuMipmappedArrayCreate, (a->out, a->desc, a->levels));
  if (rc == CUDA_SUCCESS) *a->handle = (uint64_t)(uintptr_t)*a->out;
  return rc;
}

VGPU_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                            const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                            unsigned int numMipmapLevels) {
  VGPU_HOOK_BEGIN(cuMipmappedArrayCreate, (pHandle, pMipmappedArrayDesc, numMipmapLevels));
  if (!pMipmappedArrayDesc || !pHandle)
    return VGPU_CALL_REAL(cuMipmappedArrayCreate, (pHandle, pMipmappedArrayDesc, numMipmapLevels));
  vgpu_untracked_maybe();
  uint64_t h = 0;
  unsigned levels = numMipmapLevels ? numMipmapLevels : 1;
  struct create_mip_args args = {pHandle, pMipmappedArrayDesc, numMipmapLevels, &h};
  return create_charged(pMipmappedArrayDesc, levels, true, create_mipmap, &args, &h);
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

/*
 * hook_cuda_launch.c — every kernel-launching entry point goes through the SM limiter's gate
 * (limiter.h) and stamps last_kernel_time. With no SM limit in the region the gate is a few loads.
 */
#include <pthread.h>
#include <unistd.h>

#include "hook.h"
#if __has_include("limiter.h")
#include "limiter.h"
#define VGPU_HAVE_LIMITER 1
#endif

#ifdef VGPU_HAVE_LIMITER
static int g_limiter_state; /* 0 not set up, 1 ready, -1 unavailable */
static pthread_mutex_t g_limiter_mu = PTHREAD_MUTEX_INITIALIZER;

/* This process's slot, without registering one (the sm_util thread must not claim a slot again
 * after the exit path freed ours): the cached index while it still holds our pid, else a scan. */
static int own_slot(void) {
  static int cached = -1;
  struct vgpu_region_map *m = vgpu_state_region(false);
  if (m == NULL) return -1;
  int32_t me = (int32_t)getpid();
  int c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (c >= 0 && __atomic_load_n(&m->r->procs[c].pid, __ATOMIC_ACQUIRE) == me &&
      __atomic_load_n(&m->r->procs[c].status, __ATOMIC_ACQUIRE) != VGPU_SLOT_FREE)
    return c;
  int n = __atomic_load_n(&m->r->proc_num, __ATOMIC_ACQUIRE);
  if (n > VGPU_MAX_PROCS) n = VGPU_MAX_PROCS;
  for (int i = 0; i < n; i++)
    if (__atomic_load_n(&m->r->procs[i].pid, __ATOMIC_ACQUIRE) == me &&
        __atomic_load_n(&m->r->procs[i].status, __ATOMIC_ACQUIRE) != VGPU_SLOT_FREE) {
      __atomic_store_n(&cached, i, __ATOMIC_RELAXED);
      return i;
    }
  return -1;
}

static void limiter_setup(void) {
  pthread_mutex_lock(&g_limiter_mu);
  if (g_limiter_state == 0) {
    const struct vgpu_config *cfg = vgpu_config_get();
    vgpu_limiter_driver_t drv = {0};
    drv.cuEventCreate = vgpu_cuda.cuEventCreate;
    drv.cuEventDestroy = vgpu_cuda.cuEventDestroy_v2;
    drv.cuEventRecord = vgpu_cuda.cuEventRecord;
    drv.cuEventQuery = vgpu_cuda.cuEventQuery;
    drv.cuEventSynchronize = vgpu_cuda.cuEventSynchronize;
    drv.cuEventElapsedTime = vgpu_cuda.cuEventElapsedTime_v2;
    drv.cuStreamCreate = vgpu_cuda.cuStreamCreate;
    drv.cuStreamDestroy = vgpu_cuda.cuStreamDestroy_v2;
    drv.cuCtxGetCurrent = vgpu_cuda.cuCtxGetCurrent;
    drv.cuCtxPushCurrent = vgpu_cuda.cuCtxPushCurrent_v2;
    drv.cuCtxPopCurrent = vgpu_cuda.cuCtxPopCurrent_v2;
    drv.cuStreamIsCapturing = vgpu_cuda.cuStreamIsCapturing;
    drv.cuThreadExchangeStreamCaptureMode = vgpu_cuda.cuThreadExchangeStreamCaptureMode;
    vgpu_limiter_config_t lc = {0};
    vgpu_state_slot(); /* the limiter shares the region's bucket */
    struct vgpu_region_map *m = vgpu_state_region(true);
    lc.region = m ? m->r : NULL;
    lc.ext = m ? m->ext : NULL;
    lc.device_count = VGPU_MAX_DEVICES;
    lc.policy = (int)cfg->util_policy;
    for (int d = 0; d < VGPU_MAX_DEVICES; d++) lc.sm_limit_percent[d] = (int)cfg->sm_limit[d];
    lc.own_slot = own_slot; /* sm_util for HAMi's monitor */
    g_limiter_state = vgpu_limiter_init(&drv, &lc) == 0 ? 1 : -1;
    if (g_limiter_state < 0) VGPU_LOG_ERROR("SM limiter could not start: SM limit NOT enforced");
  }
  pthread_mutex_unlock(&g_limiter_mu);
}

static void limiter_atfork_child(void) { vgpu_limiter_atfork_child(); }
__attribute__((constructor)) static void launch_ctor(void) {
  pthread_atfork(NULL, NULL, limiter_atfork_child);
}
__attribute__((destructor)) static void launch_dtor(void) {
  if (g_limiter_state == 1) vgpu_limiter_flush();
}
#endif

/* Whether launches go through the limiter: it is running and some device of the container has an
 * SM limit (with no region mapped yet, assume one may). */
static bool gate_limited(void) {
#ifdef VGPU_HAVE_LIMITER
  if (__atomic_load_n(&g_limiter_state, __ATOMIC_ACQUIRE) == 0) limiter_setup();
  if (g_limiter_state != 1) return false;
  struct vgpu_region_map *m = vgpu_state_region(false);
  if (m) { /* no SM limit on any of the container's devices: skip the per-launch device lookup */
    uint64_t n = __atomic_load_n(&m->r->device_num, __ATOMIC_RELAXED);
    if (n == 0 || n > VGPU_MAX_DEVICES) n = VGPU_MAX_DEVICES;
    const uint64_t *lim = m->r->sm_limit;
    bool any = false;
    for (uint64_t d = 0; d < n; d++) {
      uint64_t l = __atomic_load_n(&lim[d], __ATOMIC_RELAXED);
      any |= l - 1 < 99; /* 1..99 */
    }
    if (!any) return false;
  }
  return true;
#else
  return false;
#endif
}

/* Region device of the launch, or -1 when no SM limit could apply (skips the limiter cheaply). */
static int gate_device(void) { return gate_limited() ? vgpu_current_ridx() : -1; }

/* The limiter times a launch with events of the current context. A launch into a stream of
 * another context, or with no current context at all (a context-independent CUkernel on an
 * explicit stream: the driver runs it in the stream's context), is gated in the stream's own
 * context, made current around the limiter's calls only (never around the real launch). */
static CUcontext stream_ctx_to_push(CUstream s) {
  if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD || !vgpu_cuda.cuStreamGetCtx ||
      !vgpu_cuda.cuCtxPushCurrent_v2 || !vgpu_cuda.cuCtxPopCurrent_v2)
    return NULL;
  CUcontext sc = NULL;
  if (VGPU_CALL_REAL(cuStreamGetCtx, (s, &sc)) != CUDA_SUCCESS || sc == NULL) return NULL;
  return sc == (CUcontext)vgpu_current_ctx() ? NULL : sc;
}
static bool push_ctx(CUcontext c) { return c && VGPU_CALL_REAL(cuCtxPushCurrent_v2, (c)) == CUDA_SUCCESS; }
static void pop_ctx(bool pushed) {
  CUcontext popped = NULL;
  if (pushed) VGPU_CALL_REAL(cuCtxPopCurrent_v2, (&popped));
}

/* Region device of a launch on stream s: the gate's, in the stream's context when that is not the
 * current one (*sctx: the context to push around the limiter's calls, NULL for none). */
static int gate_device_for(CUstream s, CUcontext *sctx) {
  *sctx = NULL;
  if (!gate_limited()) return -1;
  CUcontext c = stream_ctx_to_push(s);
  if (!push_ctx(c)) return vgpu_current_ridx();
  int dev = vgpu_current_ridx();
  pop_ctx(true);
  *sctx = c;
  return dev;
}

static CUstream ptsz_stream(CUstream s) { return s ? s : CU_STREAM_PER_THREAD; }

static void before(int dev, CUstream s) {
  vgpu_state_kernel_launched();
#ifdef VGPU_HAVE_LIMITER
  if (dev >= 0) vgpu_limiter_before_launch(dev, s);
#else
  (void)dev;
  (void)s;
#endif
}

static void after(int dev, CUstream s, CUresult rc) {
#ifdef VGPU_HAVE_LIMITER
  if (dev >= 0 && rc == CUDA_SUCCESS) vgpu_limiter_after_launch(dev, s);
#else
  (void)dev;
  (void)s;
  (void)rc;
#endif
}

/* A launch of function f: first the local memory it makes the context grow (hook_cuda_lmem.c). */
#define LAUNCH_F(name, f, stream, args)                                                            \
  do {                                                                                             \
    if (!vgpu_lmem_before_launch(f)) return CUDA_ERROR_OUT_OF_MEMORY;                              \
    LAUNCH(name, stream, args);                                                                    \
  } while (0)

#define LAUNCH(name, stream, args)                                                                 \
  do {                                                                                             \
    CUstream s_ = (stream);                                                                        \
    CUcontext sctx_ = NULL;                                                                        \
    int dev_ = gate_device_for(s_, &sctx_);                                                        \
    bool pushed_ = push_ctx(sctx_);                                                                \
    before(dev_, s_);                                                                              \
    pop_ctx(pushed_);                                                                              \
    CUresult rc_ = VGPU_CALL_REAL(name, args);                                                     \
    pushed_ = push_ctx(sctx_);                                                                     \
    after(dev_, s_, rc_);                                                                          \
    pop_ctx(pushed_);                                                                              \
    return rc_;                                                                                    \
  } while (0)

VGPU_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                    unsigned int gridDimZ, unsigned int blockDimX,
                                    unsigned int blockDimY, unsigned int blockDimZ,
                                    unsigned int sharedMemBytes, CUstream hStream,
                                    void **kernelParams, void **extra) {
  VGPU_HOOK_BEGIN(cuLaunchKernel, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                   sharedMemBytes, hStream, kernelParams, extra));
  LAUNCH_F(cuLaunchKernel, f, hStream,
         (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
          kernelParams, extra));
}

VGPU_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                         unsigned int gridDimZ, unsigned int blockDimX,
                                         unsigned int blockDimY, unsigned int blockDimZ,
                                         unsigned int sharedMemBytes, CUstream hStream,
                                         void **kernelParams, void **extra) {
  VGPU_HOOK_BEGIN(cuLaunchKernel_ptsz, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                                        blockDimZ, sharedMemBytes, hStream, kernelParams, extra));
  LAUNCH_F(cuLaunchKernel_ptsz, f, ptsz_stream(hStream),
         (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
          kernelParams, extra));
}

VGPU_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                      void **extra) {
  VGPU_HOOK_BEGIN(cuLaunchKernelEx, (config, f, kernelParams, extra));
  LAUNCH_F(cuLaunchKernelEx, f, config ? config->hStream : NULL, (config, f, kernelParams, extra));
}

VGPU_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                           void **kernelParams, void **extra) {
  VGPU_HOOK_BEGIN(cuLaunchKernelEx_ptsz, (config, f, kernelParams, extra));
  LAUNCH_F(cuLaunchKernelEx_ptsz, f, ptsz_stream(config ? config->hStream : NULL),
         (config, f, kernelParams, extra));
}

VGPU_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                               unsigned int gridDimY, unsigned int gridDimZ,
                                               unsigned int blockDimX, unsigned int blockDimY,
                                               unsigned int blockDimZ, unsigned int sharedMemBytes,
                                               CUstream hStream, void **kernelParams) {
  VGPU_HOOK_BEGIN(cuLaunchCooperativeKernel, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                                              blockDimZ, sharedMemBytes, hStream, kernelParams));
  LAUNCH_F(cuLaunchCooperativeKernel, f, hStream,
         (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
          kernelParams));
}

VGPU_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                    unsigned int gridDimY, unsigned int gridDimZ,
                                                    unsigned int blockDimX, unsigned int blockDimY,
                                                    unsigned int blockDimZ,
                                                    unsigned int sharedMemBytes, CUstream hStream,
                                                    void **kernelParams) {
  VGPU_HOOK_BEGIN(cuLaunchCooperativeKernel_ptsz,
                  (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                   hStream, kernelParams));
  LAUNCH_F(cuLaunchCooperativeKernel_ptsz, f, ptsz_stream(hStream),
         (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
          kernelParams));
}

VGPU_EXPORT CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *launchParamsList,
                                                          unsigned int numDevices,
                                                          unsigned int flags) {
  VGPU_HOOK_BEGIN(cuLaunchCooperativeKernelMultiDevice, (launchParamsList, numDevices, flags));
  vgpu_state_kernel_launched();
  /* One gate per entry, each on its own stream (the limiter wants the caller's context current;
   * the entries' streams belong to several devices, so the device comes from each stream). */
  int devs[64];
  unsigned n = numDevices < 64 ? numDevices : 64;
  int gate = gate_device();
  for (unsigned i = 0; i < n && launchParamsList; i++) {
    devs[i] = -1;
    CUcontext c = NULL;
    if (gate >= 0 && vgpu_cuda.cuStreamGetCtx &&
        vgpu_cuda.cuStreamGetCtx(launchParamsList[i].hStream, &c) == CUDA_SUCCESS &&
        vgpu_cuda.cuCtxPushCurrent_v2 && vgpu_cuda.cuCtxPushCurrent_v2(c) == CUDA_SUCCESS) {
      devs[i] = vgpu_current_ridx();
      before(devs[i], launchParamsList[i].hStream);
      CUcontext popped;
      vgpu_cuda.cuCtxPopCurrent_v2(&popped);
    }
  }
  CUresult rc = VGPU_CALL_REAL(cuLaunchCooperativeKernelMultiDevice, (launchParamsList, numDevices, flags));
  for (unsigned i = 0; i < n && launchParamsList; i++) {
    CUcontext c = NULL;
    if (devs[i] >= 0 && vgpu_cuda.cuStreamGetCtx(launchParamsList[i].hStream, &c) == CUDA_SUCCESS &&
        vgpu_cuda.cuCtxPushCurrent_v2(c) == CUDA_SUCCESS) {
      after(devs[i], launchParamsList[i].hStream, rc);
      CUcontext popped;
      vgpu_cuda.cuCtxPopCurrent_v2(&popped);
    }
  }
  return rc;
}

VGPU_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuGraphLaunch, (hGraphExec, hStream));
  if (!vgpu_graph_mem_before_launch(hGraphExec)) return CUDA_ERROR_OUT_OF_MEMORY; /* allocation nodes */
  LAUNCH(cuGraphLaunch, hStream, (hGraphExec, hStream));
}

VGPU_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuGraphLaunch_ptsz, (hGraphExec, hStream));
  if (!vgpu_graph_mem_before_launch(hGraphExec)) return CUDA_ERROR_OUT_OF_MEMORY; /* allocation nodes */
  LAUNCH(cuGraphLaunch_ptsz, ptsz_stream(hStream), (hGraphExec, hStream));
}

/* The pre-4.0 launch API: cuLaunch and cuLaunchGrid run on the legacy default stream. */
VGPU_EXPORT CUresult cuLaunch(CUfunction f) {
  VGPU_HOOK_BEGIN(cuLaunch, (f));
  LAUNCH_F(cuLaunch, f, NULL, (f));
}

VGPU_EXPORT CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height) {
  VGPU_HOOK_BEGIN(cuLaunchGrid, (f, grid_width, grid_height));
  LAUNCH_F(cuLaunchGrid, f, NULL, (f, grid_width, grid_height));
}

VGPU_EXPORT CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuLaunchGridAsync, (f, grid_width, grid_height, hStream));
  LAUNCH_F(cuLaunchGridAsync, f, hStream, (f, grid_width, grid_height, hStream));
}

/* Memsets (issue 35, item 19): engine work a tenant can queue back to back without a launch (1 GiB
 * cuMemsetD32Async took 99 % of an H200 past a 25 % limit). Gated and timed like a launch on the
 * same stream; the synchronous forms run on the legacy (or, _ptds, the per-thread) default stream. */
#define MEMSET_HOOKS(w, T, v)                                                                      \
  VGPU_EXPORT CUresult cuMemsetD##w##_v2(CUdeviceptr dstDevice, T v, size_t N) {                   \
    VGPU_HOOK_BEGIN(cuMemsetD##w##_v2, (dstDevice, v, N));                                         \
    LAUNCH(cuMemsetD##w##_v2, NULL, (dstDevice, v, N));                                            \
  }                                                                                                \
  VGPU_EXPORT CUresult cuMemsetD##w##_v2_ptds(CUdeviceptr dstDevice, T v, size_t N) {              \
    VGPU_HOOK_BEGIN(cuMemsetD##w##_v2_ptds, (dstDevice, v, N));                                    \
    LAUNCH(cuMemsetD##w##_v2_ptds, CU_STREAM_PER_THREAD, (dstDevice, v, N));                       \
  }                                                                                                \
  VGPU_EXPORT CUresult cuMemsetD##w##Async(CUdeviceptr dstDevice, T v, size_t N, CUstream hStream) { \
    VGPU_HOOK_BEGIN(cuMemsetD##w##Async, (dstDevice, v, N, hStream));                              \
    LAUNCH(cuMemsetD##w##Async, hStream, (dstDevice, v, N, hStream));                              \
  }                                                                                                \
  VGPU_EXPORT CUresult cuMemsetD##w##Async_ptsz(CUdeviceptr dstDevice, T v, size_t N, CUstream hStream) { \
    VGPU_HOOK_BEGIN(cuMemsetD##w##Async_ptsz, (dstDevice, v, N, hStream));                         \
    LAUNCH(cuMemsetD##w##Async_ptsz, ptsz_stream(hStream), (dstDevice, v, N, hStream));            \
  }                                                                                                \
  VGPU_EXPORT CUresult cuMemsetD2D##w##_v2(CUdeviceptr dstDevice, size_t dstPitch, T v, size_t Width, \
                                          size_t Height) {                                         \
    VGPU_HOOK_BEGIN(cuMemsetD2D##w##_v2, (dstDevice, dstPitch, v, Width, Height));                 \
    LAUNCH(cuMemsetD2D##w##_v2, NULL, (dstDevice, dstPitch, v, Width, Height));                    \
  }                                                                                                \
  VGPU_EXPORT CUresult cuMemsetD2D##w##_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, T v, size_t Width, \
                                               size_t Height) {                                    \
    VGPU_HOOK_BEGIN(cuMemsetD2D##w##_v2_ptds, (dstDevice, dstPitch, v, Width, Height));            \
    LAUNCH(cuMemsetD2D##w##_v2_ptds, CU_STREAM_PER_THREAD, (dstDevice, dstPitch, v, Width, Height)); \
  }                                                                                                \
  VGPU_EXPORT CUresult cuMemsetD2D##w##Async(CUdeviceptr dstDevice, size_t dstPitch, T v, size_t Width, \
                                            size_t Height, CUstream hStream) {                     \
    VGPU_HOOK_BEGIN(cuMemsetD2D##w##Async, (dstDevice, dstPitch, v, Width, Height, hStream));      \
    LAUNCH(cuMemsetD2D##w##Async, hStream, (dstDevice, dstPitch, v, Width, Height, hStream));      \
  }                                                                                                \
  VGPU_EXPORT CUresult cuMemsetD2D##w##Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, T v, size_t Width, \
                                                 size_t Height, CUstream hStream) {                \
    VGPU_HOOK_BEGIN(cuMemsetD2D##w##Async_ptsz, (dstDevice, dstPitch, v, Width, Height, hStream)); \
    LAUNCH(cuMemsetD2D##w##Async_ptsz, ptsz_stream(hStream), (dstDevice, dstPitch, v, Width, Height, hStream)); \
  }

MEMSET_HOOKS(8, unsigned char, uc)
MEMSET_HOOKS(16, unsigned short, us)
MEMSET_HOOKS(32, unsigned int, ui)

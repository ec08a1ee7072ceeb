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

/* Region device of the launch, or -1 when no SM limit could apply (skips the limiter cheaply). */
static int gate_device(void) {
#ifdef VGPU_HAVE_LIMITER
  if (__atomic_load_n(&g_limiter_state, __ATOMIC_ACQUIRE) == 0) limiter_setup();
  if (g_limiter_state != 1) return -1;
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
    if (!any) return -1;
  }
  return vgpu_current_ridx();
#else
  return -1;
#endif
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

#define LAUNCH(name, stream, args)                                                                 \
  do {                                                                                             \
    int dev_ = gate_device();                                                                      \
    CUstream s_ = (stream);                                                                        \
    before(dev_, s_);                                                                              \
    CUresult rc_ = VGPU_CALL_REAL(name, args);                                                     \
    after(dev_, s_, rc_);                                                                          \
    return rc_;                                                                                    \
  } while (0)

VGPU_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                    unsigned int gridDimZ, unsigned int blockDimX,
                                    unsigned int blockDimY, unsigned int blockDimZ,
                                    unsigned int sharedMemBytes, CUstream hStream,
                                    void **kernelParams, void **extra) {
  VGPU_HOOK_BEGIN(cuLaunchKernel, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                   sharedMemBytes, hStream, kernelParams, extra));
  LAUNCH(cuLaunchKernel, hStream,
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
  LAUNCH(cuLaunchKernel_ptsz, ptsz_stream(hStream),
         (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
          kernelParams, extra));
}

VGPU_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                      void **extra) {
  VGPU_HOOK_BEGIN(cuLaunchKernelEx, (config, f, kernelParams, extra));
  LAUNCH(cuLaunchKernelEx, config ? config->hStream : NULL, (config, f, kernelParams, extra));
}

VGPU_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                           void **kernelParams, void **extra) {
  VGPU_HOOK_BEGIN(cuLaunchKernelEx_ptsz, (config, f, kernelParams, extra));
  LAUNCH(cuLaunchKernelEx_ptsz, ptsz_stream(config ? config->hStream : NULL),
         (config, f, kernelParams, extra));
}

VGPU_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                               unsigned int gridDimY, unsigned int gridDimZ,
                                               unsigned int blockDimX, unsigned int blockDimY,
                                               unsigned int blockDimZ, unsigned int sharedMemBytes,
                                               CUstream hStream, void **kernelParams) {
  VGPU_HOOK_BEGIN(cuLaunchCooperativeKernel, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                                              blockDimZ, sharedMemBytes, hStream, kernelParams));
  LAUNCH(cuLaunchCooperativeKernel, hStream,
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
  LAUNCH(cuLaunchCooperativeKernel_ptsz, ptsz_stream(hStream),
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

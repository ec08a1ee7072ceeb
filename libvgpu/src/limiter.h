/*
 * limiter.h — libvgpu's SM limiter (issue 10): a time-based limiter of the GPU busy time a
 * container gets per device.
 *
 * How it works, in one paragraph: every limited launch is bracketed by two timing events on its
 * stream; completed brackets give the launch's GPU interval on CLOCK_MONOTONIC (per-context
 * reference events, refined by event lower bounds). Per process the union of intervals is taken
 * (overlapping streams count once), and stretches in which another context held the GPU (found by
 * late "heartbeat" events on an idle internal stream) are not charged, but the context switch that
 * brought the context back is (its cost measured on the device, limiter_switch.c, charged to the
 * context it brings on). The
 * charge goes into a virtual-time token bucket (GCRA) kept in the region's extension block
 * (ext->devices[dev].limiter_bucket, CLOCK_MONOTONIC ns), so every process of the container draws from the
 * same budget. Launches are admitted while the container's charged work plus this process's
 * in-flight estimate stays within a short burst of its entitlement; a slow integral trim (bounded,
 * frozen while not saturated) corrects residual bias. With no SM limit the hooks only read a few
 * region fields (no events, no locks, no syscalls). See README.md "## SM limiter".
 *
 * HOW THE INTERPOSITION LAYER CALLS IT
 *   1. Once, after the real driver is loaded and the region is mapped (or not: region may be NULL):
 *        vgpu_limiter_driver_t drv = {0};   // fill with REAL (unhooked) driver entry points
 *        drv.cuEventCreate = real_cuEventCreate; ... (every CUresult field below is required)
 *        vgpu_limiter_config_t cfg = {0};
 *        cfg.region = region; cfg.ext = ext_or_NULL; cfg.device_count = n;
 *        cfg.policy = vgpu_limiter_parse_policy(getenv("GPU_CORE_UTILIZATION_POLICY"));
 *        cfg.sm_limit_percent[i] = parsed CUDA_DEVICE_SM_LIMIT[_i]   // used only if region==NULL
 *        vgpu_limiter_init(&drv, &cfg);
 *      Calling the hooks before init is safe: they do nothing.
 *   2. Around EVERY kernel-launching call (cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel,
 *      cuLaunchCooperativeKernelMultiDevice (once per launch param entry, with that entry's stream),
 *      cuGraphLaunch, and all their _ptsz variants):
 *        vgpu_limiter_before_launch(dev, stream);   // may sleep (throttling, priority block)
 *        CUresult r = real_launch(...);
 *        if (r == CUDA_SUCCESS) vgpu_limiter_after_launch(dev, stream);
 *      on the same thread, with the caller's context current.
 *      - dev: region device index of the current context's device (index into region->sm_limit[]
 *        and ext->devices[]), i.e. the CUDA ordinal as this process sees it. Out of range: ignored.
 *      - stream: the stream the work goes to. For _ptsz variants (and cuLaunchKernelEx's
 *        config->hStream under per-thread default stream) pass CU_STREAM_PER_THREAD when the caller
 *        passed 0, so that the limiter's timing events go to the same stream and never to the
 *        legacy default stream (which would serialize the application's streams).
 *      If the launch fails, skip after_launch; the next before_launch on the thread discards the
 *      unused bracket.
 *   3. Optional: vgpu_limiter_context_destroyed(ctx) from the cuCtxDestroy / primary-ctx reset hooks
 *      (forget events of a dead context); vgpu_limiter_flush() at exit (publishes counters);
 *      vgpu_limiter_atfork_child() in a pthread_atfork child handler.
 *
 * Thread safety: all functions are thread-safe. Nothing here allocates in the unlimited path.
 * This file and limiter.c depend only on cuda.h types and vgpu_region.h; driver functions come
 * through vgpu_limiter_driver_t so unit tests can run a simulated GPU and clock.
 */
#ifndef VGPU_LIMITER_H
#define VGPU_LIMITER_H

#include <cuda.h>
#include <stdint.h>

#include "vgpu/vgpu_region.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GPU_CORE_UTILIZATION_POLICY values (HAMi semantics). */
#define VGPU_LIMITER_POLICY_DEFAULT 0 /* limit while region->utilization_switch != 0 */
#define VGPU_LIMITER_POLICY_FORCE 1   /* always limit */
#define VGPU_LIMITER_POLICY_DISABLE 2 /* never limit, no priority blocking */

typedef struct {
  /* Real driver entry points (required). cuEventDestroy/cuStreamDestroy: the _v2 ones. */
  CUresult (*cuEventCreate)(CUevent *event, unsigned int flags);
  CUresult (*cuEventDestroy)(CUevent event);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventQuery)(CUevent event);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
  CUresult (*cuStreamCreate)(CUstream *stream, unsigned int flags);
  CUresult (*cuStreamDestroy)(CUstream stream);
  CUresult (*cuCtxGetCurrent)(CUcontext *ctx);
  /* Optional (NULL = only the caller's context gets heartbeats while a launch waits): push
   * another context with work in flight for a moment to record its heartbeat, then pop it. */
  CUresult (*cuCtxPushCurrent)(CUcontext ctx);
  CUresult (*cuCtxPopCurrent)(CUcontext *pctx);
  /* Optional (NULL = skip): a launch into a capturing stream is not executed now, so it is neither
   * bracketed nor throttled (its graph is limited at cuGraphLaunch); the limiter's own event calls
   * run in relaxed capture mode so they never invalidate another thread's global-mode capture. */
  CUresult (*cuStreamIsCapturing)(CUstream stream, CUstreamCaptureStatus *status);
  CUresult (*cuThreadExchangeStreamCaptureMode)(CUstreamCaptureMode *mode);
  /* Clock and sleep; NULL = CLOCK_MONOTONIC and nanosleep. Tests inject a simulated clock. */
  int64_t (*now_ns)(void *clock_ctx);
  void (*sleep_ns)(void *clock_ctx, int64_t ns);
  void *clock_ctx;
} vgpu_limiter_driver_t;

typedef struct {
  vgpu_region_t *region;   /* shared region, or NULL (standalone: limits from sm_limit_percent) */
  vgpu_region_ext_t *ext;  /* extension block, or NULL (then the bucket is process-local) */
  int device_count;        /* devices this process sees, <= VGPU_MAX_DEVICES */
  int policy;              /* VGPU_LIMITER_POLICY_* */
  int sm_limit_percent[VGPU_MAX_DEVICES]; /* only when region == NULL; 0 or >= 100 = none */
  /* Optional: this process's slot in region->procs (or -1). When set, the limiter writes the
   * process's measured busy share into procs[slot].device_util[dev].sm_util the way HAMi-core
   * does (percent over the last ~1 s, refreshed every 120 ms), so HAMi's monitor reads it. */
  int (*own_slot)(void);
} vgpu_limiter_config_t;

/* Parses GPU_CORE_UTILIZATION_POLICY ("force"/"FORCE", "disable"/"DISABLE", else default). */
int vgpu_limiter_parse_policy(const char *value);

/* Installs the process-wide limiter. Returns 0, or -1 on a bad argument (hooks stay inert). */
int vgpu_limiter_init(const vgpu_limiter_driver_t *drv, const vgpu_limiter_config_t *cfg);

void vgpu_limiter_before_launch(int dev, CUstream stream);
void vgpu_limiter_after_launch(int dev, CUstream stream);

void vgpu_limiter_context_destroyed(CUcontext ctx);
void vgpu_limiter_flush(void);
void vgpu_limiter_atfork_child(void);

/* ---- Instance API (tests simulate several processes with several instances on one region) --- */
typedef struct vgpu_limiter vgpu_limiter_t;

vgpu_limiter_t *vgpu_limiter_create(const vgpu_limiter_driver_t *drv,
                                    const vgpu_limiter_config_t *cfg);
void vgpu_limiter_destroy(vgpu_limiter_t *lim);
void vgpu_limiter_before(vgpu_limiter_t *lim, int dev, CUstream stream);
void vgpu_limiter_after(vgpu_limiter_t *lim, int dev, CUstream stream);
/* Processes finished launches now (normally done inside before/after); publishes counters and
 * (with cfg.own_slot) the slot's sm_util when due. */
void vgpu_limiter_poll(vgpu_limiter_t *lim, int dev);
/* Refreshes sm_util from what was already charged, without driver calls (so a process that went
 * idle reads 0 after a window). The process-wide limiter runs this from its own thread. */
void vgpu_limiter_publish_util(vgpu_limiter_t *lim, int dev);
void vgpu_limiter_forget_context(vgpu_limiter_t *lim, CUcontext ctx);

/* Observability for tests and logs. */
typedef struct {
  int limit_percent;        /* effective limit now, 0 = unlimited */
  int64_t busy_ns;          /* union GPU busy time this instance charged */
  int64_t throttled_ns;     /* time its launches waited */
  uint64_t launches_total;
  uint64_t launches_delayed;
  uint64_t in_flight;       /* launches bracketed but not yet charged */
  double trim;              /* integral trim factor in [-VGPU_LIMITER_TRIM_MAX, +MAX] */
  int64_t estimate_ns;      /* device-level EWMA of a launch's GPU time */
  uint64_t switches;        /* context switches onto this instance's contexts it saw */
  int64_t switch_ns;        /* what it charged for them (part of busy_ns) */
  int64_t switch_cost_ns;   /* what one switch costs on this device, as measured (issue 30) */
  uint64_t long_runs;       /* launches that ran past LONG_RUN_NS (charged while running) */
  int long_running;         /* ...still running now (a persistent kernel, issue 35 route 20) */
} vgpu_limiter_stats_t;
#define VGPU_LIMITER_TRIM_MAX 0.25

void vgpu_limiter_stats(vgpu_limiter_t *lim, int dev, vgpu_limiter_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* VGPU_LIMITER_H */

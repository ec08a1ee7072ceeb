/*
 * limiter_sim.h — a simulated GPU and clock for the SM limiter's CPU-only tests.
 *
 * The GPU has one execution engine shared by every context (time-sliced like a real GPU without
 * MPS): kernels run one at a time in submission order, each stream keeps its own order, and an
 * event completes when its stream's earlier work has. The clock only moves when the test says so
 * (CPU cost of a launch) or when the limiter sleeps (with a nanosleep-like overshoot), so runs
 * are deterministic. The simulator records every kernel's execution interval per "process" so
 * tests can measure the true busy share independently of what the limiter believes.
 */
#ifndef LIMITER_SIM_H
#define LIMITER_SIM_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limiter.h"

#define SIM_MAX_STREAMS 64
#define SIM_MAX_EVENTS 8192
#define SIM_MAX_PROCS 4

typedef struct {
  int used;
  int ctx;           /* owning context id (1-based) */
  int64_t last_end;  /* when its last queued work finishes */
} sim_stream_t;

typedef struct {
  int used;
  int ctx;
  int recorded;
  int64_t ts;
} sim_event_t;

typedef struct {
  int64_t now;
  int64_t gpu_free;
  int64_t sleep_overshoot_ns;
  int64_t launch_latency_ns; /* host submit -> kernel start on an idle stream */
  int64_t queue_cap_ns;      /* the driver blocks a launch while this much work is queued */
  int current_ctx; /* context current on "the" thread (1-based, 0 = none) */
  sim_stream_t streams[SIM_MAX_STREAMS];
  sim_event_t events[SIM_MAX_EVENTS];
  int events_live;
  long driver_calls;
  int capturing; /* cuStreamIsCapturing reports active for every stream */
  /* measurement window and per-process (= per context) busy time inside it */
  int64_t win_a, win_b;
  int64_t busy[SIM_MAX_PROCS + 1];
  long kernels[SIM_MAX_PROCS + 1];
  /* hook run on every limiter sleep (tests flip region fields from here) */
  void (*on_sleep)(void *arg);
  void *on_sleep_arg;
  long sleeps;
} sim_t;

static sim_t SIM;

static void sim_reset(void) {
  memset(&SIM, 0, sizeof(SIM));
  SIM.now = 1000000000LL * 1000; /* far from 0 so that nothing depends on a zero origin */
  SIM.sleep_overshoot_ns = 60000;
  SIM.launch_latency_ns = 3000;
  SIM.queue_cap_ns = 50000000;
  SIM.current_ctx = 1;
}

/* Streams: handle = 1-based index cast to a pointer; NULL and CU_STREAM_PER_THREAD map to a
 * per-context default stream that is created on demand. */
static sim_stream_t *sim_stream(CUstream h) {
  if (h == NULL || h == CU_STREAM_PER_THREAD || h == CU_STREAM_LEGACY) {
    int want = SIM_MAX_STREAMS - SIM.current_ctx; /* default stream slot per context */
    sim_stream_t *s = &SIM.streams[want];
    s->used = 1;
    s->ctx = SIM.current_ctx;
    return s;
  }
  intptr_t i = (intptr_t)h - 1;
  if (i < 0 || i >= SIM_MAX_STREAMS || !SIM.streams[i].used) return NULL;
  return &SIM.streams[i];
}

static CUstream sim_stream_new(int ctx) {
  for (int i = 0; i < SIM_MAX_STREAMS - SIM_MAX_PROCS - 1; i++)
    if (!SIM.streams[i].used) {
      SIM.streams[i].used = 1;
      SIM.streams[i].ctx = ctx;
      SIM.streams[i].last_end = 0;
      return (CUstream)(intptr_t)(i + 1);
    }
  return NULL;
}

static void sim_account(int ctx, int64_t a, int64_t b) {
  int64_t lo = a > SIM.win_a ? a : SIM.win_a, hi = b < SIM.win_b ? b : SIM.win_b;
  if (hi > lo && ctx >= 0 && ctx <= SIM_MAX_PROCS) SIM.busy[ctx] += hi - lo;
}

/* Enqueues a kernel of `dur` ns on a stream (what the real cuLaunchKernel would do). */
static void sim_launch(CUstream h, int64_t dur) {
  sim_stream_t *s = sim_stream(h);
  if (s == NULL) abort();
  if (SIM.gpu_free - SIM.now > SIM.queue_cap_ns) SIM.now = SIM.gpu_free - SIM.queue_cap_ns;
  int64_t start = SIM.now + SIM.launch_latency_ns;
  if (s->last_end > start) start = s->last_end;
  if (SIM.gpu_free > start) start = SIM.gpu_free;
  int64_t end = start + dur;
  SIM.gpu_free = end;
  s->last_end = end;
  sim_account(s->ctx, start, end);
  if (s->ctx >= 0 && s->ctx <= SIM_MAX_PROCS) SIM.kernels[s->ctx]++;
}

/* ---- the driver entry points the limiter receives ---------------------------------------- */

static CUresult sim_cuEventCreate(CUevent *ev, unsigned int flags) {
  (void)flags;
  SIM.driver_calls++;
  for (int i = 0; i < SIM_MAX_EVENTS; i++)
    if (!SIM.events[i].used) {
      memset(&SIM.events[i], 0, sizeof(SIM.events[i]));
      SIM.events[i].used = 1;
      SIM.events[i].ctx = SIM.current_ctx;
      SIM.events_live++;
      *ev = (CUevent)(intptr_t)(i + 1);
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

static sim_event_t *sim_event(CUevent ev) {
  intptr_t i = (intptr_t)ev - 1;
  if (i < 0 || i >= SIM_MAX_EVENTS || !SIM.events[i].used) return NULL;
  return &SIM.events[i];
}

static CUresult sim_cuEventDestroy(CUevent ev) {
  SIM.driver_calls++;
  sim_event_t *e = sim_event(ev);
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  e->used = 0;
  SIM.events_live--;
  return CUDA_SUCCESS;
}

static CUresult sim_cuEventRecord(CUevent ev, CUstream h) {
  SIM.driver_calls++;
  sim_event_t *e = sim_event(ev);
  sim_stream_t *s = sim_stream(h);
  if (e == NULL || s == NULL || e->ctx != s->ctx) return CUDA_ERROR_INVALID_HANDLE;
  e->recorded = 1;
  e->ts = s->last_end > SIM.now ? s->last_end : SIM.now;
  return CUDA_SUCCESS;
}

static CUresult sim_cuEventQuery(CUevent ev) {
  SIM.driver_calls++;
  sim_event_t *e = sim_event(ev);
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  return !e->recorded || e->ts <= SIM.now ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static CUresult sim_cuEventSynchronize(CUevent ev) {
  SIM.driver_calls++;
  sim_event_t *e = sim_event(ev);
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (e->recorded && e->ts > SIM.now) SIM.now = e->ts;
  SIM.now += 8000; /* a record + synchronize round trip costs ~8 us */
  return CUDA_SUCCESS;
}

static CUresult sim_cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  SIM.driver_calls++;
  sim_event_t *x = sim_event(a), *y = sim_event(b);
  if (x == NULL || y == NULL || x->ctx != y->ctx) return CUDA_ERROR_INVALID_HANDLE;
  if (!x->recorded || !y->recorded) return CUDA_ERROR_INVALID_HANDLE;
  if (x->ts > SIM.now || y->ts > SIM.now) return CUDA_ERROR_NOT_READY;
  /* Real events have ~0.5 us resolution and float milliseconds. */
  int64_t d = (y->ts / 512) * 512 - (x->ts / 512) * 512;
  *ms = (float)((double)d / 1e6);
  return CUDA_SUCCESS;
}

static CUresult sim_cuStreamCreate(CUstream *h, unsigned int flags) {
  (void)flags;
  SIM.driver_calls++;
  *h = sim_stream_new(SIM.current_ctx);
  return *h ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult sim_cuStreamDestroy(CUstream h) {
  SIM.driver_calls++;
  sim_stream_t *s = sim_stream(h);
  if (s == NULL) return CUDA_ERROR_INVALID_HANDLE;
  s->used = 0;
  return CUDA_SUCCESS;
}

static CUresult sim_cuCtxGetCurrent(CUcontext *ctx) {
  SIM.driver_calls++;
  *ctx = (CUcontext)(intptr_t)SIM.current_ctx;
  return CUDA_SUCCESS;
}

static CUresult sim_cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *st) {
  (void)h;
  SIM.driver_calls++;
  *st = SIM.capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

static int64_t sim_now_ns(void *arg) {
  (void)arg;
  return SIM.now;
}

static void sim_sleep_ns(void *arg, int64_t ns) {
  (void)arg;
  SIM.sleeps++;
  SIM.now += ns + SIM.sleep_overshoot_ns;
  if (SIM.on_sleep) SIM.on_sleep(SIM.on_sleep_arg);
}

static vgpu_limiter_driver_t sim_driver(void) {
  vgpu_limiter_driver_t d;
  memset(&d, 0, sizeof(d));
  d.cuEventCreate = sim_cuEventCreate;
  d.cuEventDestroy = sim_cuEventDestroy;
  d.cuEventRecord = sim_cuEventRecord;
  d.cuEventQuery = sim_cuEventQuery;
  d.cuEventSynchronize = sim_cuEventSynchronize;
  d.cuEventElapsedTime = sim_cuEventElapsedTime;
  d.cuStreamCreate = sim_cuStreamCreate;
  d.cuStreamDestroy = sim_cuStreamDestroy;
  d.cuCtxGetCurrent = sim_cuCtxGetCurrent;
  d.cuStreamIsCapturing = sim_cuStreamIsCapturing;
  d.now_ns = sim_now_ns;
  d.sleep_ns = sim_sleep_ns;
  return d;
}

/* A region + extension in heap memory (the tests never need a file). */
typedef struct {
  vgpu_region_t *region;
  vgpu_region_ext_t *ext;
} sim_region_t;

static sim_region_t sim_region_new(int sm_limit) {
  sim_region_t r;
  r.region = calloc(1, sizeof(vgpu_region_t));
  r.ext = calloc(1, sizeof(vgpu_region_ext_t));
  if (r.region == NULL || r.ext == NULL) abort();
  r.region->device_num = 1;
  r.region->sm_limit[0] = (uint64_t)sm_limit;
  r.region->utilization_switch = 1;
  r.region->priority = 1;
  return r;
}

static void sim_region_free(sim_region_t r) {
  free(r.region);
  free(r.ext);
}

/* ---- tiny test framework ----------------------------------------------------------------- */

static int g_failures, g_checks;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    g_checks++;                                            \
    if (!(cond)) {                                         \
      g_failures++;                                        \
      printf("  FAIL %s:%d: ", __FILE__, __LINE__);        \
      printf(__VA_ARGS__);                                 \
      printf("\n");                                        \
    }                                                      \
  } while (0)

static int test_summary(const char *name) {
  printf("%s: %d checks, %d failed\n", name, g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

#endif /* LIMITER_SIM_H */

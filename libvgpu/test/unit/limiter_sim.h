/*
 * limiter_sim.h — a simulated GPU and clock for the SM limiter's CPU-only tests.
 *
 * The GPU model: each context has one execution engine that runs its kernels one at a time in
 * submission order (so every stream keeps its order, and a kernel on one stream waits behind
 * another stream's kernel of the same context). Contexts (= processes, containers) share the GPU
 * by time-slicing like a GPU without MPS: the resident context runs until it has no ready work or
 * its timeslice expires while another context has ready work, then the next one runs (a running
 * kernel is preempted and resumes later). An event completes once its stream's earlier kernels
 * are done AND its context is resident (or the GPU is idle): a context's work is only processed
 * while it owns the GPU, so a kernel's [start event, end event] interval stretches when another
 * context's slice lands in the middle of it, as on real hardware.
 *
 * The clock only moves when the test says so (CPU cost of a launch) or when the limiter sleeps
 * (with a nanosleep-like overshoot), so runs are deterministic. The simulator accounts every
 * context's true execution time inside a measurement window, independently of the limiter.
 *
 * Context switches cost GPU time, as on real hardware: loading another context than the last
 * one that ran (saving the preempted one, restoring the next) keeps the GPU busy for
 * SIM.switch_ns with no context resident: no kernel progresses and no event completes. 150 us at
 * 2 ms slices by default, which reproduces the H100 (README "SM limiter accuracy by kernel
 * shape": two containers of 50 us kernels at 30/60 get 26-27 / 56-57 % of kernel time here and
 * 26.8 / 55.6 % of throughput there); 0 makes switches free, LIMITER_SIM_SWITCH_US and
 * LIMITER_SIM_TIMESLICE_US explore others. The simulator accounts switch time separately
 * (SIM.switch_busy), and per context the switches that brought it onto the GPU
 * (SIM.switch_in[ctx], what the limiter's rule charges it), so a test can tell the device's busy
 * time (kernels + switches, what NVML's device utilization sees) from the kernels' execution
 * time.
 */
#ifndef LIMITER_SIM_H
#define LIMITER_SIM_H

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limiter.h"

#define SIM_MAX_STREAMS 64
#define SIM_MAX_EVENTS 8192
#define SIM_MAX_PROCS 4

typedef struct {
  int used;
  int ctx;       /* owning context id (1-based) */
  long last_k;   /* index of its last submitted kernel, -1 = none */
} sim_stream_t;

typedef struct {
  int used;
  int ctx;
  int recorded;
  long dep;      /* kernel it waits for, -1 = none */
  int64_t rec;   /* host time of the record call */
} sim_event_t;

typedef struct {
  int ctx;
  int64_t ready;     /* submit time + launch latency */
  int64_t remaining; /* execution time left */
  int64_t done_at;   /* -1 while pending */
} sim_kernel_t;

typedef struct {
  int64_t t;
  int owner; /* context resident from t on, 0 = idle */
} sim_slice_t;

typedef struct {
  int64_t now;
  int64_t sleep_overshoot_ns;
  int64_t launch_latency_ns; /* host submit -> earliest kernel start */
  int64_t queue_cap_ns;      /* the driver blocks a launch while a context has this much queued */
  int64_t timeslice_ns;
  int64_t switch_ns;         /* GPU time a switch to another context costs (0 = free) */
  double gpu_clock_ppm;      /* the GPU timer runs this much fast (+) or slow (-) vs the host */
  int current_ctx;           /* context current on "the" thread (1-based) */
  sim_stream_t streams[SIM_MAX_STREAMS];
  sim_event_t events[SIM_MAX_EVENTS];
  int events_live;
  long driver_calls;
  int capturing;             /* cuStreamIsCapturing reports active for every stream */
  /* engine */
  sim_kernel_t *k;
  long nk, capk;
  long head[SIM_MAX_PROCS + 1];     /* first pending kernel of each context */
  int64_t queued[SIM_MAX_PROCS + 1]; /* remaining work queued per context */
  int64_t gpu_t;                     /* engine time: everything before it is decided */
  int resident;
  int64_t slice_start;
  int last_loaded;       /* context whose state is on the GPU (0 = none yet) */
  int64_t switch_until;  /* a context switch keeps the engine busy until then */
  long switches;
  sim_slice_t *log;
  long nlog, caplog;
  /* measurement window and per-context execution time inside it */
  int64_t win_a, win_b;
  int64_t busy[SIM_MAX_PROCS + 1];
  int64_t switch_busy; /* context-switch time inside the window */
  int64_t switch_in[SIM_MAX_PROCS + 1]; /* ...of it, the switches onto each context */
  int switch_for;       /* context the switch in progress brings onto the GPU */
  /* hook run on every limiter sleep (tests flip region fields from here) */
  void (*on_sleep)(void *arg);
  void *on_sleep_arg;
  long sleeps;
} sim_t;

static sim_t SIM;

static void sim_reset(void) {
  free(SIM.k);
  free(SIM.log);
  memset(&SIM, 0, sizeof(SIM));
  SIM.now = 1000000000LL * 1000; /* far from 0 so that nothing depends on a zero origin */
  SIM.gpu_t = SIM.now;
  SIM.sleep_overshoot_ns = 60000;
  SIM.launch_latency_ns = 3000;
  SIM.queue_cap_ns = 50000000;
  SIM.timeslice_ns = 2000000;
  const char *ts = getenv("LIMITER_SIM_TIMESLICE_US"); /* explore other slice lengths */
  if (ts != NULL && atol(ts) > 0) SIM.timeslice_ns = atol(ts) * 1000;
  SIM.switch_ns = 150000;
  const char *sw = getenv("LIMITER_SIM_SWITCH_US"); /* explore other switch costs */
  if (sw != NULL && atol(sw) >= 0) SIM.switch_ns = atol(sw) * 1000;
  SIM.current_ctx = 1;
}

static void sim_log(int64_t t, int owner) {
  if (SIM.nlog > 0 && SIM.log[SIM.nlog - 1].owner == owner) return;
  if (SIM.nlog == SIM.caplog) {
    SIM.caplog = SIM.caplog ? SIM.caplog * 2 : 4096;
    SIM.log = realloc(SIM.log, (size_t)SIM.caplog * sizeof(*SIM.log));
    if (SIM.log == NULL) abort();
  }
  SIM.log[SIM.nlog].t = t;
  SIM.log[SIM.nlog].owner = owner;
  SIM.nlog++;
}

static void sim_account(int ctx, int64_t a, int64_t b) {
  int64_t lo = a > SIM.win_a ? a : SIM.win_a, hi = b < SIM.win_b ? b : SIM.win_b;
  if (hi <= lo) return;
  if (ctx >= 0 && ctx <= SIM_MAX_PROCS) SIM.busy[ctx] += hi - lo;
  if (ctx < 0) {
    SIM.switch_busy += hi - lo;
    if (SIM.switch_for > 0 && SIM.switch_for <= SIM_MAX_PROCS)
      SIM.switch_in[SIM.switch_for] += hi - lo;
  }
}

/* Head kernel of a context, or NULL. */
static sim_kernel_t *sim_head(int c) {
  while (SIM.head[c] < SIM.nk && (SIM.k[SIM.head[c]].ctx != c || SIM.k[SIM.head[c]].done_at >= 0))
    SIM.head[c]++;
  return SIM.head[c] < SIM.nk ? &SIM.k[SIM.head[c]] : NULL;
}

static void des_wait(int64_t dt);

/* Runs the engine up to `to`. */
static void sim_advance(int64_t to) {
  while (SIM.gpu_t < to) {
    int64_t t = SIM.gpu_t;
    if (t < SIM.switch_until) { /* saving / restoring contexts: busy, nobody resident */
      int64_t end = SIM.switch_until < to ? SIM.switch_until : to;
      sim_log(t, -1);
      sim_account(-1, t, end);
      SIM.gpu_t = end;
      continue;
    }
    int ready[SIM_MAX_PROCS + 1] = {0}, nready = 0;
    int64_t next_ready = INT64_MAX;
    for (int c = 1; c <= SIM_MAX_PROCS; c++) {
      sim_kernel_t *h = sim_head(c);
      if (h == NULL) continue;
      if (h->ready <= t) {
        ready[c] = 1;
        nready++;
      } else if (h->ready < next_ready) {
        next_ready = h->ready;
      }
    }
    if (nready == 0) {
      sim_log(t, 0);
      SIM.resident = 0;
      SIM.gpu_t = next_ready < to ? next_ready : to;
      continue;
    }
    int r = SIM.resident;
    int others = nready - (r > 0 && ready[r] ? 1 : 0);
    if (r == 0 || !ready[r] || (others > 0 && t - SIM.slice_start >= SIM.timeslice_ns)) {
      int pick = 0; /* round robin after the current one */
      for (int i = 1; i <= SIM_MAX_PROCS && !pick; i++) {
        int c = (r + i - 1) % SIM_MAX_PROCS + 1;
        if (ready[c] && c != r) pick = c;
      }
      if (!pick) pick = r;
      if (pick != r) SIM.slice_start = t;
      r = SIM.resident = pick;
      others = nready - 1;
      if (SIM.switch_ns > 0 && pick != SIM.last_loaded) {
        if (SIM.last_loaded != 0) { /* the first context ever loaded costs nothing */
          SIM.switch_until = t + SIM.switch_ns;
          SIM.switch_for = pick;
          SIM.slice_start = SIM.switch_until;
          SIM.switches++;
        }
        SIM.last_loaded = pick;
        if (SIM.switch_until > t) continue;
      }
    }
    sim_log(t, r);
    sim_kernel_t *h = sim_head(r);
    int64_t dt = h->remaining, lim = to - t;
    if (lim < dt) dt = lim;
    if (others > 0) {
      int64_t left = SIM.slice_start + SIM.timeslice_ns - t;
      if (left < 1) left = 1;
      if (left < dt) dt = left;
    } else if (next_ready != INT64_MAX) {
      /* another context gets work later: revisit then (its slice may start) */
      int64_t until = next_ready - t;
      if (until > 0 && until < dt && SIM.timeslice_ns < until + (t - SIM.slice_start)) dt = until;
    }
    sim_account(r, t, t + dt);
    h->remaining -= dt;
    SIM.queued[r] -= dt;
    SIM.gpu_t = t + dt;
    if (h->remaining == 0) h->done_at = SIM.gpu_t;
  }
}

/* Completion time of an event, or -1 if it is not complete at SIM.now. */
static int64_t sim_event_ts(const sim_event_t *e) {
  sim_advance(SIM.now);
  int64_t base = e->rec;
  if (e->dep >= 0) {
    int64_t d = SIM.k[e->dep].done_at;
    if (d < 0) return -1;
    if (d > base) base = d;
  }
  if (base > SIM.now) return -1;
  /* first moment >= base at which the event's context is resident or the GPU is idle */
  long lo = 0, hi = SIM.nlog - 1, i = -1;
  while (lo <= hi) { /* last log entry with t <= base */
    long mid = (lo + hi) / 2;
    if (SIM.log[mid].t <= base) {
      i = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (i < 0) return base;
  for (; i < SIM.nlog; i++) {
    int64_t from = SIM.log[i].t > base ? SIM.log[i].t : base;
    if (from > SIM.now) return -1;
    if (SIM.log[i].owner == 0 || SIM.log[i].owner == e->ctx) return from;
  }
  return -1;
}

/* Streams: handle = index + SIM_STREAM_BASE cast to a pointer (clear of CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD, which are 0x1 and 0x2); NULL and those two map to a per-context default
 * stream that is created on demand. */
#define SIM_STREAM_BASE 0x100
static sim_stream_t *sim_stream(CUstream h) {
  if (h == NULL || h == CU_STREAM_PER_THREAD || h == CU_STREAM_LEGACY) {
    sim_stream_t *s = &SIM.streams[SIM_MAX_STREAMS - SIM.current_ctx];
    if (!s->used) {
      s->used = 1;
      s->ctx = SIM.current_ctx;
      s->last_k = -1;
    }
    return s;
  }
  intptr_t i = (intptr_t)h - SIM_STREAM_BASE;
  if (i < 0 || i >= SIM_MAX_STREAMS || !SIM.streams[i].used) return NULL;
  return &SIM.streams[i];
}

static CUstream sim_stream_new(int ctx) {
  for (int i = 0; i < SIM_MAX_STREAMS - SIM_MAX_PROCS - 1; i++)
    if (!SIM.streams[i].used) {
      SIM.streams[i].used = 1;
      SIM.streams[i].ctx = ctx;
      SIM.streams[i].last_k = -1;
      return (CUstream)(intptr_t)(i + SIM_STREAM_BASE);
    }
  return NULL;
}

/* Enqueues a kernel of `dur` ns on a stream (what the real cuLaunchKernel would do). */
static void sim_launch(CUstream h, int64_t dur) {
  sim_stream_t *s = sim_stream(h);
  if (s == NULL || dur <= 0) abort();
  while (SIM.queued[s->ctx] > SIM.queue_cap_ns) { /* driver queue full: the launch blocks */
    des_wait(100000);
    sim_advance(SIM.now);
  }
  if (SIM.nk == SIM.capk) {
    SIM.capk = SIM.capk ? SIM.capk * 2 : 65536;
    SIM.k = realloc(SIM.k, (size_t)SIM.capk * sizeof(*SIM.k));
    if (SIM.k == NULL) abort();
  }
  sim_kernel_t *k = &SIM.k[SIM.nk];
  k->ctx = s->ctx;
  k->ready = SIM.now + SIM.launch_latency_ns;
  k->remaining = dur;
  k->done_at = -1;
  s->last_k = SIM.nk++;
  SIM.queued[s->ctx] += dur;
}

/* Work queued on the GPU for a context (ns of execution not yet done). */
__attribute__((unused)) static int64_t sim_queued(int ctx) {
  sim_advance(SIM.now);
  return SIM.queued[ctx];
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
      SIM.events[i].dep = -1;
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
  e->rec = SIM.now;
  e->dep = s->last_k;
  return CUDA_SUCCESS;
}

static CUresult sim_cuEventQuery(CUevent ev) {
  SIM.driver_calls++;
  sim_event_t *e = sim_event(ev);
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  return !e->recorded || sim_event_ts(e) >= 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static CUresult sim_cuEventSynchronize(CUevent ev) {
  SIM.driver_calls++;
  sim_event_t *e = sim_event(ev);
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  while (e->recorded && sim_event_ts(e) < 0) SIM.now += 2000; /* spin-wait */
  SIM.now += 8000; /* the synchronize round trip itself */
  return CUDA_SUCCESS;
}

static CUresult sim_cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  SIM.driver_calls++;
  sim_event_t *x = sim_event(a), *y = sim_event(b);
  if (x == NULL || y == NULL || x->ctx != y->ctx) return CUDA_ERROR_INVALID_HANDLE;
  if (!x->recorded || !y->recorded) return CUDA_ERROR_INVALID_HANDLE;
  int64_t tx = sim_event_ts(x), ty = sim_event_ts(y);
  if (tx < 0 || ty < 0) return CUDA_ERROR_NOT_READY;
  /* Real events have ~0.5 us resolution and float milliseconds. */
  int64_t d = (ty / 512) * 512 - (tx / 512) * 512;
  *ms = (float)((double)d * (1.0 + SIM.gpu_clock_ppm * 1e-6) / 1e6);
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

/*
 * Processes as threads on the virtual clock (discrete-event simulation): exactly one thread runs
 * at a time; a thread that waits (limiter sleep, CPU cost of a launch, a full driver queue)
 * hands the CPU to the thread with the earliest wake-up time and the clock jumps there. Runs stay
 * deterministic. Without des_run() waits just advance the clock.
 */
typedef struct {
  pthread_t th;
  int id, ctx, done;
  int64_t wake;
  void (*body)(void *);
  void *arg;
  pthread_cond_t cv; /* signalled when this thread is picked to run */
} des_thread_t;

#define DES_MAX 8
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int active, running, n;
  des_thread_t *t[DES_MAX];
} DES = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, -1, 0, {0}};
static __thread des_thread_t *des_me;

/* Picks the next thread to run (earliest wake, lowest id); -1 when all are done. */
static int des_pick(void) {
  int best = -1;
  for (int i = 0; i < DES.n; i++) {
    if (DES.t[i]->done) continue;
    if (best < 0 || DES.t[i]->wake < DES.t[best]->wake) best = i;
  }
  return best;
}

/* Hands the CPU to the next thread: only that thread is woken (a broadcast to every waiter per
 * hand-off made multi-process cells cost minutes of system time). */
static void des_dispatch(void) {
  int prev = DES.running;
  int next = des_pick();
  DES.running = next;
  if (next >= 0) {
    if (DES.t[next]->wake > SIM.now) SIM.now = DES.t[next]->wake;
    SIM.current_ctx = DES.t[next]->ctx;
    if (next != prev) pthread_cond_signal(&DES.t[next]->cv);
  } else {
    pthread_cond_broadcast(&DES.cv); /* all done: wake des_run */
  }
}

static void des_wait(int64_t dt) {
  if (!DES.active || des_me == NULL) {
    SIM.now += dt;
    return;
  }
  des_me->wake = SIM.now + dt;
  des_dispatch();
  while (DES.running != des_me->id) pthread_cond_wait(&des_me->cv, &DES.mu);
  SIM.current_ctx = des_me->ctx;
}

static void *des_main(void *arg) {
  des_thread_t *me = arg;
  des_me = me;
  pthread_mutex_lock(&DES.mu);
  while (DES.running != me->id) pthread_cond_wait(&me->cv, &DES.mu);
  SIM.current_ctx = me->ctx;
  me->body(me->arg);
  me->done = 1;
  des_dispatch();
  pthread_mutex_unlock(&DES.mu);
  return NULL;
}

/* Runs bodies[i](args[i]) as processes with contexts ctxs[i] until all return. */
__attribute__((unused)) static void des_run(int n, void (**bodies)(void *), void **args, const int *ctxs) {
  des_thread_t th[DES_MAX];
  pthread_mutex_lock(&DES.mu);
  DES.active = 1;
  DES.n = n;
  DES.running = -1;
  for (int i = 0; i < n; i++) {
    th[i] = (des_thread_t){.id = i, .ctx = ctxs[i], .wake = SIM.now, .body = bodies[i], .arg = args[i]};
    pthread_cond_init(&th[i].cv, NULL);
    DES.t[i] = &th[i];
    pthread_create(&th[i].th, NULL, des_main, &th[i]);
  }
  des_dispatch();
  while (DES.running >= 0) pthread_cond_wait(&DES.cv, &DES.mu);
  pthread_mutex_unlock(&DES.mu);
  for (int i = 0; i < n; i++) {
    pthread_join(th[i].th, NULL);
    pthread_cond_destroy(&th[i].cv);
  }
  DES.active = 0;
  DES.n = 0;
}

static void sim_sleep_ns(void *arg, int64_t ns) {
  (void)arg;
  SIM.sleeps++;
  des_wait(ns + SIM.sleep_overshoot_ns);
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

#include "sim_check.h"

#endif /* LIMITER_SIM_H */

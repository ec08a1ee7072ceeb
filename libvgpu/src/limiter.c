/*
 * limiter.c — libvgpu's SM limiter. Design notes in limiter.h and libvgpu/README.md
 * ("## SM limiter"). The moving parts:
 *
 *  - Measurement: each limited launch is bracketed by two timing events (S before, E after) on
 *    its own stream. E done => the launch's GPU interval [S, E], mapped to CLOCK_MONOTONIC through
 *    a per-context reference event (map_event: every event's record time bounds the reference's
 *    host time from below). Intervals are committed in start order, and only up to the start of
 *    the earliest still-running launch, so the union over this process's streams is exact.
 *  - Residency: heartbeat events on an idle internal stream complete only while the context owns
 *    the GPU; a late one marks another context's time slice, which is not charged.
 *  - Control: a GCRA ("virtual finish time") bucket per device, shared through the region's
 *    extension block: charging g ns of GPU time advances TAT by g / L_eff. Launches run while
 *    TAT + this process's in-flight estimate <= now + BURST; once held back, a process waits until
 *    TAT <= now (hysteresis, so admitted work runs back to back and the idle gap is one piece).
 *    A charge never starts earlier than its launch's start minus SLACK (anti-windup: idle time
 *    earns no credit beyond one burst).
 *  - Trim: L_eff = L * (1 + trim + p), trim integrates the relative error between the limit and
 *    the container's measured share over >= 1 s windows, only while the container is held back
 *    (conditional integration), clamped to +-VGPU_LIMITER_TRIM_MAX, reset on a limit change.
 *
 * Shared state: ext->devices[dev].limiter_bucket holds the container's TAT in CLOCK_MONOTONIC ns (one
 * 64-bit CAS per update); 0 or a value beyond the sanity bound reads as "now".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "limiter.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_PEND 512       /* bracketed launches in flight per process and device */
#define MAX_CTX 4          /* contexts per device with measured launches */
#define MAX_STREAMS 32     /* streams per context tracked for estimates and FIFO order */
#define MAX_REFS 4         /* calibrated reference events alive per context */
#define BURST_NS 10000000LL          /* wall-time credit a container may run ahead (10 ms) */
#define SLACK_NS 500000LL            /* TAT may lag now by this much (sleep overshoot) */
#define TAT_MAX_AHEAD_NS 10000000000LL /* bound on the bucket's debt (10 s): state stays bounded */
#define SLEEP_CHUNK_NS 1000000LL     /* wake at least every 1 ms while held back */
#define HB_PERIOD_NS 100000LL        /* residency heartbeat period while work is in flight */
#define HB_AFTER_LAUNCH_NS 20000LL   /* ...and at most this often right after launches */
#define HB_GAP_NS 50000LL            /* a heartbeat this late means the context was off the GPU */
#define MAX_HB 64                    /* heartbeats pending per context */
#define MAX_FOREIGN 256              /* remembered off-GPU intervals per context */
#define LB_WINDOW_N 128              /* time-line samples kept per reference event */
#define LB_WINDOW_NS 50000000LL      /* ...from the last 50 ms */
#define POLL_EVERY_NS 100000LL       /* poll completions at most every 100 us on launch */
#define CALIB_EVERY_NS 1000000000LL  /* recalibrate the GPU->host time map every 1 s */
#define CALIB_RETRY_NS 50000000LL
#define WINDOW_NS 1000000000LL       /* trim / published-share window */
#define PRIORITY_POLL_NS 100000000LL /* recent_kernel < 0: re-check every 100 ms */
#define DEFAULT_EST_NS 100000LL      /* cost of a launch before anything was measured */
#define OVERDUE_NS 2000000LL         /* running this much past 2x its estimate: estimate is wrong */
#define WINDOW_MIN_COMMITS 16        /* a trim window needs this many measured launches... */
#define WINDOW_MAX_NS 10000000000LL  /* ...or this much time */
#define TRIM_KI 0.3                  /* per second, on the relative error */
#define TRIM_KP 0.05
#define FLUSH_EVERY 256              /* launches_total is published in batches */

typedef struct {
  CUevent s, e;
  int64_t est_ns;
  int64_t s_host, e_host;
  int64_t s_rec, e_rec; /* host time just before each record call */
  int64_t charged;      /* what the launch cost when committed */
  int next;      /* next entry of the same stream, -1 at the tail */
  int16_t ctx;   /* context slot */
  int16_t sq;    /* stream slot */
  int8_t ref;    /* reference event slot, -1 = unmeasured */
  int8_t started;
  int8_t done;
  int8_t measured;
} pend_t;

typedef struct {
  CUstream stream;
  int used;
  int head, tail, count;
  int64_t est_ns;
  uint64_t last_use;
} stream_q_t;

typedef struct {
  CUevent ev;
  int64_t host_ns;  /* CLOCK_MONOTONIC of the event's GPU time: record-time lower bound */
  int64_t upper_ns; /* it had completed by then (INT64_MAX until seen complete) */
  /* Sliding-window maximum of recent lower bounds "record time - elapsed" (a deque ordered by
   * decreasing bound): local in time, so a GPU timer drifting against CLOCK_MONOTONIC is
   * followed instead of accumulated. */
  struct {
    int64_t rec, lb;
  } win[LB_WINDOW_N];
  int win_head, win_n;
  int users;
  int valid;
} ref_t;

typedef struct {
  CUcontext ctx;
  int used;
  int bad;
  unsigned gen;
  CUstream internal;
  ref_t refs[MAX_REFS];
  int cur_ref;
  int64_t last_calib_ns, last_calib_try_ns;
  CUevent *pool;
  int pool_n, pool_cap;
  /* Residency heartbeats: events recorded on the idle internal stream complete only while the
   * context owns the GPU, so a late one marks a time slice given to another context. */
  struct {
    CUevent ev;
    int64_t rec_ns;
    int ref;
  } hb[MAX_HB];
  int hb_head, hb_n;
  int64_t last_hb_ns;
  int64_t last_prompt_ns; /* completion of the last heartbeat that ran at once */
  struct {
    int64_t a, b;
  } foreign[MAX_FOREIGN];
  int foreign_head, foreign_n;
  stream_q_t sq[MAX_STREAMS];
} ctx_t;

typedef struct {
  pthread_mutex_t mu;
  uint64_t *bucket;
  uint64_t local_bucket;
  vgpu_ext_device_t *xd;
  int64_t local_wm_ns; /* union watermark over this process's streams */
  int64_t inflight_est_ns; /* estimates of this process's launches not yet charged */
  int blocked;
  int last_limit;
  double leff; /* fraction of the GPU, with trim */
  int64_t est_dev_ns;
  /* trim */
  double trim, p_term;
  int64_t win_start_ns, win_busy0, win_thr0;
  int win_commits;
  /* bookkeeping */
  pend_t ent[MAX_PEND];
  int free_head;
  int done_idx[MAX_PEND];
  int n_done;
  int n_inflight;
  int64_t last_poll_ns;
  uint64_t stream_clock;
  ctx_t ctx[MAX_CTX];
  /* stats (process-local) */
  int64_t busy_ns, throttled_ns;
  uint64_t launches_total, launches_delayed, launches_flushed;
} dev_state_t;

struct vgpu_limiter {
  vgpu_limiter_driver_t drv;
  vgpu_limiter_config_t cfg;
  pthread_mutex_t alloc_mu;
  dev_state_t *dev[VGPU_MAX_DEVICES];
  dev_state_t *orphan[VGPU_MAX_DEVICES]; /* the parent's state after fork: never touched again */
  uint64_t fast_launches[VGPU_MAX_DEVICES]; /* launches seen while unlimited (atomic) */
  uint64_t fast_flushed[VGPU_MAX_DEVICES];
};

/* A launch's bracket between before and after, per thread. */
typedef struct {
  vgpu_limiter_t *lim;
  int dev;
  int ctx;
  unsigned gen;
  int armed;    /* 1: before_launch ran in limited mode */
  int measured; /* S was recorded */
  CUevent s;
  int64_t s_rec;
  CUstream stream;
  int sq;
} bracket_t;

/* Open brackets of this thread: normally at most one; cuLaunchCooperativeKernelMultiDevice opens
 * one per entry before its launch and closes them after. */
#define MAX_BRACKETS 8
static __thread bracket_t tls_brackets[MAX_BRACKETS];
static __thread int tls_open; /* number of armed entries in tls_brackets */
static vgpu_limiter_t *g_limiter;

/* ------------------------------------------------------------------------------------------ */

static int64_t default_now(void *unused) {
  (void)unused;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void default_sleep(void *unused, int64_t ns) {
  (void)unused;
  if (ns <= 0) return;
  struct timespec ts = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static inline int64_t now_ns(const vgpu_limiter_t *lim) {
  return lim->drv.now_ns(lim->drv.clock_ctx);
}

static inline int64_t i64min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t i64max(int64_t a, int64_t b) { return a > b ? a : b; }

int vgpu_limiter_parse_policy(const char *value) {
  if (value == NULL) return VGPU_LIMITER_POLICY_DEFAULT;
  if (strcasecmp(value, "force") == 0) return VGPU_LIMITER_POLICY_FORCE;
  if (strcasecmp(value, "disable") == 0) return VGPU_LIMITER_POLICY_DISABLE;
  return VGPU_LIMITER_POLICY_DEFAULT;
}

/* The limit in percent that applies now, 0 = none. Two plain loads in the common case. */
static int effective_limit(const vgpu_limiter_t *lim, int dev) {
  int policy = lim->cfg.policy;
  if (policy == VGPU_LIMITER_POLICY_DISABLE) return 0;
  uint64_t v;
  vgpu_region_t *r = lim->cfg.region;
  if (r != NULL)
    v = __atomic_load_n(&r->sm_limit[dev], __ATOMIC_RELAXED);
  else
    v = (uint64_t)(lim->cfg.sm_limit_percent[dev] < 0 ? 0 : lim->cfg.sm_limit_percent[dev]);
  if (v == 0 || v >= 100) return 0;
  if (policy == VGPU_LIMITER_POLICY_DEFAULT && r != NULL &&
      __atomic_load_n(&r->utilization_switch, __ATOMIC_RELAXED) == 0)
    return 0;
  return (int)v;
}

/* ---- shared bucket word ------------------------------------------------------------------ */

/* The word is the container's TAT in CLOCK_MONOTONIC ns (system-wide, so every process of the
 * container agrees). 0 (fresh region) or a value further ahead than any legitimate debt
 * (garbage, a clock from another boot) reads as "now". */
static inline int64_t bucket_tat(uint64_t word, int64_t now) {
  int64_t tat = (int64_t)word;
  if (tat <= 0 || tat > now + TAT_MAX_AHEAD_NS) return now;
  return tat;
}

typedef struct {
  pend_t **ents; /* in start order */
  int n;
} commit_batch_t;

static int64_t foreign_overlap(const ctx_t *c, int64_t a, int64_t b);

/*
 * One CAS charges a batch of finished launches: each measured launch adds the part of its
 * interval beyond this process's watermark (overlapping streams count once) minus the time its
 * context was known to be off the GPU (another context's time slice), and advances TAT by that
 * / leff, from no earlier than its own start minus SLACK (idle time before the launch earns no
 * credit: anti-windup). Unmeasured launches charge their estimate from now. Returns the GPU ns
 * charged. Call under d->mu (d->local_wm_ns).
 */
static int64_t bucket_charge(dev_state_t *d, int64_t now, double leff,
                             const commit_batch_t *batch) {
  uint64_t old = __atomic_load_n(d->bucket, __ATOMIC_RELAXED);
  for (;;) {
    double tat = (double)bucket_tat(old, now);
    int64_t wm_ns = d->local_wm_ns;
    int64_t charged = 0;
    for (int i = 0; i < batch->n; i++) {
      pend_t *p = batch->ents[i];
      int64_t c, from;
      if (p->measured) {
        int64_t s = i64max(p->s_host, wm_ns);
        c = p->e_host > s ? p->e_host - s : 0;
        if (c > 0) c -= i64min(c, foreign_overlap(&d->ctx[p->ctx], s, p->e_host));
        wm_ns = i64max(wm_ns, p->e_host);
        from = p->s_host - SLACK_NS;
      } else {
        c = p->est_ns;
        from = now - SLACK_NS;
      }
      if (tat < (double)from) tat = (double)from;
      tat += (double)c / leff;
      charged += c;
      p->charged = c;
    }
    double cap = (double)(now + TAT_MAX_AHEAD_NS);
    if (tat > cap) tat = cap;
    uint64_t neu = (uint64_t)(int64_t)tat;
    if (__atomic_compare_exchange_n(d->bucket, &old, neu, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
      d->local_wm_ns = wm_ns;
      return charged;
    }
  }
}

/* How far the container's charged work plus this process's in-flight estimate runs ahead. */
static inline int64_t bucket_ahead_ns(const dev_state_t *d, int64_t now) {
  int64_t tat = bucket_tat(__atomic_load_n(d->bucket, __ATOMIC_ACQUIRE), now);
  return tat - now + (int64_t)((double)d->inflight_est_ns / d->leff);
}

/* ---- events, contexts, streams ----------------------------------------------------------- */

/* Runs the limiter's own driver calls in relaxed capture mode (see limiter.h). */
typedef struct {
  CUstreamCaptureMode saved;
  int swapped;
} capture_guard_t;

static capture_guard_t relax_capture(const vgpu_limiter_t *lim) {
  capture_guard_t g = {CU_STREAM_CAPTURE_MODE_RELAXED, 0};
  if (lim->drv.cuThreadExchangeStreamCaptureMode != NULL &&
      lim->drv.cuThreadExchangeStreamCaptureMode(&g.saved) == CUDA_SUCCESS)
    g.swapped = 1;
  return g;
}

static void restore_capture(const vgpu_limiter_t *lim, capture_guard_t g) {
  if (g.swapped) lim->drv.cuThreadExchangeStreamCaptureMode(&g.saved);
}

static CUevent pool_get(const vgpu_limiter_t *lim, ctx_t *c) {
  if (c->pool_n > 0) return c->pool[--c->pool_n];
  CUevent ev = NULL;
  if (lim->drv.cuEventCreate(&ev, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return NULL;
  return ev;
}

static void pool_put(const vgpu_limiter_t *lim, ctx_t *c, CUevent ev) {
  if (ev == NULL) return;
  if (c->pool_n == c->pool_cap) {
    int cap = c->pool_cap ? c->pool_cap * 2 : 64;
    if (cap > 2 * MAX_PEND + 8) {
      lim->drv.cuEventDestroy(ev);
      return;
    }
    CUevent *np = realloc(c->pool, (size_t)cap * sizeof(*np));
    if (np == NULL) {
      lim->drv.cuEventDestroy(ev);
      return;
    }
    c->pool = np;
    c->pool_cap = cap;
  }
  c->pool[c->pool_n++] = ev;
}

/* Forgets a context without touching its (possibly destroyed) objects. */
static void ctx_drop(dev_state_t *d, int ci) {
  ctx_t *c = &d->ctx[ci];
  for (int i = 0; i < MAX_PEND; i++) {
    pend_t *p = &d->ent[i];
    if (p->ctx == ci && p->ref != -2 && (p->s != NULL || p->e != NULL)) {
      /* Still pending in this context: becomes an unmeasured launch charged at its estimate. */
      p->s = p->e = NULL;
      if (!p->done) {
        p->measured = 0;
      }
    }
  }
  free(c->pool);
  unsigned gen = c->gen + 1;
  memset(c, 0, sizeof(*c));
  c->gen = gen;
}

static int ctx_find(const dev_state_t *d, CUcontext ctx) {
  if (ctx == NULL) return -1;
  for (int i = 0; i < MAX_CTX; i++)
    if (d->ctx[i].used && !d->ctx[i].bad && d->ctx[i].ctx == ctx) return i;
  return -1;
}

static int ctx_slot(const vgpu_limiter_t *lim, dev_state_t *d, CUcontext ctx) {
  int free_slot = -1;
  for (int i = 0; i < MAX_CTX; i++) {
    if (d->ctx[i].used && d->ctx[i].ctx == ctx) return d->ctx[i].bad ? -1 : i;
    if (!d->ctx[i].used && free_slot < 0) free_slot = i;
  }
  if (free_slot < 0) return -1;
  ctx_t *c = &d->ctx[free_slot];
  c->used = 1;
  c->ctx = ctx;
  c->cur_ref = -1;
  for (int s = 0; s < MAX_STREAMS; s++) c->sq[s].head = c->sq[s].tail = -1;
  if (lim->drv.cuStreamCreate(&c->internal, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    c->bad = 1;
    return -1;
  }
  return free_slot;
}

/*
 * Starts a new reference event for the context's time line (every CALIB_EVERY_NS, so that a
 * drift between the GPU's timer and CLOCK_MONOTONIC stays bounded by one second's worth). Nothing
 * waits for it: a synchronize would block for other contexts' whole time slices. Its host time
 * starts at the lower bound "record call time" and is tightened by every event sample
 * (map_event); ref_settle adds the upper bound.
 */
static void ctx_calibrate(const vgpu_limiter_t *lim, ctx_t *c, int64_t now) {
  if (c->cur_ref >= 0 && now - c->last_calib_ns < CALIB_EVERY_NS) return;
  if (c->cur_ref >= 0 && now - c->last_calib_try_ns < CALIB_RETRY_NS) return;
  c->last_calib_try_ns = now;
  int slot = -1;
  for (int i = 0; i < MAX_REFS; i++)
    if (i != c->cur_ref && (!c->refs[i].valid || c->refs[i].users == 0)) {
      slot = i;
      break;
    }
  if (slot < 0) return;
  ref_t *r = &c->refs[slot];
  if (r->ev == NULL && lim->drv.cuEventCreate(&r->ev, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
    r->ev = NULL;
    return;
  }
  int64_t t0 = now_ns(lim);
  if (lim->drv.cuEventRecord(r->ev, c->internal) != CUDA_SUCCESS) return;
  r->host_ns = t0;
  r->upper_ns = INT64_MAX;
  r->win_head = r->win_n = 0;
  r->valid = 1;
  r->users = 0;
  c->cur_ref = slot;
  c->last_calib_ns = t0;
}

/* Once a reference event has run, "now" bounds its host time from above. */
static void ref_settle(const vgpu_limiter_t *lim, ctx_t *c, int64_t now) {
  for (int i = 0; i < MAX_REFS; i++) {
    ref_t *r = &c->refs[i];
    if (!r->valid || r->upper_ns != INT64_MAX) continue;
    if (lim->drv.cuEventQuery(r->ev) != CUDA_SUCCESS) continue;
    r->upper_ns = now;
  }
}

static int stream_slot(dev_state_t *d, ctx_t *c, CUstream stream) {
  int victim = -1;
  uint64_t oldest = UINT64_MAX;
  for (int i = 0; i < MAX_STREAMS; i++) {
    stream_q_t *q = &c->sq[i];
    if (q->used && q->stream == stream) {
      q->last_use = ++d->stream_clock;
      return i;
    }
    if (!q->used) {
      if (oldest != 0) {
        victim = i;
        oldest = 0;
      }
    } else if (q->count == 0 && q->last_use < oldest) {
      victim = i;
      oldest = q->last_use;
    }
  }
  if (victim < 0) return -1;
  stream_q_t *q = &c->sq[victim];
  q->used = 1;
  q->stream = stream;
  q->head = q->tail = -1;
  q->count = 0;
  q->est_ns = 0;
  q->last_use = ++d->stream_clock;
  return victim;
}

/* ---- residency heartbeats ------------------------------------------------------------- */

static void foreign_add(ctx_t *c, int64_t a, int64_t b) {
  if (c->foreign_n > 0) {
    int last = (c->foreign_head + c->foreign_n - 1) % MAX_FOREIGN;
    if (a <= c->foreign[last].b) { /* heartbeats queued behind one gap: extend it */
      if (b > c->foreign[last].b) c->foreign[last].b = b;
      return;
    }
  }
  if (c->foreign_n == MAX_FOREIGN) {
    c->foreign_head = (c->foreign_head + 1) % MAX_FOREIGN;
    c->foreign_n--;
  }
  int i = (c->foreign_head + c->foreign_n) % MAX_FOREIGN;
  c->foreign[i].a = a;
  c->foreign[i].b = b;
  c->foreign_n++;
}

/* Time inside [a, b) during which the context was known to be off the GPU. */
static int64_t foreign_overlap(const ctx_t *c, int64_t a, int64_t b) {
  int64_t sum = 0;
  for (int k = 0; k < c->foreign_n; k++) {
    int i = (c->foreign_head + k) % MAX_FOREIGN;
    int64_t lo = i64max(a, c->foreign[i].a), hi = i64min(b, c->foreign[i].b);
    if (hi > lo) sum += hi - lo;
  }
  return sum;
}

static void heartbeat(const vgpu_limiter_t *lim, ctx_t *c, int64_t now, int64_t min_period) {
  if (c->cur_ref < 0 || c->hb_n == MAX_HB || now - c->last_hb_ns < min_period) return;
  CUevent ev = pool_get(lim, c);
  if (ev == NULL) return;
  int64_t t = now_ns(lim);
  if (lim->drv.cuEventRecord(ev, c->internal) != CUDA_SUCCESS) {
    pool_put(lim, c, ev);
    return;
  }
  int i = (c->hb_head + c->hb_n) % MAX_HB;
  c->hb[i].ev = ev;
  c->hb[i].rec_ns = t;
  c->hb[i].ref = c->cur_ref;
  c->refs[c->cur_ref].users++;
  c->hb_n++;
  c->last_hb_ns = t;
}

static int64_t map_event(const vgpu_limiter_t *lim, ctx_t *c, int ref, CUevent ev, int64_t rec_ns,
                         int *ok);

static void heartbeats_poll(const vgpu_limiter_t *lim, ctx_t *c) {
  while (c->hb_n > 0) {
    int i = c->hb_head;
    CUresult r = lim->drv.cuEventQuery(c->hb[i].ev);
    if (r == CUDA_ERROR_NOT_READY) break;
    if (r == CUDA_SUCCESS) {
      int ok = 1;
      int64_t g = map_event(lim, c, c->hb[i].ref, c->hb[i].ev, c->hb[i].rec_ns, &ok);
      if (ok && g - c->hb[i].rec_ns > HB_GAP_NS) {
        /* The other context took over somewhere after the last heartbeat that ran promptly;
         * with nothing better known, the middle of that stretch is the unbiased guess. */
        int64_t a = c->hb[i].rec_ns;
        if (c->last_prompt_ns > 0 && a - c->last_prompt_ns < 2 * HB_PERIOD_NS)
          a = c->last_prompt_ns + (a - c->last_prompt_ns) / 2;
        foreign_add(c, a, g);
      } else if (ok) {
        c->last_prompt_ns = g;
      }
    }
    c->refs[c->hb[i].ref].users--;
    pool_put(lim, c, c->hb[i].ev);
    c->hb_head = (c->hb_head + 1) % MAX_HB;
    c->hb_n--;
  }
}

/* ---- completions ------------------------------------------------------------------------- */

static int ent_alloc(dev_state_t *d) {
  int i = d->free_head;
  if (i < 0) return -1;
  d->free_head = d->ent[i].next;
  memset(&d->ent[i], 0, sizeof(d->ent[i]));
  d->ent[i].next = -1;
  d->ent[i].ref = -1;
  d->n_inflight++;
  return i;
}

static void ent_free(dev_state_t *d, int i) {
  d->ent[i].ref = -2; /* free marker for ctx_drop */
  d->ent[i].s = d->ent[i].e = NULL;
  d->ent[i].next = d->free_head;
  d->free_head = i;
  d->n_inflight--;
}

/*
 * CLOCK_MONOTONIC time of a completed event recorded at host time rec_ns (0 = unknown). The GPU
 * processes an event after its record call, so rec_ns - elapsed(ref, ev) is a lower bound of the
 * reference's host time: the maximum over many events converges to the true time line (the
 * events processed at once, which is most of them), without trusting any single round trip.
 */
static int64_t map_event(const vgpu_limiter_t *lim, ctx_t *c, int ref, CUevent ev, int64_t rec_ns,
                         int *ok) {
  float ms = 0;
  if (lim->drv.cuEventElapsedTime(&ms, c->refs[ref].ev, ev) != CUDA_SUCCESS) {
    *ok = 0;
    return 0;
  }
  int64_t el = (int64_t)((double)ms * 1e6);
  ref_t *r = &c->refs[ref];
  if (rec_ns > 0) {
    int64_t lb = rec_ns - el;
    while (r->win_n > 0) { /* drop dominated samples from the back */
      int back = (r->win_head + r->win_n - 1) % LB_WINDOW_N;
      if (r->win[back].lb > lb) break;
      r->win_n--;
    }
    if (r->win_n == LB_WINDOW_N) {
      r->win_head = (r->win_head + 1) % LB_WINDOW_N;
      r->win_n--;
    }
    int at = (r->win_head + r->win_n) % LB_WINDOW_N;
    r->win[at].rec = rec_ns;
    r->win[at].lb = lb;
    r->win_n++;
    while (r->win_n > 1 && r->win[r->win_head].rec < rec_ns - LB_WINDOW_NS) { /* expire */
      r->win_head = (r->win_head + 1) % LB_WINDOW_N;
      r->win_n--;
    }
  }
  int64_t host = r->win_n > 0 ? r->win[r->win_head].lb : r->host_ns;
  if (host < r->host_ns && r->upper_ns == INT64_MAX) host = r->host_ns; /* fresh: t0 still holds */
  return host + el;
}

/* Rises fast (an under-estimate lets work run ahead of the budget), falls slowly. */
static void ewma(int64_t *acc, int64_t sample, int shift) {
  if (sample < 1000) sample = 1000; /* a launch hidden under others still costs something */
  if (*acc == 0 || sample > 4 * *acc)
    *acc = sample;
  else if (sample > *acc)
    *acc += (sample - *acc) / 2;
  else
    *acc += (sample - *acc) / (1 << shift);
}

/* Entry done: derive its host interval, recycle its events, queue it for commit. */
static void finish_entry(vgpu_limiter_t *lim, dev_state_t *d, int idx, int64_t now, int ok) {
  pend_t *p = &d->ent[idx];
  ctx_t *c = &d->ctx[p->ctx];
  if (ok && p->measured && p->ref >= 0 && c->refs[p->ref].valid) {
    int good = 1;
    int64_t s = p->started ? p->s_host : map_event(lim, c, p->ref, p->s, p->s_rec, &good);
    int64_t e = map_event(lim, c, p->ref, p->e, p->e_rec, &good);
    if (good) {
      e = i64min(e, now);
      s = i64min(s, e);
      p->s_host = s;
      p->e_host = e;
    } else {
      p->measured = 0;
    }
  } else {
    p->measured = 0;
  }
  if (p->ref >= 0) c->refs[p->ref].users--;
  pool_put(lim, c, p->s);
  pool_put(lim, c, p->e);
  p->s = p->e = NULL;
  p->done = 1;
  d->done_idx[d->n_done++] = idx;
}

static void commit_done(vgpu_limiter_t *lim, dev_state_t *d, int dev, int64_t now,
                        int64_t frontier, int force_all) {
  if (d->n_done == 0) return;
  /* Insertion sort by start (nearly sorted already); unmeasured entries first. */
  for (int i = 1; i < d->n_done; i++) {
    int x = d->done_idx[i];
    int64_t kx = d->ent[x].measured ? d->ent[x].s_host : INT64_MIN;
    int j = i - 1;
    while (j >= 0) {
      int y = d->done_idx[j];
      int64_t ky = d->ent[y].measured ? d->ent[y].s_host : INT64_MIN;
      if (ky <= kx) break;
      d->done_idx[j + 1] = y;
      j--;
    }
    d->done_idx[j + 1] = x;
  }
  int n = 0;
  pend_t *batch[MAX_PEND];
  while (n < d->n_done) {
    pend_t *p = &d->ent[d->done_idx[n]];
    if (!force_all && p->measured && p->s_host > frontier) break;
    batch[n] = p;
    n++;
  }
  if (n == 0) return;
  commit_batch_t cb = {batch, n};
  int64_t charged = bucket_charge(d, now, d->leff > 0 ? d->leff : 1.0, &cb);
  for (int i = 0; i < n; i++) {
    pend_t *p = batch[i];
    d->inflight_est_ns -= p->est_ns;
    if (p->measured) { /* estimates learn what a launch costs, not how long it took to finish */
      ewma(&d->est_dev_ns, p->charged, 3);
      ctx_t *c = &d->ctx[p->ctx];
      if (p->sq >= 0 && c->used) ewma(&c->sq[p->sq].est_ns, p->charged, 2);
    }
  }
  if (d->inflight_est_ns < 0) d->inflight_est_ns = 0;
  for (int i = 0; i < n; i++) ent_free(d, d->done_idx[i]);
  memmove(d->done_idx, d->done_idx + n, (size_t)(d->n_done - n) * sizeof(int));
  d->n_done -= n;
  d->busy_ns += charged;
  d->win_commits += n;
  if (d->xd != NULL) __atomic_fetch_add(&d->xd->busy_ns, (uint64_t)charged, __ATOMIC_RELAXED);
  (void)lim;
  (void)dev;
}

static void publish_window(vgpu_limiter_t *lim, dev_state_t *d, int limit, int64_t now) {
  int64_t dt = now - d->win_start_ns;
  if (dt < WINDOW_NS || (d->win_commits < WINDOW_MIN_COMMITS && dt < WINDOW_MAX_NS)) return;
  int64_t busy = d->xd != NULL ? (int64_t)__atomic_load_n(&d->xd->busy_ns, __ATOMIC_RELAXED)
                               : d->busy_ns;
  double share = (double)(busy - d->win_busy0) / (double)dt;
  if (share < 0) share = 0;
  if (d->xd != NULL)
    __atomic_store_n(&d->xd->limiter_window_ppm, (uint64_t)(share * 1e6), __ATOMIC_RELAXED);
  int64_t held = d->throttled_ns - d->win_thr0;
  if (limit > 0 && limit == d->last_limit && held * 20 > dt) {
    /* Saturated (held back >= 5 % of the window): the error is meaningful; integrate. */
    double target = limit / 100.0;
    double err = (target - share) / target;
    if (err > 1) err = 1;
    if (err < -1) err = -1;
    d->trim += TRIM_KI * err * ((double)dt / 1e9);
    if (d->trim > VGPU_LIMITER_TRIM_MAX) d->trim = VGPU_LIMITER_TRIM_MAX;
    if (d->trim < -VGPU_LIMITER_TRIM_MAX) d->trim = -VGPU_LIMITER_TRIM_MAX;
    d->p_term = TRIM_KP * err;
  } else {
    d->p_term = 0; /* not saturated: freeze the integral (anti-windup) */
  }
  d->win_start_ns = now;
  d->win_busy0 = busy;
  d->win_thr0 = d->throttled_ns;
  d->win_commits = 0;
  (void)lim;
}

/* Queries stream heads in FIFO order, finishes completed launches and commits what is safe. */
static void poll_locked(vgpu_limiter_t *lim, dev_state_t *d, int dev, int64_t now) {
  d->last_poll_ns = now;
  int64_t frontier = INT64_MAX;
  int hb_pending = 0;
  for (int ci = 0; ci < MAX_CTX; ci++)
    hb_pending |= d->ctx[ci].used && (d->ctx[ci].hb_n > 0 || d->ctx[ci].cur_ref >= 0);
  if (d->n_inflight > d->n_done || hb_pending) {
    capture_guard_t g = relax_capture(lim);
    for (int ci = 0; ci < MAX_CTX; ci++) {
      ctx_t *c = &d->ctx[ci];
      if (!c->used) continue;
      ref_settle(lim, c, now);
      heartbeats_poll(lim, c);
      for (int si = 0; si < MAX_STREAMS; si++) {
        stream_q_t *q = &c->sq[si];
        while (q->used && q->head >= 0) {
          int idx = q->head;
          pend_t *p = &d->ent[idx];
          int done = 0, ok = 1;
          if (p->e == NULL) {
            done = 1;
            ok = 0;
          } else {
            CUresult r = lim->drv.cuEventQuery(p->e);
            if (r == CUDA_SUCCESS) {
              done = 1;
            } else if (r == CUDA_ERROR_NOT_READY) {
              if (!p->started && p->measured && p->ref >= 0) {
                if (lim->drv.cuEventQuery(p->s) == CUDA_SUCCESS) {
                  int good = 1;
                  int64_t s = map_event(lim, c, p->ref, p->s, p->s_rec, &good);
                  if (good) {
                    p->s_host = i64min(s, now);
                    p->started = 1;
                  }
                }
              }
              if (p->started) frontier = i64min(frontier, p->s_host);
            } else {
              done = 1; /* context gone or event broken: charge the estimate */
              ok = 0;
            }
          }
          if (!done) break;
          q->head = p->next;
          if (q->head < 0) q->tail = -1;
          q->count--;
          finish_entry(lim, d, idx, now, ok);
        }
      }
    }
    restore_capture(lim, g);
  }
  commit_done(lim, d, dev, now, frontier, d->n_done > MAX_PEND / 2);
  publish_window(lim, d, d->last_limit, now);
}

/* ---- device state ------------------------------------------------------------------------ */

static dev_state_t *dev_get(vgpu_limiter_t *lim, int dev) {
  dev_state_t *d = __atomic_load_n(&lim->dev[dev], __ATOMIC_ACQUIRE);
  if (d != NULL) return d;
  pthread_mutex_lock(&lim->alloc_mu);
  d = lim->dev[dev];
  if (d == NULL) {
    d = calloc(1, sizeof(*d));
    if (d != NULL) {
      pthread_mutex_init(&d->mu, NULL);
      if (lim->cfg.ext != NULL) {
        d->xd = &lim->cfg.ext->devices[dev];
        d->bucket = &d->xd->limiter_bucket;
      } else {
        d->bucket = &d->local_bucket;
      }
      for (int i = 0; i < MAX_PEND; i++) {
        d->ent[i].next = i + 1 < MAX_PEND ? i + 1 : -1;
        d->ent[i].ref = -2;
      }
      d->free_head = 0;
      d->leff = 1.0;
      d->win_start_ns = now_ns(lim);
      d->win_busy0 =
          d->xd != NULL ? (int64_t)__atomic_load_n(&d->xd->busy_ns, __ATOMIC_RELAXED) : 0;
      __atomic_store_n(&lim->dev[dev], d, __ATOMIC_RELEASE);
    }
  }
  pthread_mutex_unlock(&lim->alloc_mu);
  return d;
}

static void update_leff(dev_state_t *d, int limit) {
  if (limit != d->last_limit) {
    /* A new limit invalidates the integral's history (no windup across limit changes). */
    d->trim = 0;
    d->p_term = 0;
    d->last_limit = limit;
  }
  double f = 1.0 + d->trim + d->p_term;
  if (f < 1.0 - VGPU_LIMITER_TRIM_MAX) f = 1.0 - VGPU_LIMITER_TRIM_MAX;
  if (f > 1.0 + VGPU_LIMITER_TRIM_MAX) f = 1.0 + VGPU_LIMITER_TRIM_MAX;
  d->leff = limit / 100.0 * f;
  if (d->leff > 1.0) d->leff = 1.0;
}

static void flush_fast_launches(vgpu_limiter_t *lim, int dev) {
  if (lim->cfg.ext == NULL) return;
  uint64_t total = __atomic_load_n(&lim->fast_launches[dev], __ATOMIC_RELAXED);
  uint64_t done = __atomic_exchange_n(&lim->fast_flushed[dev], total, __ATOMIC_RELAXED);
  if (total > done)
    __atomic_fetch_add(&lim->cfg.ext->devices[dev].launches_total, total - done,
                       __ATOMIC_RELAXED);
}

/* HAMi's monitor writes recent_kernel = -1 to hold a lower-priority container back; each launch
 * writes 2 so the monitor sees this container as active. */
static void priority_gate(vgpu_limiter_t *lim) {
  vgpu_region_t *r = lim->cfg.region;
  if (r == NULL) return;
  while (__atomic_load_n(&r->recent_kernel, __ATOMIC_RELAXED) < 0)
    lim->drv.sleep_ns(lim->drv.clock_ctx, PRIORITY_POLL_NS);
  if (__atomic_load_n(&r->recent_kernel, __ATOMIC_RELAXED) != 2)
    __atomic_store_n(&r->recent_kernel, 2, __ATOMIC_RELAXED);
}

/*
 * Guards against a wrong estimate letting a queue run ahead: a stream whose launches were never
 * measured keeps one launch in flight, and a stream whose running launch already took far longer
 * than its estimate gets no more until it completes (the estimate then catches up).
 */
static int stream_may_run_ahead(dev_state_t *d, CUcontext ctx, CUstream stream, int64_t now) {
  if (ctx == NULL) return 1;
  for (int ci = 0; ci < MAX_CTX; ci++) {
    ctx_t *c = &d->ctx[ci];
    if (!c->used || c->ctx != ctx) continue;
    for (int si = 0; si < MAX_STREAMS; si++) {
      stream_q_t *q = &c->sq[si];
      if (!q->used || q->stream != stream || q->count == 0 || q->head < 0) continue;
      int64_t est = q->est_ns > 0 ? q->est_ns : d->est_dev_ns;
      if (est <= 0) return 0;
      const pend_t *h = &d->ent[q->head];
      if (h->started && now - h->s_host > 2 * est + OVERDUE_NS) return 0;
      return 1;
    }
    return 1;
  }
  return 1;
}

/* ---- public instance API ----------------------------------------------------------------- */

vgpu_limiter_t *vgpu_limiter_create(const vgpu_limiter_driver_t *drv,
                                    const vgpu_limiter_config_t *cfg) {
  if (drv == NULL || cfg == NULL || cfg->device_count < 0 ||
      cfg->device_count > VGPU_MAX_DEVICES || drv->cuEventCreate == NULL ||
      drv->cuEventDestroy == NULL || drv->cuEventRecord == NULL || drv->cuEventQuery == NULL ||
      drv->cuEventSynchronize == NULL || drv->cuEventElapsedTime == NULL ||
      drv->cuStreamCreate == NULL || drv->cuStreamDestroy == NULL ||
      drv->cuCtxGetCurrent == NULL)
    return NULL;
  vgpu_limiter_t *lim = calloc(1, sizeof(*lim));
  if (lim == NULL) return NULL;
  lim->drv = *drv;
  lim->cfg = *cfg;
  if (lim->drv.now_ns == NULL) lim->drv.now_ns = default_now;
  if (lim->drv.sleep_ns == NULL) lim->drv.sleep_ns = default_sleep;
  pthread_mutex_init(&lim->alloc_mu, NULL);
  return lim;
}

void vgpu_limiter_destroy(vgpu_limiter_t *lim) {
  if (lim == NULL) return;
  for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
    dev_state_t *d = lim->dev[i];
    if (d == NULL) continue;
    flush_fast_launches(lim, i);
    for (int ci = 0; ci < MAX_CTX; ci++) {
      ctx_t *c = &d->ctx[ci];
      if (!c->used) continue;
      for (int k = 0; k < MAX_PEND; k++) {
        pend_t *p = &d->ent[k];
        if (p->ctx == ci && p->ref != -2) {
          if (p->s) lim->drv.cuEventDestroy(p->s);
          if (p->e) lim->drv.cuEventDestroy(p->e);
        }
      }
      for (int k = 0; k < c->hb_n; k++) lim->drv.cuEventDestroy(c->hb[(c->hb_head + k) % MAX_HB].ev);
      for (int k = 0; k < c->pool_n; k++) lim->drv.cuEventDestroy(c->pool[k]);
      for (int k = 0; k < MAX_REFS; k++)
        if (c->refs[k].ev) lim->drv.cuEventDestroy(c->refs[k].ev);
      if (c->internal) lim->drv.cuStreamDestroy(c->internal);
      free(c->pool);
    }
    pthread_mutex_destroy(&d->mu);
    free(d);
  }
  for (int i = 0; i < MAX_BRACKETS; i++)
    if (tls_brackets[i].armed && tls_brackets[i].lim == lim) {
      memset(&tls_brackets[i], 0, sizeof(tls_brackets[i]));
      tls_open--;
    }
  pthread_mutex_destroy(&lim->alloc_mu);
  free(lim);
}

/* Returns a bracket that before_launch armed but after_launch never closed (failed launch). */
static void disarm(bracket_t *b) {
  vgpu_limiter_t *lim = b->lim;
  if (b->armed && lim != NULL && b->s != NULL && b->ctx >= 0) {
    dev_state_t *d = lim->dev[b->dev];
    if (d != NULL) {
      pthread_mutex_lock(&d->mu);
      if (d->ctx[b->ctx].used && d->ctx[b->ctx].gen == b->gen) pool_put(lim, &d->ctx[b->ctx], b->s);
      pthread_mutex_unlock(&d->mu);
    }
  }
  if (b->armed) tls_open--;
  memset(b, 0, sizeof(*b));
}

/* The open bracket of (lim, dev, stream) on this thread, or NULL. */
static bracket_t *bracket_find(const vgpu_limiter_t *lim, int dev, CUstream stream) {
  for (int i = 0; i < MAX_BRACKETS; i++) {
    bracket_t *b = &tls_brackets[i];
    if (b->armed && b->lim == lim && b->dev == dev && b->stream == stream) return b;
  }
  return NULL;
}

/* A slot for a new bracket: a stale one for the same stream (its launch failed), else a free
 * one, else the oldest (bounded). */
static bracket_t *bracket_new(vgpu_limiter_t *lim, int dev, CUstream stream) {
  bracket_t *b = bracket_find(lim, dev, stream);
  if (b != NULL) {
    disarm(b);
    return b;
  }
  for (int i = 0; i < MAX_BRACKETS; i++)
    if (!tls_brackets[i].armed) return &tls_brackets[i];
  disarm(&tls_brackets[0]);
  return &tls_brackets[0];
}

void vgpu_limiter_before(vgpu_limiter_t *lim, int dev, CUstream stream) {
  if (lim == NULL || dev < 0 || dev >= VGPU_MAX_DEVICES) return;
  if (tls_open > 0) { /* a failed launch on this stream left its bracket open */
    bracket_t *stale = bracket_find(lim, dev, stream);
    if (stale != NULL) disarm(stale);
  }
  if (lim->cfg.policy == VGPU_LIMITER_POLICY_DISABLE) return;
  priority_gate(lim);
  int limit = effective_limit(lim, dev);
  if (limit == 0) {
    /* Fast path: count the launch; drain leftovers only if a limit was active before. */
    uint64_t n = __atomic_add_fetch(&lim->fast_launches[dev], 1, __ATOMIC_RELAXED);
    if ((n % FLUSH_EVERY) == 0) flush_fast_launches(lim, dev);
    dev_state_t *d = __atomic_load_n(&lim->dev[dev], __ATOMIC_ACQUIRE);
    if (d != NULL && __atomic_load_n(&d->n_inflight, __ATOMIC_RELAXED) > 0 &&
        pthread_mutex_trylock(&d->mu) == 0) {
      d->last_limit = 0;
      poll_locked(lim, d, dev, now_ns(lim));
      pthread_mutex_unlock(&d->mu);
    }
    return;
  }
  if (lim->drv.cuStreamIsCapturing != NULL) {
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (lim->drv.cuStreamIsCapturing(stream, &st) == CUDA_SUCCESS &&
        st != CU_STREAM_CAPTURE_STATUS_NONE)
      return; /* recorded into a graph, not executed now: limited at cuGraphLaunch */
  }
  dev_state_t *d = dev_get(lim, dev);
  if (d == NULL) return;

  int64_t t0 = now_ns(lim), now = t0;
  int delayed = 0;
  CUcontext ctx = NULL;
  if (lim->drv.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) ctx = NULL;
  pthread_mutex_lock(&d->mu);
  update_leff(d, limit);
  if (now - d->last_poll_ns >= POLL_EVERY_NS || d->n_inflight > MAX_PEND * 3 / 4)
    poll_locked(lim, d, dev, now);
  for (;;) {
    int64_t ahead = bucket_ahead_ns(d, now);
    int room = d->n_inflight < MAX_PEND - 1 && stream_may_run_ahead(d, ctx, stream, now);
    if (room && !d->blocked && ahead <= BURST_NS) break;
    if (room && d->blocked && ahead <= 0) {
      d->blocked = 0;
      break;
    }
    if (room) d->blocked = 1;
    delayed = 1;
    pthread_mutex_unlock(&d->mu);
    int64_t wait = room ? ahead : SLEEP_CHUNK_NS / 4;
    int64_t chunk = d->n_inflight > 0 ? HB_PERIOD_NS : SLEEP_CHUNK_NS;
    lim->drv.sleep_ns(lim->drv.clock_ctx, i64max(1000, i64min(wait, chunk)));
    now = now_ns(lim);
    pthread_mutex_lock(&d->mu);
    if (d->n_inflight > 0) {
      int ci = ctx_find(d, ctx);
      if (ci >= 0) {
        capture_guard_t g = relax_capture(lim);
        heartbeat(lim, &d->ctx[ci], now, HB_PERIOD_NS);
        restore_capture(lim, g);
      }
    }
    poll_locked(lim, d, dev, now);
    limit = effective_limit(lim, dev);
    if (limit == 0) break;
    update_leff(d, limit);
  }
  d->launches_total++;
  if (delayed) {
    int64_t waited = now - t0;
    d->launches_delayed++;
    d->throttled_ns += waited;
    if (d->xd != NULL) {
      __atomic_fetch_add(&d->xd->launches_delayed, 1, __ATOMIC_RELAXED);
      __atomic_fetch_add(&d->xd->throttled_ns, (uint64_t)waited, __ATOMIC_RELAXED);
    }
  }
  if (d->xd != NULL) __atomic_fetch_add(&d->xd->launches_total, 1, __ATOMIC_RELAXED);
  if (limit == 0) {
    pthread_mutex_unlock(&d->mu);
    return;
  }

  /* Arm the bracket: S on the launch's stream, right before the launch. The device lock is
   * released around bracket_new (it may disarm a bracket of another device). */
  pthread_mutex_unlock(&d->mu);
  bracket_t *b = bracket_new(lim, dev, stream);
  pthread_mutex_lock(&d->mu);
  memset(b, 0, sizeof(*b));
  tls_open++;
  b->lim = lim;
  b->dev = dev;
  b->armed = 1;
  b->stream = stream;
  b->ctx = -1;
  b->sq = -1;
  if (ctx != NULL) {
    capture_guard_t g = relax_capture(lim);
    int ci = ctx_slot(lim, d, ctx);
    if (ci >= 0) {
      ctx_t *c = &d->ctx[ci];
      ctx_calibrate(lim, c, now);
      int si = stream_slot(d, c, stream);
      if (c->cur_ref >= 0 && si >= 0) {
        CUevent s = pool_get(lim, c);
        int64_t s_rec = now_ns(lim);
        if (s != NULL && lim->drv.cuEventRecord(s, stream) == CUDA_SUCCESS) {
          b->s = s;
          b->s_rec = s_rec;
          b->measured = 1;
        } else if (s != NULL) {
          pool_put(lim, c, s);
        }
      }
      b->ctx = ci;
      b->gen = c->gen;
      b->sq = si;
    }
    restore_capture(lim, g);
  }
  pthread_mutex_unlock(&d->mu);
}

void vgpu_limiter_after(vgpu_limiter_t *lim, int dev, CUstream stream) {
  if (lim == NULL || tls_open == 0) return;
  bracket_t *b = bracket_find(lim, dev, stream);
  if (b == NULL) return;
  dev_state_t *d = lim->dev[dev];
  if (d == NULL) {
    disarm(b);
    return;
  }
  int64_t now = now_ns(lim);
  pthread_mutex_lock(&d->mu);
  int idx = ent_alloc(d);
  if (idx < 0) {
    /* No room (only when MAX_PEND launches are in flight from racing threads): charge blind. */
    if (b->s != NULL && b->ctx >= 0 && d->ctx[b->ctx].gen == b->gen)
      pool_put(lim, &d->ctx[b->ctx], b->s);
    pend_t blind;
    memset(&blind, 0, sizeof(blind));
    blind.est_ns = d->est_dev_ns > 0 ? d->est_dev_ns : DEFAULT_EST_NS;
    pend_t *one[1] = {&blind};
    commit_batch_t cb = {one, 1};
    int64_t c = bucket_charge(d, now, d->leff, &cb);
    d->busy_ns += c;
    if (d->xd != NULL) __atomic_fetch_add(&d->xd->busy_ns, (uint64_t)c, __ATOMIC_RELAXED);
    memset(b, 0, sizeof(*b));
    tls_open--;
    pthread_mutex_unlock(&d->mu);
    return;
  }
  pend_t *p = &d->ent[idx];
  ctx_t *c = b->ctx >= 0 && d->ctx[b->ctx].used && d->ctx[b->ctx].gen == b->gen
                 ? &d->ctx[b->ctx]
                 : NULL;
  stream_q_t *q = c != NULL && b->sq >= 0 && c->sq[b->sq].used && c->sq[b->sq].stream == stream
                      ? &c->sq[b->sq]
                      : NULL;
  int64_t est = q != NULL && q->est_ns > 0 ? q->est_ns
                : d->est_dev_ns > 0         ? d->est_dev_ns
                                            : DEFAULT_EST_NS;
  p->est_ns = est;
  p->ctx = (int16_t)(c != NULL ? b->ctx : 0);
  p->sq = (int16_t)(q != NULL ? b->sq : -1);
  if (c != NULL && q != NULL && b->measured && c->cur_ref >= 0 &&
      c->refs[c->cur_ref].valid) {
    capture_guard_t g = relax_capture(lim);
    CUevent e = pool_get(lim, c);
    int64_t e_rec = now_ns(lim);
    if (e != NULL && lim->drv.cuEventRecord(e, stream) == CUDA_SUCCESS) {
      p->s = b->s;
      p->s_rec = b->s_rec;
      p->e_rec = e_rec;
      p->e = e;
      p->ref = (int8_t)c->cur_ref;
      c->refs[c->cur_ref].users++;
      p->measured = 1;
    } else {
      pool_put(lim, c, e);
      pool_put(lim, c, b->s);
    }
    /* Right after the launch: if another context takes the GPU before this launch runs, the
     * heartbeat completes late and the gap is not charged. */
    if (p->measured) heartbeat(lim, c, e_rec, HB_AFTER_LAUNCH_NS);
    restore_capture(lim, g);
  } else if (c != NULL) {
    pool_put(lim, c, b->s);
  }
  if (q != NULL && p->measured) {
    if (q->tail >= 0)
      d->ent[q->tail].next = idx;
    else
      q->head = idx;
    q->tail = idx;
    q->count++;
  } else {
    /* Unmeasured: committed at its estimate right away. */
    p->done = 1;
    d->done_idx[d->n_done++] = idx;
  }
  d->inflight_est_ns += est;
  memset(b, 0, sizeof(*b));
  tls_open--;
  pthread_mutex_unlock(&d->mu);
}

void vgpu_limiter_poll(vgpu_limiter_t *lim, int dev) {
  if (lim == NULL || dev < 0 || dev >= VGPU_MAX_DEVICES) return;
  flush_fast_launches(lim, dev);
  dev_state_t *d = __atomic_load_n(&lim->dev[dev], __ATOMIC_ACQUIRE);
  if (d == NULL) return;
  pthread_mutex_lock(&d->mu);
  poll_locked(lim, d, dev, now_ns(lim));
  pthread_mutex_unlock(&d->mu);
}

void vgpu_limiter_forget_context(vgpu_limiter_t *lim, CUcontext ctx) {
  if (lim == NULL) return;
  for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
    dev_state_t *d = __atomic_load_n(&lim->dev[i], __ATOMIC_ACQUIRE);
    if (d == NULL) continue;
    pthread_mutex_lock(&d->mu);
    for (int ci = 0; ci < MAX_CTX; ci++) {
      if (!d->ctx[ci].used || d->ctx[ci].ctx != ctx) continue;
      /* Pending launches of the context: move them to the done list as unmeasured. */
      for (int si = 0; si < MAX_STREAMS; si++) {
        stream_q_t *q = &d->ctx[ci].sq[si];
        while (q->used && q->head >= 0) {
          int idx = q->head;
          q->head = d->ent[idx].next;
          pend_t *p = &d->ent[idx];
          p->s = p->e = NULL;
          p->measured = 0;
          p->done = 1;
          d->done_idx[d->n_done++] = idx;
        }
      }
      ctx_drop(d, ci);
    }
    pthread_mutex_unlock(&d->mu);
  }
}

void vgpu_limiter_stats(vgpu_limiter_t *lim, int dev, vgpu_limiter_stats_t *out) {
  memset(out, 0, sizeof(*out));
  if (lim == NULL || dev < 0 || dev >= VGPU_MAX_DEVICES) return;
  out->limit_percent = effective_limit(lim, dev);
  out->launches_total = __atomic_load_n(&lim->fast_launches[dev], __ATOMIC_RELAXED);
  dev_state_t *d = __atomic_load_n(&lim->dev[dev], __ATOMIC_ACQUIRE);
  if (d == NULL) return;
  pthread_mutex_lock(&d->mu);
  out->busy_ns = d->busy_ns;
  out->throttled_ns = d->throttled_ns;
  out->launches_total += d->launches_total;
  out->launches_delayed = d->launches_delayed;
  out->in_flight = (uint64_t)d->n_inflight;
  out->trim = d->trim;
  out->estimate_ns = d->est_dev_ns;
  pthread_mutex_unlock(&d->mu);
}

/* ---- process-wide hooks ------------------------------------------------------------------ */

int vgpu_limiter_init(const vgpu_limiter_driver_t *drv, const vgpu_limiter_config_t *cfg) {
  vgpu_limiter_t *lim = vgpu_limiter_create(drv, cfg);
  if (lim == NULL) return -1;
  vgpu_limiter_t *expected = NULL;
  if (!__atomic_compare_exchange_n(&g_limiter, &expected, lim, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    vgpu_limiter_destroy(lim); /* already initialized: keep the first */
  }
  return 0;
}

void vgpu_limiter_before_launch(int dev, CUstream stream) {
  vgpu_limiter_t *lim = __atomic_load_n(&g_limiter, __ATOMIC_ACQUIRE);
  if (lim != NULL) vgpu_limiter_before(lim, dev, stream);
}

void vgpu_limiter_after_launch(int dev, CUstream stream) {
  if (tls_open == 0) return;
  vgpu_limiter_t *lim = __atomic_load_n(&g_limiter, __ATOMIC_ACQUIRE);
  if (lim != NULL) vgpu_limiter_after(lim, dev, stream);
}

void vgpu_limiter_context_destroyed(CUcontext ctx) {
  vgpu_limiter_forget_context(__atomic_load_n(&g_limiter, __ATOMIC_ACQUIRE), ctx);
}

void vgpu_limiter_flush(void) {
  /* Runs at exit, possibly after the driver tore itself down: publish counters only, no driver
   * calls and no locks. */
  vgpu_limiter_t *lim = __atomic_load_n(&g_limiter, __ATOMIC_ACQUIRE);
  if (lim == NULL) return;
  for (int i = 0; i < VGPU_MAX_DEVICES; i++) flush_fast_launches(lim, i);
}

void vgpu_limiter_atfork_child(void) {
  /* The child cannot use the parent's CUDA objects; keep the config, drop per-device state
   * (leaked on purpose: its mutexes may have been held by threads that do not exist here). */
  vgpu_limiter_t *lim = __atomic_load_n(&g_limiter, __ATOMIC_ACQUIRE);
  memset(tls_brackets, 0, sizeof(tls_brackets));
  tls_open = 0;
  if (lim == NULL) return;
  for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
    if (lim->dev[i] != NULL) lim->orphan[i] = lim->dev[i];
    lim->dev[i] = NULL;
    lim->fast_launches[i] = lim->fast_flushed[i] = 0;
  }
  pthread_mutex_init(&lim->alloc_mu, NULL);
}

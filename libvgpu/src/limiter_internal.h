/*
 * limiter_internal.h — what the SM limiter's three units share: its state types and the functions
 * one unit calls in another. Not part of the library's interface (limiter.h is).
 *
 *   limiter_measure.c  timing events, contexts and streams, residency heartbeats, the GPU->host
 *                      time map, completions (what a launch cost on the GPU)
 *   limiter_bucket.c   the container's shared budget (GCRA word in the region's extension
 *                      block), charging committed launches, the integral trim, estimates
 *   limiter_switch.c   what a context switch costs on this device (measured, never assumed)
 *   limiter.c          the launch gate (before/after), the instance and process-wide API
 *   limiter_report.c   sm_util for HAMi's monitor, statistics
 *
 * Layers (one way): limiter.c -> limiter_measure.c -> limiter_bucket.c -> limiter_switch.c;
 * limiter.c polls (measure) and then commits (bucket).
 *
 * Tuning constants and their reasons: limiter_tuning.h. Locking: every function here that takes a
 * dev_state_t runs under d->mu unless it says otherwise.
 */
#ifndef VGPU_LIMITER_INTERNAL_H
#define VGPU_LIMITER_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "limiter.h"
#include "limiter_tuning.h"

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
  int8_t cold; /* nothing of its context was in flight when S was recorded */
  /* Timed without timing events (a crowded context, limiter_measure.c "Crowded contexts"): E is
   * an event without timing, the interval is [launch, completion seen by a poll]. */
  int8_t untimed;
  int32_t nlaunch; /* untimed: the launches its E covers (limiter_crowd.c) */
  int8_t pair; /* beyond the context table: charged E - S of its own pair (OVERFLOW_CTX) */
  int8_t long_run; /* ran past LONG_RUN_NS: charged up to run_mark while running */
  int64_t run_mark;
  CUcontext octx; /* its context, for a launch beyond the context table (OVERFLOW_CTX) */
} pend_t;

typedef struct {
  CUstream stream;
  int used;
  int head, tail, count;
  int64_t est_ns;
  uint64_t last_use;
  /* Untimed launches (limiter_crowd.c): in flight, the time one held its stream (mean), and
   * when the last one was seen done. */
  int untimed;
  int64_t dur_ns, last_end_ns;
  int64_t last_launch_ns; /* launched on within CROWD_WINDOW_NS (+ a wait) counts as busy */
  int busy;               /* counted in the context's n_busy (limiter_crowd.c) */
  /* Untimed launches made while the stream's E was in flight: no event of their own; the next
   * E, recorded once that one is seen done, covers them from the first one's launch call. */
  int uncov;
  int64_t uncov_first_ns;
  int64_t next_query_ns; /* its untimed E is not queried before (limiter_crowd.c)... */
  int64_t query_set_ns;  /* ...as decided then (while the gate drains: CROWD_DRAIN_QUERY_NS) */
  int64_t last_cover_ns; /* when it last recorded an untimed E */
  int64_t tail_est_ns;   /* when its untimed launches are estimated to be done */
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
  CUevent *pool_nt; /* events without timing (CU_EVENT_DISABLE_TIMING), for untimed launches */
  int pool_nt_n, pool_nt_cap;
  int untimed_n; /* untimed launches of the context in flight: no heartbeats meanwhile */
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
  /* Off-GPU stretches in time order, non-overlapping (a ring on the heap, MAX_FOREIGN entries);
   * cum = total length of every stretch before this one, so the off-GPU time inside [a, b) is
   * F(b) - F(a), found by binary search. */
  struct foreign_s {
    int64_t a, b, cum;
  } *foreign;
  int foreign_head, foreign_n;
  int64_t foreign_total;
  /* sq[OVERFLOW_SQ]: the untimed launches on streams beyond the table, in launch order. */
  stream_q_t sq[MAX_STREAMS + 1];
  /* The slots with launches in flight (entries queued or uncovered launches): what a poll
   * visits, so that its cost follows the busy streams, not the table. */
  uint64_t act[SQ_WORDS];
  int poll_cursor;       /* where the next poll with a query budget starts */
  int16_t sidx[SIDX_N];  /* stream -> slot + 1 (open addressing; 0 = empty) */
  int n_busy;            /* slots with busy set (limiter_crowd.c) */
  int64_t crowd_swept_ns;
} ctx_t;

typedef struct {
  pthread_mutex_t mu;
  uint64_t *bucket;
  uint64_t local_bucket;
  vgpu_ext_device_t *xd;
  int64_t local_wm_ns; /* union watermark over this process's streams */
  int64_t crowded_until_ns; /* a context of this process was crowded lately (limiter_crowd.c) */
  int64_t inflight_est_ns; /* estimates of this process's launches not yet charged */
  int64_t crowd_inflight_ns; /* lim_crowd_inflight_ns: kept by launches and polls */
  int n_uncov;               /* uncovered untimed launches (stream_q_t.uncov), all streams */
  int draining;              /* the gate waits: covers are recorded at once (limiter_crowd.c) */
  int64_t switch_owed_ns;  /* switches onto this process's contexts not yet charged */
  int64_t switch_ns;       /* switch time charged so far (stats) */
  uint64_t switches;       /* switches onto this process's contexts seen so far (stats) */
  uint64_t long_runs;      /* launches that ran past LONG_RUN_NS (stats) */
  int long_running;        /* ...of which still running */
  /* The measured switch cost (limiter_switch.c): recent samples, the estimate from them. */
  struct {
    int64_t v, t;
  } sw_sample[SWITCH_SAMPLES];
  int sw_head, sw_n;
  int64_t switch_est_ns; /* 0 = nothing measured yet */
  int wm_ctx;            /* context of the launch that set local_wm_ns */
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
  ctx_t ctx[MAX_CTX + 1]; /* ctx[OVERFLOW_CTX]: launches of contexts beyond the table */
  /* sm_util: (time, busy_ns) snapshots every UTIL_REFRESH_NS, the oldest ~1 s ago */
  struct {
    int64_t t, busy;
  } util[UTIL_RING_N];
  int util_head, util_n;
  /* stats (process-local) */
  int64_t busy_ns, throttled_ns;
  uint64_t launches_total, launches_delayed, launches_flushed;
} dev_state_t;

struct vgpu_limiter {
  vgpu_limiter_driver_t drv;
  vgpu_limiter_config_t cfg;
  int timed_streams; /* busy streams per context timed with timing events (limiter_measure.c) */
  pthread_mutex_t alloc_mu;
  dev_state_t *dev[VGPU_MAX_DEVICES];
  dev_state_t *orphan[VGPU_MAX_DEVICES]; /* the parent's state after fork: never touched again */
  uint64_t fast_launches[VGPU_MAX_DEVICES]; /* launches seen while unlimited (atomic) */
  uint64_t fast_flushed[VGPU_MAX_DEVICES];
  int util_thread; /* the process-wide limiter's sm_util thread runs (1) */
};

static inline int64_t lim_now_ns(const vgpu_limiter_t *lim) {
  return lim->drv.now_ns(lim->drv.clock_ctx);
}
static inline int64_t lim_i64min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t lim_i64max(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- limiter_report.c ---- */

/* Starts the sm_util refresher thread once (the process-wide limiter only). */
void lim_util_thread_start(vgpu_limiter_t *lim);

/* ---- limiter_measure.c ---- */

/* Runs the limiter's own driver calls in relaxed capture mode (see limiter.h). */
typedef struct {
  CUstreamCaptureMode saved;
  int swapped;
} capture_guard_t;
capture_guard_t lim_relax_capture(const vgpu_limiter_t *lim);
void lim_restore_capture(const vgpu_limiter_t *lim, capture_guard_t g);
CUevent lim_pool_get(const vgpu_limiter_t *lim, ctx_t *c);
void lim_pool_put(const vgpu_limiter_t *lim, ctx_t *c, CUevent ev);
/* The same for events without timing (untimed launches). */
CUevent lim_pool_get_nt(const vgpu_limiter_t *lim, ctx_t *c);
/* A new timing event in the current context (never pooled: OVERFLOW_CTX). */
CUevent lim_event_pair_create(const vgpu_limiter_t *lim);
/* after_launch of a launch beyond the context table: E of the pair, the entry's fields. */
void lim_overflow_after(const vgpu_limiter_t *lim, dev_state_t *d, pend_t *p, CUevent s,
                        int64_t s_rec, CUcontext octx, CUstream stream);
/* Finishes such an entry: its estimate becomes E - S (or launch to now when the pair broke). */
void lim_overflow_finish(const vgpu_limiter_t *lim, dev_state_t *d, pend_t *p, int64_t now, int ok);
/* Sets up ctx[OVERFLOW_CTX] of a new device state. */
void lim_overflow_ctx_init(dev_state_t *d);
/* Destroys what the device state holds (events, internal streams, memory), not d itself. */
void lim_dev_release(const vgpu_limiter_t *lim, dev_state_t *d);
void lim_pool_put_nt(const vgpu_limiter_t *lim, ctx_t *c, CUevent ev);
/* Busy streams per context that may be timed with timing events: CUDA_DEVICE_MAX_CONNECTIONS
 * (the driver's hardware queues, default 8) minus the one the internal stream takes. */
int lim_timed_streams_from_env(void);
/* The wall-time credit the gate gives (BURST_NS; longer while crowded, limiter_crowd.c). */
int64_t lim_burst_ns(const dev_state_t *d, int64_t now);
/* 1: the launch on `stream` is to be timed without timing events (the context is crowded). */
int lim_ctx_crowded(const vgpu_limiter_t *lim, const dev_state_t *d, ctx_t *c, int si,
                    int64_t now);
/* An untimed entry of stream q was seen done: learns how long one launch holds its stream. */
void lim_crowd_done(stream_q_t *q, const pend_t *p);
/* A crowded context launched on slot si (< MAX_STREAMS) at `now`: counts the stream as busy. */
void lim_crowd_note_launch(ctx_t *c, int si, int64_t now);
/* after_launch of an untimed launch on stream q (not OVERFLOW_SQ) whose previous E is still in
 * flight: counted as uncovered (no event, no entry); returns 0 when it needs an E of its own. */
int lim_crowd_defer(dev_state_t *d, ctx_t *c, stream_q_t *q, int64_t launch_ns);
/* after_launch of an untimed launch that records its own E into entry p (idx): also covers the
 * stream's uncovered launches. Returns 0 when no E could be recorded (p stays unmeasured). */
int lim_crowd_record(const vgpu_limiter_t *lim, dev_state_t *d, ctx_t *c, stream_q_t *q, pend_t *p,
                     CUstream stream, int64_t launch_ns, int64_t now);
/* From a poll: the stream's E was seen done and launches after it are uncovered: records the E
 * that covers them (in the stream's context, pushed if *cur is another; *cur is read once per
 * poll: NULL = not yet). Returns 1 when recorded. */
int lim_crowd_cover(vgpu_limiter_t *lim, dev_state_t *d, int ci, int si, int64_t now,
                    CUcontext *cur, int *cur_known, int eager);
/* 1: stream q may record its next untimed E now (at most one per CROWD_COVER_NS while busy). */
int lim_crowd_cover_due(const dev_state_t *d, const ctx_t *c, const stream_q_t *q, int64_t now);
/* When to query the stream's untimed E next, after it was recorded or found still running. */
void lim_crowd_next_query(stream_q_t *q, int64_t now, int recorded);
/* Recomputes d->crowd_inflight_ns from the streams with launches in flight. */
void lim_crowd_inflight_update(dev_state_t *d, int64_t now);
void lim_ctx_drop(dev_state_t *d, int ci);
int lim_ctx_find(const dev_state_t *d, CUcontext ctx);
int lim_ctx_slot(const vgpu_limiter_t *lim, dev_state_t *d, CUcontext ctx);
void lim_ctx_calibrate(const vgpu_limiter_t *lim, ctx_t *c, int64_t now);
int lim_stream_slot(dev_state_t *d, ctx_t *c, CUstream stream);
/* Launches of the context still in flight (any stream). */
int lim_ctx_busy(const ctx_t *c);
/* 0: the stream's running launch says the estimates are wrong (or nothing was ever measured):
 * hold further launches on it until it completes. */
int lim_stream_may_run_ahead(const dev_state_t *d, CUcontext ctx, CUstream stream, int64_t now);
/* Time inside [a, b) during which the context was known to be off the GPU. */
int64_t lim_foreign_overlap(const ctx_t *c, int64_t a, int64_t b);
/* End of the off-GPU stretch of the context that holds time t (when it was back on the GPU), or
 * 0 when t is in no remembered stretch. */
int64_t lim_foreign_resumed(const ctx_t *c, int64_t t);
void lim_heartbeat(const vgpu_limiter_t *lim, ctx_t *c, int64_t now, int64_t min_period);
int lim_ent_alloc(dev_state_t *d);
void lim_ent_free(dev_state_t *d, int i);
/* Queries stream heads in FIFO order and finishes completed launches; returns the frontier (start
 * of the earliest launch still running, INT64_MAX if none) up to which lim_commit_done may commit.
 * budget >= 0: stop querying after that many events were found still running (the streams not
 * reached count in the frontier as running; the next poll starts where this one stopped). */
int64_t lim_poll_locked(vgpu_limiter_t *lim, dev_state_t *d, int64_t now, int budget);
/* The slot of `stream` in the context's table, or -1 (no insertion); limiter_tables.c. */
int lim_stream_find(const ctx_t *c, CUstream stream);
/* Adds slot `slot` (its stream set) to the context's stream index. */
void lim_sidx_insert(ctx_t *c, int slot);
/* Marks slot si as having launches in flight (1) or none (0). */
/* Appends pending entry idx at the tail of its stream's queue. */
static inline void lim_sq_append(dev_state_t *d, stream_q_t *q, int idx) {
  if (q->tail >= 0)
    d->ent[q->tail].next = idx;
  else
    q->head = idx;
  q->tail = idx;
  q->count++;
}

static inline void lim_sq_active(ctx_t *c, int si, int on) {
  if (on)
    c->act[si >> 6] |= 1ULL << (si & 63);
  else
    c->act[si >> 6] &= ~(1ULL << (si & 63));
}
/* The first slot >= from with launches in flight, or -1. */
static inline int lim_sq_next(const ctx_t *c, int from) {
  for (int w = from >> 6; w < SQ_WORDS; w++) {
    uint64_t bits = c->act[w];
    if (w == from >> 6) bits &= ~0ULL << (from & 63);
    if (bits) return w * 64 + __builtin_ctzll(bits);
  }
  return -1;
}

/* ---- limiter_bucket.c ---- */

/* The word is the container's TAT in CLOCK_MONOTONIC ns (system-wide, so every process of the
 * container agrees). 0 (fresh region) or a value further ahead than any legitimate debt
 * (garbage, a clock from another boot) is not valid: the gate reads it as "now" (no debt), and a
 * charge starts from the launch's own start (lim_bucket_charge). */
static inline int lim_bucket_word_valid(uint64_t word, int64_t now) {
  int64_t tat = (int64_t)word;
  return tat > 0 && tat <= now + TAT_MAX_AHEAD_NS;
}
static inline int64_t lim_bucket_tat(uint64_t word, int64_t now) {
  return lim_bucket_word_valid(word, now) ? (int64_t)word : now;
}

/* The device time this process's untimed launches in flight will still hold (limiter_crowd.c):
 * the longest stream's queue, kept up to date by launches and recomputed by polls. */
static inline int64_t lim_crowd_inflight_ns(const dev_state_t *d) { return d->crowd_inflight_ns; }

/* How far the container's charged work plus this process's in-flight estimate runs ahead. */
static inline int64_t lim_bucket_ahead_ns(const dev_state_t *d, int64_t now) {
  int64_t tat = lim_bucket_tat(__atomic_load_n(d->bucket, __ATOMIC_ACQUIRE), now);
  return tat - now + (int64_t)((double)(d->inflight_est_ns + lim_crowd_inflight_ns(d)) / d->leff);
}

typedef struct {
  pend_t **ents; /* in start order */
  int n;
} commit_batch_t;
/* Also charges d->switch_owed_ns (right after the batch's first launch) and clears it. */
int64_t lim_bucket_charge(dev_state_t *d, int64_t now, double leff, const commit_batch_t *batch);
/* Charges the done launches that are safe to commit (all of them with force_all). */
void lim_commit_done(dev_state_t *d, int64_t now, int64_t frontier, int force_all);
/* A launch of context c still running past LONG_RUN_NS: charges its interval up to now. */
void lim_charge_running(dev_state_t *d, const ctx_t *c, pend_t *p, int64_t now);
/* Publishes the window's share and integrates the trim once a window is complete. */
void lim_publish_window(dev_state_t *d, int limit, int64_t now);
void lim_update_leff(dev_state_t *d, int limit);

/* ---- limiter_switch.c ---- */

/* One observation of what a switch onto a context cost (ns), taken at `now`. */
void lim_switch_sample(dev_state_t *d, int64_t ns, int64_t now);
/* The current estimate (0 until something was measured). */
int64_t lim_switch_cost(const dev_state_t *d);
/* A switch onto one of this process's contexts ended an off-GPU stretch of `stretch_ns`: owes
 * the measured switch cost (never more than the stretch itself). */
void lim_switch_owe(dev_state_t *d, int64_t stretch_ns, int64_t now);

#endif /* VGPU_LIMITER_INTERNAL_H */

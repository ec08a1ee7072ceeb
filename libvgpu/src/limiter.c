/*
 * limiter.c — libvgpu's SM limiter: the launch gate and the API (limiter.h). Design notes in
 * limiter.h and libvgpu/README.md ("## SM limiter"); the other units are limiter_measure.c (what
 * a launch cost on the GPU), limiter_bucket.c (the container's shared budget), limiter_switch.c
 * (what a context switch costs on this device) and limiter_report.c (sm_util for HAMi's
 * monitor); every tuning constant and its reason is in limiter_tuning.h.
 *
 * The gate: a launch runs while the container's charged work plus this process's in-flight
 * estimate stays within BURST_NS of now; once held back, a process waits until the bucket has
 * fully caught up (hysteresis, so admitted work runs back to back and the idle gap is one piece).
 * Admitted launches are bracketed by timing events (arm_bracket before, close in after).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "limiter_internal.h"

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
  int cold; /* nothing of the launch's context was in flight when S was recorded */
  int untimed; /* crowded context: no S; E without timing (limiter_crowd.c) */
  CUcontext octx; /* the launch's context when it is beyond the table (OVERFLOW_CTX) */
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

/* Finishes completed launches, charges what is safe to charge, publishes the window. */
static void poll_commit(vgpu_limiter_t *lim, dev_state_t *d, int64_t now, int budget) {
  int64_t frontier = lim_poll_locked(lim, d, now, budget);
  lim_commit_done(d, now, frontier, d->n_done > MAX_PEND / 2);
  lim_publish_window(d, d->last_limit, now);
}

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
      lim_overflow_ctx_init(d);
      d->leff = 1.0;
      d->win_start_ns = lim_now_ns(lim);
      d->win_busy0 =
          d->xd != NULL ? (int64_t)__atomic_load_n(&d->xd->busy_ns, __ATOMIC_RELAXED) : 0;
      __atomic_store_n(&lim->dev[dev], d, __ATOMIC_RELEASE);
    }
  }
  pthread_mutex_unlock(&lim->alloc_mu);
  if (lim == __atomic_load_n(&g_limiter, __ATOMIC_ACQUIRE)) lim_util_thread_start(lim);
  return d;
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
  lim->timed_streams = lim_timed_streams_from_env();
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
    lim_dev_release(lim, d);
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
      if (b->ctx == OVERFLOW_CTX) /* its own context's event, never pooled */
        lim->drv.cuEventDestroy(b->s);
      else if (d->ctx[b->ctx].used && d->ctx[b->ctx].gen == b->gen)
        lim_pool_put(lim, &d->ctx[b->ctx], b->s);
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

/* No limit applies: count the launch; drain leftovers only if a limit was active before. */
static void before_unlimited(vgpu_limiter_t *lim, int dev) {
  uint64_t n = __atomic_add_fetch(&lim->fast_launches[dev], 1, __ATOMIC_RELAXED);
  if ((n % FLUSH_EVERY) == 0) flush_fast_launches(lim, dev);
  dev_state_t *d = __atomic_load_n(&lim->dev[dev], __ATOMIC_ACQUIRE);
  if (d != NULL && __atomic_load_n(&d->n_inflight, __ATOMIC_RELAXED) > 0 &&
      pthread_mutex_trylock(&d->mu) == 0) {
    d->last_limit = 0;
    poll_commit(lim, d, lim_now_ns(lim), -1);
    pthread_mutex_unlock(&d->mu);
  }
}

/*
 * Holds the caller until the container's budget admits the launch (under d->mu, released while
 * sleeping). While waiting with work in flight it records heartbeats (another context's slice in
 * the wait is then not charged) and polls completions. Returns the limit that applies after the
 * wait (0: the limit went away meanwhile); *now is the time the wait ended.
 */
static int gate_wait(vgpu_limiter_t *lim, dev_state_t *d, int dev, CUcontext ctx,
                     CUstream stream, int limit, int64_t *now) {
  for (;;) {
    int64_t ahead = lim_bucket_ahead_ns(d, *now);
    int room = d->n_inflight < MAX_PEND - 1 && lim_stream_may_run_ahead(d, ctx, stream, *now);
    if (room && !d->blocked && ahead <= lim_burst_ns(d, *now)) return limit;
    if (room && d->blocked && ahead <= 0) {
      d->blocked = 0;
      return limit;
    }
    if (room) d->blocked = 1;
    pthread_mutex_unlock(&d->mu);
    int64_t wait = room ? ahead : SLEEP_CHUNK_NS / 4;
    int64_t chunk = d->n_inflight > 0 ? HB_PERIOD_NS : SLEEP_CHUNK_NS;
    lim->drv.sleep_ns(lim->drv.clock_ctx, lim_i64max(1000, lim_i64min(wait, chunk)));
    *now = lim_now_ns(lim);
    pthread_mutex_lock(&d->mu);
    if (d->n_inflight > 0) {
      /* Every context with work in flight (they time-slice: each one's off-GPU stretches are
       * found by its own heartbeats, recorded while it is current). */
      capture_guard_t g = lim_relax_capture(lim);
      for (int ci = 0; ci < MAX_CTX; ci++) {
        ctx_t *c = &d->ctx[ci];
        /* A crowded context's heartbeats would queue behind its own kernels (limiter_crowd.c). */
        if (!c->used || c->bad || !lim_ctx_busy(c) || c->untimed_n > 0) continue;
        if (c->ctx == ctx) {
          lim_heartbeat(lim, c, *now, HB_PERIOD_NS);
        } else if (lim->drv.cuCtxPushCurrent != NULL && lim->drv.cuCtxPopCurrent != NULL &&
                   lim->drv.cuCtxPushCurrent(c->ctx) == CUDA_SUCCESS) {
          lim_heartbeat(lim, c, *now, HB_PERIOD_NS);
          CUcontext popped;
          lim->drv.cuCtxPopCurrent(&popped);
        }
      }
      lim_restore_capture(lim, g);
    }
    d->draining = 1; /* the end of the busy stretch is what is charged now */
    poll_commit(lim, d, *now, CROWD_POLL_QUERIES);
    d->draining = 0;
    limit = effective_limit(lim, dev);
    if (limit == 0) return 0;
    lim_update_leff(d, limit);
  }
}

/* Counts an admitted launch and the time it waited, locally and in the region. Under d->mu. */
static void count_launch(dev_state_t *d, int64_t waited, int delayed) {
  d->launches_total++;
  if (delayed) {
    d->launches_delayed++;
    d->throttled_ns += waited;
    if (d->xd != NULL) {
      __atomic_fetch_add(&d->xd->launches_delayed, 1, __ATOMIC_RELAXED);
      __atomic_fetch_add(&d->xd->throttled_ns, (uint64_t)waited, __ATOMIC_RELAXED);
    }
  }
  if (d->xd != NULL) __atomic_fetch_add(&d->xd->launches_total, 1, __ATOMIC_RELAXED);
}

/* Arms this thread's bracket for the launch: S recorded on the launch's stream, right before the
 * launch. Takes d->mu itself (bracket_new may disarm a bracket of another device first). */
static void arm_bracket(vgpu_limiter_t *lim, dev_state_t *d, int dev, CUcontext ctx,
                        CUstream stream, int64_t now) {
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
    /* Relaxed capture mode for the limiter's own driver calls only: a crowded launch of a known
     * context makes none (two exchanges: ~2 % of a host-bound loop, limiter_streams_test). */
    capture_guard_t g = {CU_STREAM_CAPTURE_MODE_RELAXED, 0};
    int ci = lim_ctx_find(d, ctx);
    if (ci < 0) g = lim_relax_capture(lim);
    if (ci < 0) ci = lim_ctx_slot(lim, d, ctx);
    if (ci < 0) { /* beyond the context table: its own S/E pair (limiter_crowd.c) */
      b->s = lim_event_pair_create(lim);
      b->s_rec = lim_now_ns(lim);
      if (b->s != NULL && lim->drv.cuEventRecord(b->s, stream) != CUDA_SUCCESS) {
        lim->drv.cuEventDestroy(b->s);
        b->s = NULL;
      }
      b->octx = ctx;
      b->ctx = OVERFLOW_CTX;
      b->gen = d->ctx[OVERFLOW_CTX].gen;
      b->sq = OVERFLOW_SQ;
    } else {
      ctx_t *c = &d->ctx[ci];
      int si = lim_stream_slot(d, c, stream);
      if (si < 0 && lim_ctx_crowded(lim, d, c, si, now)) si = OVERFLOW_SQ; /* no slot left */
      int crowded = si >= 0 && lim_ctx_crowded(lim, d, c, si, now);
      if (!crowded && !g.swapped) g = lim_relax_capture(lim);
      /* A reference event is a timing event on the internal stream, whose hardware queue an
       * application stream shares when crowded: only timed launches need one. */
      if (!crowded) lim_ctx_calibrate(lim, c, now);
      if (crowded) {
        /* More busy streams than hardware queues: no timing events (limiter_crowd.c). */
        b->untimed = 1;
        b->measured = 1;
        d->crowded_until_ns = now + CROWD_WINDOW_NS;
        b->s_rec = lim_now_ns(lim);
      } else if (c->cur_ref >= 0 && si >= 0) {
        CUevent s = lim_pool_get(lim, c);
        int64_t s_rec = lim_now_ns(lim);
        if (s != NULL && lim->drv.cuEventRecord(s, stream) == CUDA_SUCCESS) {
          b->s = s;
          b->s_rec = s_rec;
          b->measured = 1;
          b->cold = !lim_ctx_busy(c); /* its context idle: a late S is a switch onto it */
        } else if (s != NULL) {
          lim_pool_put(lim, c, s);
        }
      }
      b->ctx = ci;
      b->gen = c->gen;
      b->sq = si;
      if (si >= 0) lim_crowd_note_launch(c, si, now);
    }
    lim_restore_capture(lim, g);
  }
  pthread_mutex_unlock(&d->mu);
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
    before_unlimited(lim, dev);
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
  int64_t t0 = lim_now_ns(lim), now = t0;
  CUcontext ctx = NULL;
  if (lim->drv.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) ctx = NULL;
  pthread_mutex_lock(&d->mu);
  lim_update_leff(d, limit);
  if (now - d->last_poll_ns >= POLL_EVERY_NS || d->n_inflight > MAX_PEND * 3 / 4)
    poll_commit(lim, d, now, d->n_inflight > MAX_PEND * 3 / 4 ? -1 : CROWD_POLL_QUERIES);
  limit = gate_wait(lim, d, dev, ctx, stream, limit, &now);
  count_launch(d, now - t0, now != t0);
  pthread_mutex_unlock(&d->mu);
  if (limit != 0) arm_bracket(lim, d, dev, ctx, stream, now);
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
  int64_t now = lim_now_ns(lim);
  pthread_mutex_lock(&d->mu);
  ctx_t *c = b->ctx >= 0 && d->ctx[b->ctx].used && d->ctx[b->ctx].gen == b->gen
                 ? &d->ctx[b->ctx]
                 : NULL;
  stream_q_t *q = c != NULL && b->sq >= 0 && c->sq[b->sq].used &&
                          (b->sq == OVERFLOW_SQ || c->sq[b->sq].stream == stream)
                      ? &c->sq[b->sq]
                      : NULL;
  if (b->untimed && c != NULL && q != NULL && lim_crowd_defer(d, c, q, b->s_rec)) {
    memset(b, 0, sizeof(*b)); /* covered by the stream's next E (limiter_crowd.c) */
    tls_open--;
    pthread_mutex_unlock(&d->mu);
    return;
  }
  int idx = lim_ent_alloc(d);
  if (idx < 0) {
    /* No room (only when MAX_PEND launches are in flight from racing threads): charge blind. */
    if (b->s != NULL && b->ctx >= 0 && d->ctx[b->ctx].gen == b->gen)
      lim_pool_put(lim, &d->ctx[b->ctx], b->s);
    pend_t blind;
    memset(&blind, 0, sizeof(blind));
    blind.est_ns = d->est_dev_ns > 0 ? d->est_dev_ns : DEFAULT_EST_NS;
    pend_t *one[1] = {&blind};
    commit_batch_t cb = {one, 1};
    int64_t ch = lim_bucket_charge(d, now, d->leff, &cb);
    d->busy_ns += ch;
    if (d->xd != NULL) __atomic_fetch_add(&d->xd->busy_ns, (uint64_t)ch, __ATOMIC_RELAXED);
    memset(b, 0, sizeof(*b));
    tls_open--;
    pthread_mutex_unlock(&d->mu);
    return;
  }
  pend_t *p = &d->ent[idx];
  int64_t est = q != NULL && q->est_ns > 0 ? q->est_ns
                : d->est_dev_ns > 0         ? d->est_dev_ns
                                            : DEFAULT_EST_NS;
  p->est_ns = est;
  p->ctx = (int16_t)(c != NULL ? b->ctx : 0);
  p->sq = (int16_t)(q != NULL ? b->sq : -1);
  if (c != NULL && q != NULL && b->ctx == OVERFLOW_CTX) {
    capture_guard_t g = lim_relax_capture(lim);
    lim_overflow_after(lim, d, p, b->s, b->s_rec, b->octx, stream);
    lim_restore_capture(lim, g);
  } else if (c != NULL && q != NULL && b->untimed) {
    capture_guard_t g = lim_relax_capture(lim);
    if (lim_crowd_record(lim, d, c, q, p, stream, b->s_rec, now)) est = 0;
    lim_restore_capture(lim, g);
  } else if (c != NULL && q != NULL && b->measured && c->cur_ref >= 0 &&
             c->refs[c->cur_ref].valid) {
    capture_guard_t g = lim_relax_capture(lim);
    CUevent e = lim_pool_get(lim, c);
    int64_t e_rec = lim_now_ns(lim);
    if (e != NULL && lim->drv.cuEventRecord(e, stream) == CUDA_SUCCESS) {
      p->s = b->s;
      p->s_rec = b->s_rec;
      p->e_rec = e_rec;
      p->e = e;
      p->ref = (int8_t)c->cur_ref;
      c->refs[c->cur_ref].users++;
      p->measured = 1;
      p->cold = (int8_t)b->cold;
    } else {
      lim_pool_put(lim, c, e);
      lim_pool_put(lim, c, b->s);
    }
    /* Right after the launch: if another context takes the GPU before this launch runs, the
     * heartbeat completes late and the gap is not charged. */
    if (p->measured) lim_heartbeat(lim, c, e_rec, HB_AFTER_LAUNCH_NS);
    lim_restore_capture(lim, g);
  } else if (c != NULL) {
    lim_pool_put(lim, c, b->s);
  }
  if (q != NULL && (p->measured || p->pair)) {
    lim_sq_append(d, q, idx);
    lim_sq_active(c, (int)(q - c->sq), 1);
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
  poll_commit(lim, d, lim_now_ns(lim), -1);
  pthread_mutex_unlock(&d->mu);
  vgpu_limiter_publish_util(lim, dev);
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
  out->switches = d->switches;
  out->switch_ns = d->switch_ns;
  out->switch_cost_ns = lim_switch_cost(d);
  out->long_runs = d->long_runs;
  out->long_running = d->long_running;
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
  lim->util_thread = 0; /* threads do not survive fork: the next limited launch starts one */
  pthread_mutex_init(&lim->alloc_mu, NULL);
}

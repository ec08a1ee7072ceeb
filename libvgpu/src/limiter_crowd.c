/*
 * limiter_crowd.c — timing launches of a context with more busy streams than the GPU has
 * hardware queues (issue 35), without adding dependencies between its streams.
 *
 * Why: the driver maps streams onto CUDA_DEVICE_MAX_CONNECTIONS hardware queues (default 8)
 * round-robin, and work in one queue is dispatched in order. A timing event is written once
 * everything queued before it in its queue has run, and nothing queued after it starts before:
 * the S and E events that bracket every launch serialize all the streams that share a queue (on
 * an H100, 33 busy streams at a 90 % limit did 45 % of the unlimited work, libvgpu/README.md;
 * Kepler-era measurements show the same: kernels bracketed by events run only as many at once as
 * there are queues). The internal stream's heartbeats are timing events too, and a heartbeat
 * queued behind the application's kernels completes late although no other context ran.
 *
 * So while a context has more busy streams than can each have a queue of their own (the internal
 * stream takes one), its launches are timed without timing events: no S, and E is an event
 * created with CU_EVENT_DISABLE_TIMING (it completes when its stream's work is done and never
 * holds its queue). The launch's interval is [the launch call, the poll that saw E complete];
 * the union over the process's streams (limiter_bucket.c) is then the time the process had work
 * on the GPU, which is the device time it held: a GPU with queued work does not idle. The error
 * is on the charged side only: up to one poll period (100 us while the gate waits or launches
 * keep coming) at the end of each busy stretch, and the whole gap when nothing polls (the
 * application synchronizes without launching: it is charged until its next launch). No
 * heartbeats while untimed launches are in flight: another context's time slice in that stretch
 * is charged too (fails safe; containers of one context each are the common case and have no
 * heartbeats to lose here). Context switch samples come from timed launches only.
 *
 * The switch back to timing events happens once the busy streams fall to half the queues.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>

#include "limiter_internal.h"

int lim_timed_streams_from_env(void) {
  /* The driver reads the same variable: a tenant that sets it changes the queues the driver
   * really has, and either mode charges at least the device time held. */
  const char *e = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  long v = e != NULL ? strtol(e, NULL, 10) : HW_QUEUES_DEFAULT;
  if (v < 1 || v > HW_QUEUES_MAX) v = HW_QUEUES_DEFAULT;
  return (int)v - 1; /* the internal stream's queue */
}

int lim_ctx_crowded(const vgpu_limiter_t *lim, const dev_state_t *d, ctx_t *c, int si,
                    int64_t now) {
  if (now - c->crowd_swept_ns >= CROWD_SWEEP_NS) { /* streams idle past the window */
    /* Plus the wait a crowded burst's credit may bring at this limit (80 ms at 25 %): a stream
     * last launched on before the wait is still one of the busy ones. With 100 ms only, 128
     * streams at 25 % fell back to timing events after some waits (their S/E held the queues). */
    int64_t window = CROWD_WINDOW_NS + (int64_t)((double)CROWD_BURST_NS / (d->leff > 0 ? d->leff : 1));
    c->crowd_swept_ns = now;
    for (int i = 0; i < MAX_STREAMS; i++) {
      stream_q_t *q = &c->sq[i];
      if (q->busy && (!q->used || (q->count == 0 && q->uncov == 0 &&
                                   now - q->last_launch_ns >= window))) {
        q->busy = 0;
        c->n_busy--;
      }
    }
  }
  int busy = c->n_busy + (si >= 0 && si < MAX_STREAMS && !c->sq[si].busy);
  if (busy > lim->timed_streams) return 1;
  return c->untimed_n > 0 && 2 * busy > lim->timed_streams; /* hysteresis */
}

void lim_crowd_note_launch(ctx_t *c, int si, int64_t now) {
  stream_q_t *q = &c->sq[si];
  q->last_launch_ns = now;
  if (si < MAX_STREAMS && !q->busy) {
    q->busy = 1;
    c->n_busy++;
  }
}

CUevent lim_pool_get_nt(const vgpu_limiter_t *lim, ctx_t *c) {
  if (c->pool_nt_n > 0) return c->pool_nt[--c->pool_nt_n];
  CUevent ev = NULL;
  if (lim->drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return NULL;
  return ev;
}

void lim_pool_put_nt(const vgpu_limiter_t *lim, ctx_t *c, CUevent ev) {
  if (ev == NULL) return;
  if (c->pool_nt_n == c->pool_nt_cap) {
    int cap = c->pool_nt_cap ? c->pool_nt_cap * 2 : 64;
    CUevent *np = cap > MAX_PEND + 8 ? NULL : realloc(c->pool_nt, (size_t)cap * sizeof(*np));
    if (np == NULL) {
      lim->drv.cuEventDestroy(ev);
      return;
    }
    c->pool_nt = np;
    c->pool_nt_cap = cap;
  }
  c->pool_nt[c->pool_nt_n++] = ev;
}

/*
 * The gate's view of the untimed work in flight: the streams run side by side, so what it will
 * still hold is the longest stream's queue, not the sum over launches. Each stream keeps an
 * estimate of when its queued work ends (tail_est_ns: every launch adds the time one launch
 * holds its stream, from no earlier than its launch call), so the queue drains in the estimate as
 * time passes even when no E says so: with one E per stream and CROWD_COVER_NS, launches x
 * per-launch time counted every launch since the last E seen done (30 x 200 us at 128 streams:
 * the gate paused early). The time one launch holds its stream is measured from its completions
 * (from the later of its launch and the previous completion on the stream to the poll that saw
 * it, per launch covered: an upper bound, so the estimate follows the lower samples). An
 * estimate only paces admission; the bucket charges what was held. Launches raise it as they
 * come (O(1)); polls recompute it over the streams with launches in flight.
 */
static int64_t crowd_per_launch_ns(const dev_state_t *d, const stream_q_t *q) {
  return q->dur_ns > 0 ? q->dur_ns : d->est_dev_ns > 0 ? d->est_dev_ns : DEFAULT_EST_NS;
}

void lim_crowd_inflight_update(dev_state_t *d, int64_t now) {
  int64_t m = 0;
  for (int ci = 0; ci <= MAX_CTX; ci++) {
    const ctx_t *c = &d->ctx[ci];
    if (!c->used || c->untimed_n == 0) continue;
    for (int i = lim_sq_next(c, 0); i >= 0; i = i < MAX_STREAMS ? lim_sq_next(c, i + 1) : -1)
      if (c->sq[i].untimed > 0) m = lim_i64max(m, c->sq[i].tail_est_ns - now);
  }
  d->crowd_inflight_ns = m;
}

static void crowd_launched(dev_state_t *d, ctx_t *c, stream_q_t *q, int64_t launch_ns) {
  q->untimed++;
  c->untimed_n++;
  q->tail_est_ns = lim_i64max(q->tail_est_ns, launch_ns) + crowd_per_launch_ns(d, q);
  d->crowd_inflight_ns = lim_i64max(d->crowd_inflight_ns, q->tail_est_ns - launch_ns);
}

/*
 * At most one E in flight per stream: an untimed launch made while its stream's E is still in
 * flight gets no event. It is "uncovered" until the poll that sees that E done records the next
 * one, which covers every launch since (its interval starts at the first one's launch call, so
 * the union over the stream's entries is never shorter than the time the stream held the GPU).
 * Event records fall from one per launch to one per completion seen, and the entries, queries
 * and commits with them.
 */
int lim_crowd_defer(dev_state_t *d, ctx_t *c, stream_q_t *q, int64_t launch_ns) {
  if (q == &c->sq[OVERFLOW_SQ]) return 0;
  if (q->tail >= 0 && !d->ent[q->tail].untimed) return 0;
  /* No E in flight: this launch records one, unless the stream recorded one less than
   * CROWD_COVER_NS ago while the gate is not draining the process (lim_crowd_cover_due). */
  if (q->tail < 0 && lim_crowd_cover_due(d, c, q, launch_ns)) return 0;
  if (q->uncov++ == 0) q->uncov_first_ns = launch_ns;
  d->n_uncov++;
  crowd_launched(d, c, q, launch_ns);
  lim_sq_active(c, (int)(q - c->sq), 1); /* polls visit it: its cover is due later */
  return 1;
}

/*
 * Event records are what a crowded context's launches cost on the host (an untimed E per stream
 * and completion: 0.6-0.9 records and 0.8-1.1 queries per launch, ~2 us of a ~5 us launch loop;
 * limiter_streams_test: 128 host-bound streams at a 90 % limit did 61 % of their unlimited
 * work). While the process is busy, a stream's launches since its last E need no E of their own
 * yet: they hold the commit frontier at the first one's launch and are charged from there, so
 * nothing is charged less than it held; they only need one to find where the busy stretch ends.
 * A stream records at most one E per CROWD_COVER_NS (or per CROWD_COVER_PER_STREAM_NS x the busy
 * streams: the process records at most ~17 000 a second however many streams it has), except
 * while the gate waits (draining: the end of the stretch is what is charged) or once few streams
 * have work left.
 */
int lim_crowd_cover_due(const dev_state_t *d, const ctx_t *c, const stream_q_t *q, int64_t now) {
  int64_t period = lim_i64max(CROWD_COVER_NS, (int64_t)c->n_busy * CROWD_COVER_PER_STREAM_NS);
  return d->draining || q->last_cover_ns == 0 || now - q->last_cover_ns >= period;
}

/*
 * Queries cost host time too (~0.5-1 us each on a GPU): an untimed E is queried once its stream's
 * queue up to it may be half done (by the time one launch holds the stream), then every half of
 * that time (POLL_EVERY_NS at least). Its completion is seen at most half a launch late: at the
 * end of a busy stretch that is charged (fails safe), in its middle the other streams' union
 * covers it anyway.
 */
void lim_crowd_next_query(stream_q_t *q, int64_t now, int recorded) {
  int64_t half = q->dur_ns / 2;
  q->query_set_ns = now;
  if (recorded) /* the queue ahead of it (launches x per launch, or less by its estimated end;
                  * covers count launches long done): half of that */
    q->next_query_ns =
        now + lim_i64min((int64_t)q->untimed * half, lim_i64max(0, q->tail_est_ns - now) / 2);
  else
    q->next_query_ns = now + lim_i64max(POLL_EVERY_NS, half);
}

static CUevent crowd_event(const vgpu_limiter_t *lim, ctx_t *c, CUstream stream) {
  CUevent e = lim_pool_get_nt(lim, c);
  if (e != NULL && lim->drv.cuEventRecord(e, stream) != CUDA_SUCCESS) {
    lim_pool_put_nt(lim, c, e);
    e = NULL;
  }
  return e;
}

static void crowd_entry(pend_t *p, CUevent e, int64_t from, int n, int64_t now) {
  p->e = e;
  p->s_rec = p->s_host = from; /* the interval starts at the (first) launch call */
  p->e_rec = now;
  p->nlaunch = n;
  p->started = 1;
  p->measured = 1;
  p->untimed = 1;
  p->est_ns = 0; /* in lim_crowd_inflight_ns while in flight */
}

int lim_crowd_record(const vgpu_limiter_t *lim, dev_state_t *d, ctx_t *c, stream_q_t *q, pend_t *p,
                     CUstream stream, int64_t launch_ns, int64_t now) {
  CUevent e = crowd_event(lim, c, stream);
  if (e == NULL) return 0;
  int64_t from = launch_ns;
  int n = 1;
  if (q->uncov > 0) { /* an earlier cover failed: this E covers them too (counted already) */
    from = lim_i64min(from, q->uncov_first_ns);
    n += q->uncov;
    d->n_uncov -= q->uncov;
    q->uncov = 0;
  }
  crowd_entry(p, e, from, n, now);
  crowd_launched(d, c, q, launch_ns);
  lim_crowd_next_query(q, now, 1);
  q->last_cover_ns = now;
  return 1;
}

int lim_crowd_cover(vgpu_limiter_t *lim, dev_state_t *d, int ci, int si, int64_t now,
                    CUcontext *cur, int *cur_known, int eager) {
  ctx_t *c = &d->ctx[ci];
  stream_q_t *q = &c->sq[si];
  if (q->uncov == 0 || c->bad || ci == OVERFLOW_CTX || si == OVERFLOW_SQ) return 0;
  if (!eager && !lim_crowd_cover_due(d, c, q, now)) return 0; /* in the frontier until due */
  if (!*cur_known) {
    if (lim->drv.cuCtxGetCurrent(cur) != CUDA_SUCCESS) *cur = NULL;
    *cur_known = 1;
  }
  int pushed = 0;
  if (*cur != c->ctx) { /* the poll runs in any thread: the event belongs to c */
    if (lim->drv.cuCtxPushCurrent == NULL || lim->drv.cuCtxPopCurrent == NULL ||
        lim->drv.cuCtxPushCurrent(c->ctx) != CUDA_SUCCESS)
      return 0; /* stays uncovered: in the frontier and the gate until a launch covers it */
    pushed = 1;
  }
  int idx = lim_ent_alloc(d), ok = 0;
  if (idx >= 0) {
    CUevent e = crowd_event(lim, c, q->stream);
    if (e != NULL) {
      pend_t *p = &d->ent[idx];
      p->ctx = (int16_t)ci;
      p->sq = (int16_t)si;
      crowd_entry(p, e, q->uncov_first_ns, q->uncov, now);
      lim_crowd_next_query(q, now, 1);
      q->last_cover_ns = now;
      d->n_uncov -= q->uncov;
      q->uncov = 0;
      lim_sq_append(d, q, idx);
      ok = 1;
    } else {
      lim_ent_free(d, idx);
    }
  }
  if (pushed) {
    CUcontext popped;
    lim->drv.cuCtxPopCurrent(&popped);
  }
  return ok;
}

void lim_crowd_done(stream_q_t *q, const pend_t *p) {
  int n = p->nlaunch > 0 ? p->nlaunch : 1;
  q->untimed = q->untimed > n ? q->untimed - n : 0;
  if (!p->measured) return;
  int64_t held = (p->e_host - lim_i64max(p->s_host, q->last_end_ns)) / n;
  q->last_end_ns = lim_i64max(q->last_end_ns, p->e_host);
  if (held < 1000) held = 1000;
  /* Falls at once, rises slowly: "held" is an upper bound of the run (the poll that saw the end
   * may come late), so the lower samples are the better ones. */
  if (q->dur_ns == 0 || held < q->dur_ns)
    q->dur_ns = held;
  else
    q->dur_ns += (held - q->dur_ns) / 16;
}

int64_t lim_burst_ns(const dev_state_t *d, int64_t now) {
  if (now >= d->crowded_until_ns || d->leff <= 0) return BURST_NS;
  return lim_i64max(BURST_NS, (int64_t)((double)CROWD_BURST_NS / d->leff));
}

/* ---- contexts beyond the table (issue 35, route 17) --------------------------------------- */

/*
 * A launch of a context the table has no slot for gets its own pair of timing events, created in
 * that context (the current one) for this launch and destroyed once it is done, in one extra slot
 * (ctx[OVERFLOW_CTX], polled in launch order). It is charged E - S, the GPU time between its start
 * and its end, as an estimate from the moment it is seen done: not merged with the process's
 * other launches (its context time-slices with them; on streams of its own context running side
 * by side it is charged their sum: more, never less). Nothing is pooled there: the slot serves
 * any number of contexts, and an event can be recorded only in its own context. When such a
 * context is destroyed, its pending launches are charged from their launch up to then.
 */
CUevent lim_event_pair_create(const vgpu_limiter_t *lim) {
  CUevent ev = NULL;
  if (lim->drv.cuEventCreate(&ev, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return NULL;
  return ev;
}

void lim_overflow_after(const vgpu_limiter_t *lim, dev_state_t *d, pend_t *p, CUevent s,
                        int64_t s_rec, CUcontext octx, CUstream stream) {
  (void)d;
  CUevent e = lim_event_pair_create(lim);
  if (e != NULL && lim->drv.cuEventRecord(e, stream) != CUDA_SUCCESS) {
    lim->drv.cuEventDestroy(e);
    e = NULL;
  }
  p->pair = 1;
  p->s = s; /* NULL when it could not be recorded: charged launch to done */
  p->e = e;
  p->s_rec = s_rec;
  p->octx = octx;
  if (e == NULL && s != NULL) { /* nothing to wait for: charged its estimate now */
    lim->drv.cuEventDestroy(s);
    p->s = NULL;
  }
}

void lim_overflow_finish(const vgpu_limiter_t *lim, dev_state_t *d, pend_t *p, int64_t now, int ok) {
  int64_t cost = now - p->s_rec; /* the pair broke (its context went away): launch to now */
  float ms = 0;
  if (ok && p->s != NULL && p->e != NULL &&
      lim->drv.cuEventElapsedTime(&ms, p->s, p->e) == CUDA_SUCCESS && ms >= 0)
    cost = (int64_t)((double)ms * 1e6);
  if (p->s != NULL) lim->drv.cuEventDestroy(p->s);
  if (p->e != NULL) lim->drv.cuEventDestroy(p->e);
  p->s = p->e = NULL;
  if (cost < 1000) cost = 1000;
  d->inflight_est_ns += cost - p->est_ns;
  p->est_ns = cost; /* charged as an estimate (unmeasured) */
  p->measured = 0;
  stream_q_t *q = &d->ctx[OVERFLOW_CTX].sq[OVERFLOW_SQ];
  q->est_ns = q->est_ns == 0 ? cost : q->est_ns + (cost - q->est_ns) / 4;
}

void lim_overflow_ctx_init(dev_state_t *d) {
  ctx_t *c = &d->ctx[OVERFLOW_CTX];
  c->used = 1;
  c->cur_ref = -1;
  for (int s = 0; s <= MAX_STREAMS; s++) c->sq[s].head = c->sq[s].tail = -1;
  c->sq[OVERFLOW_SQ].used = 1;
}

void lim_dev_release(const vgpu_limiter_t *lim, dev_state_t *d) {
  for (int ci = 0; ci <= MAX_CTX; ci++) {
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
    for (int k = 0; k < c->pool_nt_n; k++) lim->drv.cuEventDestroy(c->pool_nt[k]);
    for (int k = 0; k < MAX_REFS; k++)
      if (c->refs[k].ev) lim->drv.cuEventDestroy(c->refs[k].ev);
    if (c->internal) lim->drv.cuStreamDestroy(c->internal);
    free(c->pool);
    free(c->pool_nt);
    free(c->foreign);
  }
}

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

int lim_ctx_crowded(const vgpu_limiter_t *lim, const ctx_t *c, int si, int64_t now) {
  int busy = 0;
  for (int i = 0; i < MAX_STREAMS; i++) {
    const stream_q_t *q = &c->sq[i];
    if (q->used && (q->count > 0 || i == si || now - q->last_launch_ns < CROWD_WINDOW_NS)) busy++;
  }
  if (busy > lim->timed_streams) return 1;
  return c->untimed_n > 0 && 2 * busy > lim->timed_streams; /* hysteresis */
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
 * still hold is the longest stream's queue (launches x the time one holds its stream), not the
 * sum over launches. The time one holds its stream is measured from its completions (from the
 * later of its launch and the previous completion on the stream to the poll that saw it: an
 * upper bound, so the estimate follows the lower samples). An estimate only paces admission; the
 * bucket charges what was held.
 */
int64_t lim_crowd_inflight_ns(const dev_state_t *d) {
  int64_t m = 0;
  for (int ci = 0; ci <= MAX_CTX; ci++) {
    const ctx_t *c = &d->ctx[ci];
    if (!c->used || c->untimed_n == 0) continue;
    for (int i = 0; i <= MAX_STREAMS; i++) {
      const stream_q_t *q = &c->sq[i];
      if (!q->used || q->untimed == 0) continue;
      int64_t per = q->dur_ns > 0 ? q->dur_ns : d->est_dev_ns > 0 ? d->est_dev_ns : DEFAULT_EST_NS;
      m = lim_i64max(m, (int64_t)q->untimed * per);
    }
  }
  return m;
}

void lim_crowd_done(stream_q_t *q, const pend_t *p) {
  if (q->untimed > 0) q->untimed--;
  if (!p->measured) return;
  int64_t held = p->e_host - lim_i64max(p->s_host, q->last_end_ns);
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

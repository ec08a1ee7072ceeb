/*
 * limiter_measure.c — what a launch cost on the GPU. Each limited launch is bracketed by two
 * timing events (S before, E after) on its own stream. E done => the launch's GPU interval [S, E],
 * mapped to CLOCK_MONOTONIC through a per-context reference event (map_event: every event's
 * record time bounds the reference's host time from below). Intervals are committed in start
 * order, and only up to the start of the earliest still-running launch, so the union over this
 * process's streams is exact. Residency: heartbeat events on an idle internal stream complete
 * only while the context owns the GPU; a late one marks another context's time slice, which is
 * not charged (lim_foreign_overlap), and the switch back onto this context that ended it, which
 * is (its cost as measured on this device: limiter_switch.c, d->switch_owed_ns).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "limiter_internal.h"

/* ---- events, contexts, streams ----------------------------------------------------------- */

capture_guard_t lim_relax_capture(const vgpu_limiter_t *lim) {
  capture_guard_t g = {CU_STREAM_CAPTURE_MODE_RELAXED, 0};
  if (lim->drv.cuThreadExchangeStreamCaptureMode != NULL &&
      lim->drv.cuThreadExchangeStreamCaptureMode(&g.saved) == CUDA_SUCCESS)
    g.swapped = 1;
  return g;
}

void lim_restore_capture(const vgpu_limiter_t *lim, capture_guard_t g) {
  if (g.swapped) lim->drv.cuThreadExchangeStreamCaptureMode(&g.saved);
}

CUevent lim_pool_get(const vgpu_limiter_t *lim, ctx_t *c) {
  if (c->pool_n > 0) return c->pool[--c->pool_n];
  CUevent ev = NULL;
  if (lim->drv.cuEventCreate(&ev, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return NULL;
  return ev;
}

void lim_pool_put(const vgpu_limiter_t *lim, ctx_t *c, CUevent ev) {
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
void lim_ctx_drop(dev_state_t *d, int ci) {
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
  free(c->pool_nt);
  free(c->foreign);
  unsigned gen = c->gen + 1;
  memset(c, 0, sizeof(*c));
  c->gen = gen;
}

int lim_ctx_find(const dev_state_t *d, CUcontext ctx) {
  if (ctx == NULL) return -1;
  for (int i = 0; i < MAX_CTX; i++)
    if (d->ctx[i].used && !d->ctx[i].bad && d->ctx[i].ctx == ctx) return i;
  return -1;
}

int lim_ctx_slot(const vgpu_limiter_t *lim, dev_state_t *d, CUcontext ctx) {
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
  c->foreign = calloc(MAX_FOREIGN, sizeof(*c->foreign));
  for (int s = 0; s <= MAX_STREAMS; s++) c->sq[s].head = c->sq[s].tail = -1;
  c->sq[OVERFLOW_SQ].used = 1; /* never matched by a stream (lim_stream_slot stops before it) */
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
void lim_ctx_calibrate(const vgpu_limiter_t *lim, ctx_t *c, int64_t now) {
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
  int64_t t0 = lim_now_ns(lim);
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

int lim_ctx_busy(const ctx_t *c) {
  for (int w = 0; w < SQ_WORDS; w++)
    if (c->act[w] != 0) return 1;
  return 0;
}

int lim_stream_slot(dev_state_t *d, ctx_t *c, CUstream stream) {
  int found = lim_stream_find(c, stream);
  if (found >= 0) {
    c->sq[found].last_use = ++d->stream_clock;
    return found;
  }
  int victim = -1;
  uint64_t oldest = UINT64_MAX;
  for (int i = 0; i < MAX_STREAMS; i++) {
    stream_q_t *q = &c->sq[i];
    if (!q->used) {
      victim = i;
      break;
    }
    if (q->count == 0 && q->uncov == 0 && q->last_use < oldest) {
      victim = i;
      oldest = q->last_use;
    }
  }
  if (victim < 0) return -1;
  stream_q_t *q = &c->sq[victim];
  int evicted = q->used;
  if (q->busy) c->n_busy--;
  memset(q, 0, sizeof(*q));
  q->used = 1;
  q->stream = stream;
  q->head = q->tail = -1;
  q->last_use = ++d->stream_clock;
  if (evicted) { /* the old stream's bucket still points here: rebuild (past MAX_STREAMS only) */
    memset(c->sidx, 0, sizeof(c->sidx));
    for (int i = 0; i < MAX_STREAMS; i++)
      if (c->sq[i].used) lim_sidx_insert(c, i);
  } else {
    lim_sidx_insert(c, victim);
  }
  return victim;
}

/*
 * Guards against a wrong estimate letting a queue run ahead: a stream whose launches were never
 * measured keeps one launch in flight, and a stream whose running launch already took far longer
 * than its estimate gets no more until it completes (the estimate then catches up).
 */
int lim_stream_may_run_ahead(const dev_state_t *d, CUcontext ctx, CUstream stream, int64_t now) {
  if (ctx == NULL) return 1;
  for (int ci = 0; ci < MAX_CTX; ci++) {
    const ctx_t *c = &d->ctx[ci];
    if (!c->used || c->ctx != ctx) continue;
    int si = lim_stream_find(c, stream);
    if (si >= 0) {
      const stream_q_t *q = &c->sq[si];
      if (q->count == 0 || q->head < 0) return 1;
      int64_t est = q->est_ns > 0 ? q->est_ns : d->est_dev_ns;
      if (est <= 0) return 0;
      const pend_t *h = &d->ent[q->head];
      if (!h->started || h->untimed) return 1; /* untimed: its start is the launch call */
      /* Time the launch really ran: another context's time slices (known ones, and the one in
       * progress if a heartbeat is overdue now) do not make its estimate wrong. Counting them
       * starved a short-kernel container beside one running seconds-long kernels. */
      int64_t ran = now - h->s_host - lim_foreign_overlap(c, h->s_host, now);
      if (c->hb_n > 0) {
        int64_t since = c->hb[c->hb_head].rec_ns;
        if (now - since > HB_GAP_NS) ran -= now - lim_i64max(since, h->s_host);
      }
      return ran <= 2 * est + OVERDUE_NS;
    }
    return 1;
  }
  return 1;
}

/* ---- residency heartbeats ------------------------------------------------------------- */

/* Records the off-GPU stretch [a, b); returns 1 when it is a new one (one more switch back onto
 * this context), 0 when it extends the previous one or cannot be remembered. */
static int foreign_add(ctx_t *c, int64_t a, int64_t b) {
  if (c->foreign == NULL) return 0; /* no memory: stretches are charged (fails safe) */
  if (c->foreign_n > 0) {
    struct foreign_s *last = &c->foreign[(c->foreign_head + c->foreign_n - 1) % MAX_FOREIGN];
    if (a <= last->b) { /* heartbeats queued behind one gap: extend it */
      if (b > last->b) {
        c->foreign_total += b - last->b;
        last->b = b;
      }
      return 0;
    }
  }
  if (c->foreign_n == MAX_FOREIGN) { /* the oldest is older than any launch still measured */
    c->foreign_head = (c->foreign_head + 1) % MAX_FOREIGN;
    c->foreign_n--;
  }
  struct foreign_s *f = &c->foreign[(c->foreign_head + c->foreign_n) % MAX_FOREIGN];
  f->a = a;
  f->b = b;
  f->cum = c->foreign_total;
  c->foreign_total += b - a;
  c->foreign_n++;
  return 1;
}

void lim_heartbeat(const vgpu_limiter_t *lim, ctx_t *c, int64_t now, int64_t min_period) {
  if (c->cur_ref < 0 || c->hb_n == MAX_HB || now - c->last_hb_ns < min_period) return;
  CUevent ev = lim_pool_get(lim, c);
  if (ev == NULL) return;
  int64_t t = lim_now_ns(lim);
  if (lim->drv.cuEventRecord(ev, c->internal) != CUDA_SUCCESS) {
    lim_pool_put(lim, c, ev);
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

static void heartbeats_poll(const vgpu_limiter_t *lim, dev_state_t *d, ctx_t *c) {
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
        /* The stretch ended with a switch back onto this context: this context asked for the
         * GPU, so it pays for that switch (its measured cost; a stretch shorter than that held
         * no more than itself). The stretch itself stays uncharged (another context's slice). */
        if (foreign_add(c, a, g)) lim_switch_owe(d, g - a, g);
      } else if (ok) {
        c->last_prompt_ns = g;
      }
    }
    c->refs[c->hb[i].ref].users--;
    lim_pool_put(lim, c, c->hb[i].ev);
    c->hb_head = (c->hb_head + 1) % MAX_HB;
    c->hb_n--;
  }
}

/* A context is gone: its pending launches are charged at their estimate, its slot freed. */
void vgpu_limiter_forget_context(vgpu_limiter_t *lim, CUcontext ctx) {
  if (lim == NULL) return;
  for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
    dev_state_t *d = __atomic_load_n(&lim->dev[i], __ATOMIC_ACQUIRE);
    if (d == NULL) continue;
    pthread_mutex_lock(&d->mu);
    int64_t now = lim_now_ns(lim);
    /* Its launches beyond the table: their events went with it (never queried or destroyed
     * again); charged up to now (finish_entry). */
    for (int k = d->ctx[OVERFLOW_CTX].sq[OVERFLOW_SQ].head; k >= 0; k = d->ent[k].next)
      if (d->ent[k].octx == ctx) d->ent[k].s = d->ent[k].e = NULL;
    for (int ci = 0; ci < MAX_CTX; ci++) {
      if (!d->ctx[ci].used || d->ctx[ci].ctx != ctx) continue;
      /* Pending launches of the context: move them to the done list as unmeasured. */
      for (int si = 0; si <= MAX_STREAMS; si++) {
        stream_q_t *q = &d->ctx[ci].sq[si];
        if (q->used && q->uncov > 0) { /* uncovered untimed launches: up to now */
          int u = lim_ent_alloc(d);
          pend_t one;
          memset(&one, 0, sizeof(one));
          pend_t *p = u >= 0 ? &d->ent[u] : &one;
          p->ctx = (int16_t)ci;
          p->sq = -1;
          p->s_host = p->s_rec = q->uncov_first_ns;
          p->e_host = now;
          p->measured = p->untimed = 1;
          p->nlaunch = q->uncov;
          p->done = 1;
          if (u >= 0) {
            d->done_idx[d->n_done++] = u;
          } else { /* no entry left: charged here, never dropped */
            commit_batch_t cb = {&p, 1};
            int64_t ch = lim_bucket_charge(d, now, d->leff > 0 ? d->leff : 1.0, &cb);
            d->busy_ns += ch;
            if (d->xd != NULL) __atomic_fetch_add(&d->xd->busy_ns, (uint64_t)ch, __ATOMIC_RELAXED);
          }
          d->n_uncov -= q->uncov;
          q->uncov = 0;
        }
        while (q->used && q->head >= 0) {
          int idx = q->head;
          q->head = d->ent[idx].next;
          pend_t *p = &d->ent[idx];
          p->s = p->e = NULL;
          /* An untimed one ran from its launch call: charged up to now, not its estimate (0). */
          p->measured = p->untimed && p->started;
          p->e_host = now;
          p->done = 1;
          if (p->long_run) d->long_running--;
          p->long_run = 0;
          d->done_idx[d->n_done++] = idx;
        }
      }
      lim_ctx_drop(d, ci);
    }
    pthread_mutex_unlock(&d->mu);
  }
}

/* ---- completions ------------------------------------------------------------------------- */

/*
 * A launch made while nothing of its context was in flight: if its start event completed late,
 * another context held the GPU and a switch brought this one on. The wait is an off-GPU stretch
 * (merged with a heartbeat's stretch that saw the same switch, so charged once); no heartbeat
 * was pending to reveal it otherwise. The other context may be this process's own: two contexts
 * taking turns, each launch queued behind the other's kernel. Only launches made while nothing
 * of the whole process was in flight used to count, so the switch onto a context whose sibling
 * had work in flight was charged to nobody (sm_throttle switch at 1000 us switches: ~1 pp of
 * device time, 4 % of what the process used, 2.2 pp on a loaded runner).
 */
static void cold_start_seen(dev_state_t *d, ctx_t *c, const pend_t *p) {
  int64_t late = p->s_host - p->s_rec;
  if (!p->cold || late <= HB_GAP_NS) return;
  if (foreign_add(c, p->s_rec, p->s_host)) lim_switch_owe(d, late, p->s_host);
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

/* Entry done: derive its host interval, recycle its events, queue it for commit. */
static void finish_entry(vgpu_limiter_t *lim, dev_state_t *d, int idx, int64_t now, int ok) {
  pend_t *p = &d->ent[idx];
  ctx_t *c = &d->ctx[p->ctx];
  if (p->long_run) d->long_running--; /* every kind of entry below */
  p->long_run = 0;
  if (p->pair) { /* a context beyond the table (limiter_crowd.c) */
    lim_overflow_finish(lim, d, p, now, ok);
    p->done = 1;
    d->done_idx[d->n_done++] = idx;
    return;
  }
  if (p->untimed) {
    /* Completed by the time this poll saw it (limiter_crowd.c); an event that broke (its context
     * went away) is charged up to now: never less than the launch held. */
    (void)ok;
    p->e_host = now;
    p->s_host = lim_i64min(p->s_host, now);
    c->untimed_n -= p->nlaunch > 0 ? p->nlaunch : 1;
    if (c->untimed_n < 0) c->untimed_n = 0;
    if (p->sq >= 0) lim_crowd_done(&c->sq[p->sq], p);
    lim_pool_put_nt(lim, c, p->e);
    p->e = NULL;
    p->done = 1;
    d->done_idx[d->n_done++] = idx;
    return;
  }
  if (ok && p->measured && p->ref >= 0 && c->refs[p->ref].valid) {
    int good = 1;
    int64_t s = p->started ? p->s_host : map_event(lim, c, p->ref, p->s, p->s_rec, &good);
    int64_t e = map_event(lim, c, p->ref, p->e, p->e_rec, &good);
    if (good) {
      e = lim_i64min(e, now);
      s = lim_i64min(s, e);
      p->s_host = s;
      p->e_host = e;
      if (!p->started) cold_start_seen(d, c, p);
    } else {
      p->measured = 0;
    }
  } else {
    p->measured = 0;
  }
  if (p->ref >= 0) c->refs[p->ref].users--;
  lim_pool_put(lim, c, p->s);
  lim_pool_put(lim, c, p->e);
  p->s = p->e = NULL;
  p->done = 1;
  d->done_idx[d->n_done++] = idx;
}

/* The frontier's bound from a stream the poll did not query (or could not cover). */
static int64_t sq_frontier(const dev_state_t *d, const stream_q_t *q) {
  int64_t f = q->uncov > 0 ? q->uncov_first_ns : INT64_MAX;
  if (q->head >= 0 && d->ent[q->head].started)
    f = lim_i64min(f, lim_i64max(d->ent[q->head].s_host, d->ent[q->head].run_mark));
  return f;
}

/* Queries the stream's entries in FIFO order and finishes the completed ones; *budget (if >= 0)
 * drops by one for an event found still running. Returns the stream's frontier bound. */
static int64_t poll_stream(vgpu_limiter_t *lim, dev_state_t *d, ctx_t *c, stream_q_t *q,
                           int64_t now, int *budget, int eager) {
  int64_t frontier = INT64_MAX;
  while (q->head >= 0) {
    int idx = q->head;
    pend_t *p = &d->ent[idx];
    int done = 0, ok = 1;
    if (p->e == NULL) {
      done = 1;
      ok = 0;
    } else if (p->untimed && !eager && now < q->next_query_ns &&
               (!d->draining || now - q->query_set_ns < CROWD_DRAIN_QUERY_NS)) { /* not due */
      frontier = lim_i64min(frontier, p->s_host);
    } else {
      CUresult r = lim->drv.cuEventQuery(p->e);
      if (r == CUDA_SUCCESS) {
        done = 1;
      } else if (r == CUDA_ERROR_NOT_READY) {
        if (*budget > 0) (*budget)--;
        if (p->untimed) lim_crowd_next_query(q, now, 0);
        if (!p->started && p->measured && p->ref >= 0) {
          if (lim->drv.cuEventQuery(p->s) == CUDA_SUCCESS) {
            int good = 1;
            int64_t s = map_event(lim, c, p->ref, p->s, p->s_rec, &good);
            if (good) {
              p->s_host = lim_i64min(s, now);
              p->started = 1;
              cold_start_seen(d, c, p);
            }
          }
        }
        /* On the GPU past LONG_RUN_NS (a persistent kernel never ends): charged as it runs. */
        if (p->started && p->measured &&
            now - p->s_host - lim_foreign_overlap(c, p->s_host, now) > LONG_RUN_NS)
          lim_charge_running(d, c, p, now);
        if (p->started) frontier = lim_i64min(frontier, lim_i64max(p->s_host, p->run_mark));
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
  return frontier;
}

/* Queries stream heads in FIFO order and finishes completed launches; returns the commit frontier.
 * Visits only the streams with launches in flight (c->act), from c->poll_cursor on. */
int64_t lim_poll_locked(vgpu_limiter_t *lim, dev_state_t *d, int64_t now, int budget) {
  d->last_poll_ns = now;
  int64_t frontier = INT64_MAX;
  int hb_pending = 0;
  for (int ci = 0; ci < MAX_CTX; ci++)
    hb_pending |= d->ctx[ci].used && (d->ctx[ci].hb_n > 0 || d->ctx[ci].cur_ref >= 0);
  if (d->n_inflight > d->n_done || d->n_uncov > 0 || hb_pending) {
    capture_guard_t g = lim_relax_capture(lim);
    CUcontext cur = NULL;
    int cur_known = 0, active = 0;
    for (int ci = 0; ci <= MAX_CTX; ci++)
      for (int w = 0; w < SQ_WORDS; w++) active += __builtin_popcountll(d->ctx[ci].act[w]);
    /* Few streams left with work (a burst draining): each is queried at every poll, so the end of
     * a busy stretch (what is charged) is seen within a poll period. Waiting for their due time
     * instead cost 2 pp of a 90 % limit (limiter_crowd_test: 33 streams on a serial engine). */
    int eager = active <= 2 * CROWD_POLL_QUERIES;
    for (int ci = 0; ci <= MAX_CTX; ci++) { /* and OVERFLOW_CTX */
      ctx_t *c = &d->ctx[ci];
      if (!c->used) continue;
      ref_settle(lim, c, now);
      heartbeats_poll(lim, d, c);
      int start = c->poll_cursor <= MAX_STREAMS ? c->poll_cursor : 0;
      for (int pass = 0; pass < 2; pass++) {
        int si = lim_sq_next(c, pass == 0 ? start : 0);
        for (; si >= 0 && (pass == 0 || si < start);
             si = si < MAX_STREAMS ? lim_sq_next(c, si + 1) : -1) {
          stream_q_t *q = &c->sq[si];
          if (budget == 0) { /* not queried this time: still running as far as known */
            frontier = lim_i64min(frontier, sq_frontier(d, q));
            continue;
          }
          frontier = lim_i64min(frontier, poll_stream(lim, d, c, q, now, &budget, eager));
          if (budget == 0) c->poll_cursor = si + 1 <= MAX_STREAMS ? si + 1 : 0;
          if (q->head < 0 && q->uncov > 0) lim_crowd_cover(lim, d, ci, si, now, &cur, &cur_known, eager);
          if (q->uncov > 0) frontier = lim_i64min(frontier, q->uncov_first_ns);
          if (q->head < 0 && q->uncov == 0) lim_sq_active(c, si, 0);
        }
      }
    }
    lim_restore_capture(lim, g);
    lim_crowd_inflight_update(d, now);
  }
  return frontier;
}

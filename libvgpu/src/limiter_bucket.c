/*
 * limiter_bucket.c — the SM limiter's budget: a GCRA ("virtual finish time") bucket per device,
 * shared by every process of the container through one 64-bit word in the region's extension
 * block (ext->devices[dev].limiter_bucket, CLOCK_MONOTONIC ns of the container's theoretical
 * arrival time, TAT). Charging g ns of GPU time moves TAT forward by g / L_eff with one CAS; the
 * gate admits launches while TAT plus this process's in-flight estimate stays within a burst of
 * now. L_eff = L * (1 + trim + p): the trim integrates the relative error between the limit and
 * the container's measured share over windows of enough launches, only while the container is
 * held back (conditional integration), clamped to +-VGPU_LIMITER_TRIM_MAX, reset on a limit change.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "limiter_internal.h"

/*
 * One CAS charges a batch of finished launches: each measured launch adds the part of its
 * interval beyond this process's watermark (overlapping streams count once) minus the time its
 * context was known to be off the GPU (another context's time slice), and advances TAT by that
 * / leff, from no earlier than its own start minus SLACK (idle time before the launch earns no
 * credit: anti-windup). Unmeasured launches charge their estimate from now. The context switches
 * onto this process's contexts seen since the last charge (d->switch_owed_ns, measured costs)
 * are added right after the batch's first launch, past its anti-windup floor: they happened
 * while that launch or one just before it waited for the GPU, so idle credit never absorbs them.
 * Returns the GPU ns charged. Call under d->mu (d->local_wm_ns).
 */
int64_t lim_bucket_charge(dev_state_t *d, int64_t now, double leff, const commit_batch_t *batch) {
  uint64_t old = __atomic_load_n(d->bucket, __ATOMIC_RELAXED);
  for (;;) {
    /* A fresh or unreadable word owes nothing: the first launch's own anti-windup floor (its
     * start) applies, as for a container idle for long. Reading it as "now" started the first
     * launch's debt at its completion (a 5 s kernel at 50 % waited 15 s instead of 10 s). */
    double tat = lim_bucket_word_valid(old, now) ? (double)(int64_t)old : 0.0;
    int64_t wm_ns = d->local_wm_ns;
    int64_t sw = batch->n > 0 ? d->switch_owed_ns : 0;
    int64_t charged = 0;
    for (int i = 0; i < batch->n; i++) {
      pend_t *p = batch->ents[i];
      int64_t c, from;
      if (p->measured) {
        int64_t s = lim_i64max(p->s_host, wm_ns);
        c = p->e_host > s ? p->e_host - s : 0;
        if (c > 0) c -= lim_i64min(c, lim_foreign_overlap(&d->ctx[p->ctx], s, p->e_host));
        wm_ns = lim_i64max(wm_ns, p->e_host);
        from = p->s_host - SLACK_NS;
      } else {
        c = p->est_ns;
        from = now - SLACK_NS;
      }
      if (tat < (double)from) tat = (double)from;
      tat += (double)c / leff;
      charged += c;
      p->charged = c;
      if (i == 0 && sw > 0) { /* after the first launch's anti-windup floor: never forgiven */
        tat += (double)sw / leff;
        charged += sw;
      }
    }
    double cap = (double)(now + TAT_MAX_AHEAD_NS);
    if (tat > cap) tat = cap;
    uint64_t neu = (uint64_t)(int64_t)tat;
    if (__atomic_compare_exchange_n(d->bucket, &old, neu, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED)) {
      d->local_wm_ns = wm_ns;
      d->switch_ns += sw;
      d->switch_owed_ns = 0;
      return charged;
    }
  }
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

/*
 * Exact switch samples, in start order. When this process's launch q on one context ended while
 * another of its contexts X waited off the GPU (X's off-GPU stretch holds q's end) and nothing of
 * this process ended between q's end and X's return, the engine went from q straight to loading
 * X: X's return minus q's end is one switch (limiter_switch.c). Likewise a launch queued on X
 * before this process's work on another context ended that started a gap after it.
 */
static void switch_samples(dev_state_t *d, pend_t *const *batch, int n, int64_t now) {
  int64_t wm = d->local_wm_ns;
  int wm_ctx = d->wm_ctx;
  for (int i = 0; i < n; i++) {
    const pend_t *p = batch[i];
    if (!p->measured || p->untimed) continue; /* an untimed end is when a poll saw it */
    if (wm > 0 && p->ctx != wm_ctx && p->s_rec < wm && p->s_host > wm)
      lim_switch_sample(d, p->s_host - wm, now);
    if (p->e_host > wm) {
      wm = p->e_host;
      wm_ctx = p->ctx;
    }
    int64_t back = 0; /* the first other context back on the GPU after p ended */
    for (int x = 0; x < MAX_CTX; x++) {
      if (x == p->ctx || !d->ctx[x].used) continue;
      int64_t g = lim_foreign_resumed(&d->ctx[x], p->e_host);
      if (g > 0 && (back == 0 || g < back)) back = g;
    }
    if (back == 0) continue;
    int clean = 1; /* nothing else of this process ended in between */
    for (int j = 0; j < n && clean; j++)
      clean = j == i || !batch[j]->measured || batch[j]->e_host <= p->e_host ||
              batch[j]->e_host >= back;
    if (clean) lim_switch_sample(d, back - p->e_host, now);
  }
  d->wm_ctx = wm_ctx;
}

void lim_commit_done(dev_state_t *d, int64_t now, int64_t frontier, int force_all) {
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
  switch_samples(d, batch, n, now);
  commit_batch_t cb = {batch, n};
  int64_t charged = lim_bucket_charge(d, now, d->leff > 0 ? d->leff : 1.0, &cb);
  for (int i = 0; i < n; i++) {
    pend_t *p = batch[i];
    d->inflight_est_ns -= p->est_ns;
    if (p->untimed) {
      /* In flight it counted in lim_crowd_inflight_ns, not in per-launch estimates: what one
       * adds to the union varies from its whole run to nothing (hidden under the other streams'),
       * and their sum read 33 streams' in-flight work as 33 times its union and held the gate
       * shut. */
    } else if (p->measured) { /* estimates learn what a launch costs, not how long it took */
      ewma(&d->est_dev_ns, p->charged, 3);
      ctx_t *c = &d->ctx[p->ctx];
      if (p->sq >= 0 && c->used) ewma(&c->sq[p->sq].est_ns, p->charged, 2);
    }
  }
  if (d->inflight_est_ns < 0) d->inflight_est_ns = 0;
  for (int i = 0; i < n; i++) lim_ent_free(d, d->done_idx[i]);
  memmove(d->done_idx, d->done_idx + n, (size_t)(d->n_done - n) * sizeof(int));
  d->n_done -= n;
  d->busy_ns += charged;
  d->win_commits += n;
  if (d->xd != NULL) __atomic_fetch_add(&d->xd->busy_ns, (uint64_t)charged, __ATOMIC_RELAXED);
}

void lim_publish_window(dev_state_t *d, int limit, int64_t now) {
  int64_t dt = now - d->win_start_ns;
  if (dt < WINDOW_NS || (d->win_commits < WINDOW_MIN_COMMITS && dt < WINDOW_MAX_NS)) return;
  int64_t busy = d->xd != NULL ? (int64_t)__atomic_load_n(&d->xd->busy_ns, __ATOMIC_RELAXED)
                               : d->busy_ns;
  double share = (double)(busy - d->win_busy0) / (double)dt;
  if (share < 0) share = 0;
  if (d->xd != NULL)
    __atomic_store_n(&d->xd->limiter_window_ppm, (uint64_t)(share * 1e6), __ATOMIC_RELAXED);
  int64_t held = d->throttled_ns - d->win_thr0;
  /* Integrate only over windows with enough launches to mean something: a 10 s window holding
   * one or two seconds-long kernels reads 0 % or 2x the limit and would swing the trim to its
   * bounds. Long windows weigh like one WINDOW_NS step. */
  if (limit > 0 && limit == d->last_limit && held * 20 > dt &&
      d->win_commits >= WINDOW_MIN_COMMITS) {
    /* Saturated (held back >= 5 % of the window): the error is meaningful; integrate. */
    double target = limit / 100.0;
    double err = (target - share) / target;
    if (err > 1) err = 1;
    if (err < -1) err = -1;
    d->trim += TRIM_KI * err * ((double)lim_i64min(dt, WINDOW_NS) / 1e9);
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
}

void lim_update_leff(dev_state_t *d, int limit) {
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
/*
 * A launch still running past LONG_RUN_NS (limiter_tuning.h): its interval from where the last
 * such charge ended (or its start) up to the last moment its context was seen on the GPU is charged like a finished launch's, through the
 * process's union watermark (what its other launches overlapping it were charged is not charged
 * again, and they are not charged again for it), minus the time its context was known to be off
 * the GPU. Its commit at the end charges only what follows.
 */
void lim_charge_running(dev_state_t *d, const ctx_t *c, pend_t *p, int64_t now) {
  if (!p->long_run) {
    p->long_run = 1;
    d->long_runs++;
    d->long_running++;
  }
  /* Up to the last heartbeat that ran at once (the context was on the GPU then): a slice of
   * another context in progress now is not known yet, and charging it would never be undone. A
   * crowded context has no heartbeats and is charged everything anyway. */
  int64_t upto = c->untimed_n > 0 ? now : lim_i64min(now, c->last_prompt_ns);
  int64_t from = lim_i64max(p->s_host, p->run_mark);
  if (upto <= from) return;
  pend_t part = *p;
  part.s_host = from;
  part.e_host = upto;
  part.measured = 1;
  pend_t *one[1] = {&part};
  commit_batch_t cb = {one, 1};
  int64_t charged = lim_bucket_charge(d, now, d->leff > 0 ? d->leff : 1.0, &cb);
  p->run_mark = upto;
  /* What is charged is no longer in flight: the gate must not count it twice. */
  int64_t off = lim_i64min(p->est_ns, charged);
  p->est_ns -= off;
  d->inflight_est_ns -= off;
  d->busy_ns += charged;
  if (d->xd != NULL) __atomic_fetch_add(&d->xd->busy_ns, (uint64_t)charged, __ATOMIC_RELAXED);
}

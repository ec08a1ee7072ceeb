/*
 * limiter_tables.c — the limiter's two bounded tables, read by both the measurement
 * (limiter_measure.c) and the accounting (limiter_bucket.c): the per-context record of stretches
 * another context held the GPU (written by limiter_measure.c's foreign_add) and the per-device
 * pool of in-flight entries, and the per-context stream -> slot index. Kept apart so neither unit
 * depends on the other both ways.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "limiter_internal.h"

/* Off-GPU time before t among the remembered stretches (F(t), monotone in t). */
static int64_t foreign_before(const ctx_t *c, int64_t t) {
  int lo = 0, hi = c->foreign_n - 1, at = -1;
  while (lo <= hi) { /* last stretch starting before t */
    int mid = (lo + hi) / 2;
    if (c->foreign[(c->foreign_head + mid) % MAX_FOREIGN].a < t) {
      at = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (at < 0) return c->foreign_n > 0 ? c->foreign[c->foreign_head].cum : 0;
  const struct foreign_s *f = &c->foreign[(c->foreign_head + at) % MAX_FOREIGN];
  return f->cum + (lim_i64min(t, f->b) - f->a);
}

int64_t lim_foreign_resumed(const ctx_t *c, int64_t t) {
  int lo = 0, hi = c->foreign_n - 1, at = -1;
  while (lo <= hi) { /* last stretch starting at or before t */
    int mid = (lo + hi) / 2;
    if (c->foreign[(c->foreign_head + mid) % MAX_FOREIGN].a <= t) {
      at = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (at < 0) return 0;
  const struct foreign_s *f = &c->foreign[(c->foreign_head + at) % MAX_FOREIGN];
  return t < f->b ? f->b : 0;
}

int64_t lim_foreign_overlap(const ctx_t *c, int64_t a, int64_t b) {
  if (c->foreign_n == 0 || b <= a) return 0;
  return foreign_before(c, b) - foreign_before(c, a);
}

int lim_ent_alloc(dev_state_t *d) {
  int i = d->free_head;
  if (i < 0) return -1;
  d->free_head = d->ent[i].next;
  memset(&d->ent[i], 0, sizeof(d->ent[i]));
  d->ent[i].next = -1;
  d->ent[i].ref = -1;
  d->n_inflight++;
  return i;
}

void lim_ent_free(dev_state_t *d, int i) {
  d->ent[i].ref = -2; /* free marker for ctx_drop */
  d->ent[i].s = d->ent[i].e = NULL;
  d->ent[i].next = d->free_head;
  d->free_head = i;
  d->n_inflight--;
}

/* The stream -> slot index: open addressing over SIDX_N buckets, so that a launch finds its
 * stream's slot in O(1) among up to MAX_STREAMS busy streams. */
static unsigned sidx_hash(CUstream s) {
  uint64_t x = (uint64_t)(uintptr_t)s;
  x ^= x >> 29;
  x *= 0x9E3779B97F4A7C15ULL;
  return (unsigned)(x >> 40) & (SIDX_N - 1);
}

void lim_sidx_insert(ctx_t *c, int slot) {
  unsigned h = sidx_hash(c->sq[slot].stream);
  for (int n = 0; n < SIDX_N; n++, h = (h + 1) & (SIDX_N - 1))
    if (c->sidx[h] == 0) {
      c->sidx[h] = (int16_t)(slot + 1);
      return;
    }
}

int lim_stream_find(const ctx_t *c, CUstream stream) {
  unsigned h = sidx_hash(stream);
  for (int n = 0; n < SIDX_N; n++, h = (h + 1) & (SIDX_N - 1)) {
    int v = c->sidx[h];
    if (v == 0) return -1;
    const stream_q_t *q = &c->sq[v - 1];
    if (q->used && q->stream == stream) return v - 1;
  }
  return -1;
}

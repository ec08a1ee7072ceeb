/*
 * limiter_tables.c — the limiter's two bounded tables, read by both the measurement
 * (limiter_measure.c) and the accounting (limiter_bucket.c): the per-context record of stretches
 * another context held the GPU (written by limiter_measure.c's foreign_add) and the per-device
 * pool of in-flight entries. Kept apart so neither unit depends on the other both ways.
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

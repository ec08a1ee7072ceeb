/*
 * track.c — see track.h.
 */
#include "track.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct vgpu_track_rec *g_tab; /* kind == 0: empty */
static size_t g_cap, g_len;
static uint64_t g_gen; /* bumped when the table is rebuilt (grow, fork reset) */

static size_t hash(uint8_t kind, uint64_t key) {
  uint64_t h = key ^ ((uint64_t)kind << 56);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return (size_t)h;
}

static size_t find(uint8_t kind, uint64_t key) {
  size_t mask = g_cap - 1;
  for (size_t i = hash(kind, key) & mask;; i = (i + 1) & mask) {
    if (g_tab[i].kind == 0) return SIZE_MAX;
    if (g_tab[i].kind == kind && g_tab[i].key == key) return i;
  }
}

static void insert_nogrow(const struct vgpu_track_rec *rec) {
  size_t mask = g_cap - 1;
  for (size_t i = hash(rec->kind, rec->key) & mask;; i = (i + 1) & mask) {
    if (g_tab[i].kind == 0) {
      g_tab[i] = *rec;
      g_len++;
      return;
    }
  }
}

static bool grow(void) {
  size_t ncap = g_cap ? g_cap * 2 : 256;
  struct vgpu_track_rec *old = g_tab;
  size_t ocap = g_cap;
  struct vgpu_track_rec *nt = calloc(ncap, sizeof *nt);
  if (!nt) return false;
  g_tab = nt;
  g_cap = ncap;
  g_gen++;
  g_len = 0;
  for (size_t i = 0; i < ocap; i++)
    if (old[i].kind) insert_nogrow(&old[i]);
  free(old);
  return true;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void remove_at(size_t i) {
  size_t mask = g_cap - 1;
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (g_tab[j].kind == 0) break;
    size_t home = hash(g_tab[j].kind, g_tab[j].key) & mask;
    /* Move j into the hole at i when its home is not in (i, j]. */
    bool between = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
    if (!between) {
      g_tab[i] = g_tab[j];
      i = j;
    }
  }
  memset(&g_tab[i], 0, sizeof g_tab[i]);
  g_len--;
}

bool vgpu_track_put(const struct vgpu_track_rec *rec) {
  pthread_mutex_lock(&g_mu);
  bool ok = true;
  if (g_cap) {
    size_t i = find(rec->kind, rec->key);
    if (i != SIZE_MAX) {
      g_tab[i] = *rec;
      pthread_mutex_unlock(&g_mu);
      return true;
    }
  }
  if ((g_len + 1) * 4 > g_cap * 3) ok = grow();
  if (ok) insert_nogrow(rec);
  pthread_mutex_unlock(&g_mu);
  return ok;
}

/* Looks up (kind, key) under the lock, copies the record out and, when asked, removes it. */
static bool lookup(uint8_t kind, uint64_t key, struct vgpu_track_rec *out, bool remove) {
  pthread_mutex_lock(&g_mu);
  bool found = false;
  if (g_cap) {
    size_t i = find(kind, key);
    if (i != SIZE_MAX) {
      if (out) *out = g_tab[i];
      if (remove) remove_at(i);
      found = true;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return found;
}

bool vgpu_track_get(uint8_t kind, uint64_t key, struct vgpu_track_rec *out) { return lookup(kind, key, out, false); }

bool vgpu_track_take(uint8_t kind, uint64_t key, struct vgpu_track_rec *out) { return lookup(kind, key, out, true); }

/* One pass over the table, O(capacity + records removed): a removal shifts later entries of the
 * probe chain back into the hole, so the slot just emptied is examined again before moving on; no
 * entry that has not been examined can land behind the cursor (entries only move backwards along
 * their chain, and a chain that wraps only moves entries already examined). The callbacks run
 * outside the mutex (they take the region's write lock, which fork() orders before ours), in
 * batches; a table regrown by another thread between batches is rescanned from the start. */
#define TAKE_CTX_BATCH 256
static uint64_t g_ctx_gen;
uint64_t vgpu_track_ctx_gen(void) { return __atomic_load_n(&g_ctx_gen, __ATOMIC_ACQUIRE); }

size_t vgpu_track_take_ctx(uintptr_t ctx, void (*fn)(const struct vgpu_track_rec *)) {
  __atomic_fetch_add(&g_ctx_gen, 1, __ATOMIC_ACQ_REL);
  struct vgpu_track_rec batch[TAKE_CTX_BATCH];
  size_t n = 0, i = 0;
  uint64_t seen_gen = 0;
  bool first = true;
  for (;;) {
    size_t got = 0;
    pthread_mutex_lock(&g_mu);
    if (first || seen_gen != g_gen) i = 0;
    first = false;
    seen_gen = g_gen;
    while (i < g_cap && got < TAKE_CTX_BATCH) {
      if (g_tab[i].kind && g_tab[i].ctx == ctx && g_tab[i].kind != VGPU_TRACK_CTX) {
        batch[got++] = g_tab[i];
        remove_at(i);
      } else {
        i++;
      }
    }
    bool done = i >= g_cap;
    pthread_mutex_unlock(&g_mu);
    for (size_t k = 0; k < got; k++)
      if (fn) fn(&batch[k]);
    n += got;
    if (done) return n;
  }
}

size_t vgpu_track_count(void) {
  pthread_mutex_lock(&g_mu);
  size_t n = g_len;
  pthread_mutex_unlock(&g_mu);
  return n;
}

void vgpu_track_atfork(int phase) {
  if (phase == 0)
    pthread_mutex_lock(&g_mu);
  else
    pthread_mutex_unlock(&g_mu);
}

void vgpu_track_reset_after_fork(void) {
  pthread_mutex_lock(&g_mu);
  if (g_tab) memset(g_tab, 0, g_cap * sizeof *g_tab);
  g_len = 0;
  g_gen++;
  pthread_mutex_unlock(&g_mu);
}

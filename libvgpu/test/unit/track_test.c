/*
 * track_test.c — the allocation table against a reference model: random puts/takes with colliding
 * keys across kinds; every take returns the record exactly once; per-context takes remove all of
 * a context's records and nothing else.
 */
#include "track.h"
#include "vgpu_unit.h"

#define N 20000

static void track_randomOps_matchModel(void) {
  static uint64_t model[N]; /* bytes+1 per key index, 0 = absent */
  unsigned seed = 7;
  for (int step = 0; step < 200000; step++) {
    int k = rand_r(&seed) % N;
    uint8_t kind = (uint8_t)(1 + k % 3);
    uint64_t key = (uint64_t)(k / 3) * 4096; /* same key value in several kinds */
    if (rand_r(&seed) % 2) {
      struct vgpu_track_rec r = {.key = key, .bytes = (uint64_t)step, .kind = kind, .ridx = 1};
      EXPECT(vgpu_track_put(&r));
      model[k] = (uint64_t)step + 1;
    } else {
      struct vgpu_track_rec out;
      bool found = vgpu_track_take(kind, key, &out);
      EXPECT(found == (model[k] != 0));
      if (found) EXPECT_EQ_U(out.bytes + 1, model[k]);
      model[k] = 0;
      EXPECT(!vgpu_track_take(kind, key, &out)); /* exactly once */
    }
  }
  size_t live = 0;
  for (int k = 0; k < N; k++) live += model[k] != 0;
  EXPECT_EQ_U(vgpu_track_count(), live);
  for (int k = 0; k < N; k++) {
    if (!model[k]) continue;
    EXPECT(vgpu_track_take((uint8_t)(1 + k % 3), (uint64_t)(k / 3) * 4096, NULL));
  }
  EXPECT_EQ_U(vgpu_track_count(), 0);
}

static uint64_t g_released;
static void on_release(const struct vgpu_track_rec *r) { g_released += r->bytes; }

static void takeCtx_removesOnlyThatContext(void) {
  for (uint64_t i = 1; i <= 100; i++) {
    struct vgpu_track_rec r = {.key = i, .bytes = 10, .ctx = (i % 2) ? 0xA : 0xB, .kind = VGPU_TRACK_PTR};
    vgpu_track_put(&r);
  }
  struct vgpu_track_rec c = {.key = 0xA, .bytes = 1000, .ctx = 0xA, .kind = VGPU_TRACK_CTX};
  vgpu_track_put(&c);
  g_released = 0;
  EXPECT_EQ_U(vgpu_track_take_ctx(0xA, on_release), 50);
  EXPECT_EQ_U(g_released, 500);
  EXPECT_EQ_U(vgpu_track_count(), 51); /* 50 of ctx B and the context record itself */
  EXPECT(vgpu_track_take(VGPU_TRACK_CTX, 0xA, NULL));
  EXPECT_EQ_U(vgpu_track_take_ctx(0xB, NULL), 50);
  EXPECT_EQ_U(vgpu_track_count(), 0);
}

/* Two interleaved contexts of 60 000 records each, keys spaced like device pointers (long probe
 * chains, clusters wrapping the table's end): one pass removes exactly context A's records and
 * every record of B stays reachable by its key. */
static void takeCtx_manyRecords_exactAndOthersReachable(void) {
  const uint64_t n = 60000;
  for (uint64_t i = 0; i < 2 * n; i++) {
    struct vgpu_track_rec r = {.key = 0x7f0000000000ull + i * 0x10000ull, .bytes = 1 + (i & 1),
                               .ctx = (i & 1) ? 0xB : 0xA, .kind = VGPU_TRACK_PTR};
    EXPECT(vgpu_track_put(&r));
  }
  g_released = 0;
  EXPECT_EQ_U(vgpu_track_take_ctx(0xA, on_release), n);
  EXPECT_EQ_U(g_released, n); /* A's records are 1 byte each */
  EXPECT_EQ_U(vgpu_track_count(), n);
  for (uint64_t i = 1; i < 2 * n; i += 2) {
    struct vgpu_track_rec out;
    EXPECT(vgpu_track_get(VGPU_TRACK_PTR, 0x7f0000000000ull + i * 0x10000ull, &out));
    EXPECT(out.ctx == 0xB);
  }
  EXPECT_EQ_U(vgpu_track_take_ctx(0xB, NULL), n);
  EXPECT_EQ_U(vgpu_track_count(), 0);
}

UNIT_MAIN("track", CASE(track_randomOps_matchModel), CASE(takeCtx_removesOnlyThatContext),
          CASE(takeCtx_manyRecords_exactAndOthersReachable))

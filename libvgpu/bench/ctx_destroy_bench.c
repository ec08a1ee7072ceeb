/*
 * ctx_destroy_bench.c — what destroying a context costs libvgpu's bookkeeping: N live allocations
 * of the destroyed context, N of another context alive beside it, then vgpu_track_take_ctx (the
 * call cuCtxDestroy / the last primary-context release makes). Keys are spaced like device
 * pointers. Prints one line per size: "ctx_destroy live=<n> other=<n> ms=<t>".
 * Built and run by scripts/bench.sh (links build/libvgpu.a).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "track.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static size_t g_bytes;
static void on_release(const struct vgpu_track_rec *r) { g_bytes += r->bytes; }

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  static const unsigned long sizes[] = {1000, 10000, 100000};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    unsigned long n = sizes[s];
    double best = 1e30;
    for (int r = 0; r < rounds; r++) {
      for (unsigned long i = 0; i < 2 * n; i++) {
        struct vgpu_track_rec rec = {.key = 0x7f0000000000ull + i * 0x200000ull, .bytes = 1,
                                     .ctx = (i & 1) ? 0xB : 0xA, .kind = VGPU_TRACK_PTR};
        if (!vgpu_track_put(&rec)) return 1;
      }
      g_bytes = 0;
      double t0 = now_ms();
      size_t got = vgpu_track_take_ctx(0xA, on_release);
      double t = now_ms() - t0;
      if (got != n || g_bytes != n) {
        fprintf(stderr, "took %zu records (%zu bytes), want %lu\n", got, g_bytes, n);
        return 1;
      }
      if (t < best) best = t;
      vgpu_track_take_ctx(0xB, NULL);
    }
    printf("ctx_destroy live=%lu other=%lu ms=%.3f (best of %d)\n", n, n, best, rounds);
  }
  return 0;
}

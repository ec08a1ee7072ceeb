/*
 * limiter_hookcost.c — CPU cost of the limiter hooks per launch (no GPU needed), for the
 * "no measurable cost without an SM limit" goal. Build and run:
 *   gcc -O2 -D_GNU_SOURCE -Ilibvgpu/include -Ilibvgpu/src -Ilibvgpu/test/unit \
 *       -isystem /usr/local/cuda/include libvgpu/gpu/limiter_hookcost.c libvgpu/src/limiter.c \
 *       libvgpu/src/limiter_measure.c libvgpu/src/limiter_bucket.c -lpthread -lm \
 *       -o /tmp/hookcost && /tmp/hookcost
 * The limited case runs against the simulated driver, so it shows the limiter's own bookkeeping
 * only (real event records cost about 1-2 us each on top).
 */
#include <time.h>

#include "limiter_sim.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double per_call_ns(int limit, long n) {
  sim_reset();
  sim_region_t r = sim_region_new(limit);
  vgpu_limiter_driver_t drv = sim_driver();
  vgpu_limiter_config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.region = r.region;
  cfg.ext = r.ext;
  cfg.device_count = 1;
  vgpu_limiter_t *lim = vgpu_limiter_create(&drv, &cfg);
  CUstream st = sim_stream_new(1);
  double t0 = now_s();
  for (long i = 0; i < n; i++) {
    vgpu_limiter_before(lim, 0, st);
    if (limit) sim_launch(st, 1000); /* 1 us kernels: never throttled at 99 % for long */
    vgpu_limiter_after(lim, 0, st);
    if (limit) SIM.now += 2000;
  }
  double dt = now_s() - t0;
  vgpu_limiter_destroy(lim);
  sim_region_free(r);
  return dt / (double)n * 1e9;
}

int main(void) {
  printf("no SM limit: %.1f ns per launch (before + after)\n", per_call_ns(0, 20000000));
  printf("limit 99:    %.1f ns per launch (bookkeeping, simulated driver)\n", per_call_ns(99, 200000));
  return 0;
}

/*
 * limiter_api_test.c — the process-wide hook API the interposition layer calls
 * (vgpu_limiter_init / before_launch / after_launch / context_destroyed / flush / atfork_child),
 * against the simulated GPU.
 */
#include "limiter_sim.h"

#define MS 1000000LL
#define US 1000LL

int main(void) {
  printf("limiter_api_test: process-wide hooks\n");
  sim_reset();
  /* Before init the hooks are inert. */
  vgpu_limiter_before_launch(0, NULL);
  vgpu_limiter_after_launch(0, NULL);
  CHECK(SIM.driver_calls == 0, "hooks before init called the driver %ld times", SIM.driver_calls);

  vgpu_limiter_driver_t bad = sim_driver();
  bad.cuEventQuery = NULL;
  vgpu_limiter_config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  sim_region_t r = sim_region_new(25);
  cfg.region = r.region;
  cfg.ext = r.ext;
  cfg.device_count = 1;
  cfg.policy = vgpu_limiter_parse_policy("force");
  CHECK(vgpu_limiter_init(&bad, &cfg) == -1, "init accepted a missing entry point");
  CHECK(vgpu_limiter_init(NULL, &cfg) == -1, "init accepted NULL");

  vgpu_limiter_driver_t drv = sim_driver();
  CHECK(vgpu_limiter_init(&drv, &cfg) == 0, "init failed");
  CHECK(vgpu_limiter_init(&drv, &cfg) == 0, "second init must be harmless");

  /* The ptsz convention: stream 0 of a _ptsz launch arrives as CU_STREAM_PER_THREAD. */
  CUstream streams[2] = {CU_STREAM_PER_THREAD, sim_stream_new(1)};
  SIM.win_a = SIM.now + 2000 * MS;
  SIM.win_b = SIM.win_a + 5000 * MS;
  long launches = 0;
  while (SIM.now < SIM.win_b) {
    CUstream st = streams[launches % 2];
    vgpu_limiter_before_launch(0, st);
    sim_launch(st, 100 * US);
    vgpu_limiter_after_launch(0, st);
    SIM.now += 4 * US;
    launches++;
  }
  double share = 100.0 * (double)SIM.busy[1] / (double)(SIM.win_b - SIM.win_a);
  printf("  global hooks at 25%%: %.2f%% over 5 s (%ld launches)\n", share, launches);
  CHECK(fabs(share - 25) <= 2, "share %.2f", share);
  CHECK(r.region->recent_kernel == 2, "recent_kernel %d", r.region->recent_kernel);

  /* after_launch without a matching before_launch (e.g. a launch path the gate skipped). */
  vgpu_limiter_after_launch(0, streams[1]);
  /* A destroyed context: its launches are forgotten, nothing dangles. */
  vgpu_limiter_context_destroyed((CUcontext)(intptr_t)1);
  vgpu_limiter_flush();
  CHECK(r.ext->devices[0].launches_total == (uint64_t)launches, "launches_total %lu vs %ld",
        (unsigned long)r.ext->devices[0].launches_total, launches);
  CHECK(r.ext->devices[0].busy_ns > 0 && r.ext->devices[0].throttled_ns > 0,
        "counters not published");

  /* A forked child starts with fresh per-device state and keeps limiting. */
  vgpu_limiter_atfork_child();
  SIM.current_ctx = 2;
  CUstream cs = sim_stream_new(2);
  SIM.win_a = SIM.now + 2000 * MS;
  SIM.win_b = SIM.win_a + 3000 * MS;
  while (SIM.now < SIM.win_b) {
    vgpu_limiter_before_launch(0, cs);
    sim_launch(cs, 100 * US);
    vgpu_limiter_after_launch(0, cs);
    SIM.now += 4 * US;
  }
  double child = 100.0 * (double)SIM.busy[2] / (double)(SIM.win_b - SIM.win_a);
  printf("  after atfork_child: %.2f%%\n", child);
  CHECK(fabs(child - 25) <= 2, "child share %.2f", child);
  sim_region_free(r);
  return test_summary("limiter_api_test");
}

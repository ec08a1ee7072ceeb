/*
 * limiter_crowd_test.c — the SM limiter with more busy streams than hardware queues (issue 35),
 * on the simulated GPU (limiter_sim.h): the crowded mode's host cost and its charge.
 *
 * One process launches round-robin over N streams (saturating: the simulated driver blocks a
 * launch when 50 ms of work is queued), 200 us kernels. Checked per N and limit:
 * - the device time charged is never less than the time the process held the GPU (the union of
 *   its kernels' runs, SIM.busy), and the busy share holds the limit within 2 pp;
 * - the limiter's event records and queries per launch stay low: with 33-40 streams it records at
 *   most one E in flight per stream (launches behind it are covered by the next one) and queries
 *   an E once it may be done: 0.5-0.8 records and 3.4-3.6 queries per launch here (the engine is
 *   serial: every stream waits behind all the others). The limiter that recorded an E per launch
 *   and queried every stream's at every poll: 1.0 records and 37-44 queries per launch.
 * And a context destroyed with crowded launches in flight is charged their time up to then.
 */
#include "limiter_sim.h"

#define MS 1000000LL
#define US 1000LL

static unsigned long g_records, g_queries;

static CUresult count_record(CUevent ev, CUstream h) {
  g_records++;
  return sim_cuEventRecord(ev, h);
}

static CUresult count_query(CUevent ev) {
  g_queries++;
  return sim_cuEventQuery(ev);
}

static void run_case(int nstreams, int limit) {
  sim_reset();
  sim_region_t r = sim_region_new(limit);
  vgpu_limiter_driver_t drv = sim_driver();
  drv.cuEventRecord = count_record;
  drv.cuEventQuery = count_query;
  vgpu_limiter_config_t cfg = {r.region, r.ext, 1, VGPU_LIMITER_POLICY_DEFAULT, {0}, NULL};
  vgpu_limiter_t *lim = vgpu_limiter_create(&drv, &cfg);
  CUstream st[48];
  for (int i = 0; i < nstreams; i++) st[i] = sim_stream_new(1);
  SIM.current_ctx = 1;
  int64_t settle = 1000 * MS, len = 4000 * MS;
  SIM.win_a = SIM.now + settle;
  SIM.win_b = SIM.win_a + len;
  memset(SIM.busy, 0, sizeof(SIM.busy));
  unsigned long launches = 0, rec0 = 0, q0 = 0, l0 = 0;
  uint64_t charged0 = 0;
  int started = 0;
  for (int k = 0; SIM.now < SIM.win_b; k++) {
    if (!started && SIM.now >= SIM.win_a) {
      started = 1;
      rec0 = g_records;
      q0 = g_queries;
      l0 = launches;
      charged0 = __atomic_load_n(&r.ext->devices[0].busy_ns, __ATOMIC_ACQUIRE);
    }
    CUstream s = st[k % nstreams];
    vgpu_limiter_before(lim, 0, s);
    sim_launch(s, 200 * US);
    vgpu_limiter_after(lim, 0, s);
    launches++;
    SIM.now += 4 * US; /* CPU side of a launch */
  }
  vgpu_limiter_poll(lim, 0);
  double n = (double)(launches - l0);
  double busy = 100.0 * (double)SIM.busy[1] / (double)len;
  double charged =
      100.0 * (double)(__atomic_load_n(&r.ext->devices[0].busy_ns, __ATOMIC_ACQUIRE) - charged0) /
      (double)len;
  double rec = (double)(g_records - rec0) / n, qry = (double)(g_queries - q0) / n;
  printf("  %3d streams, limit %2d%%: busy %.2f%%, charged %.2f%%; per launch: %.3f records, %.3f "
         "queries (%.0f launches)\n",
         nstreams, limit, busy, charged, rec, qry, n);
  CHECK(fabs(busy - limit) <= 2.0, "busy share %.2f%% at a %d%% limit", busy, limit);
  /* Commits trail by up to a burst: the window's charge may miss its last ~20 ms (0.5 pp). */
  CHECK(charged >= busy - 1.0, "charged %.2f%% < held %.2f%%", charged, busy);
  if (nstreams > 8) {
    CHECK(rec <= 0.85, "%.3f event records per launch", rec);
    CHECK(rec + qry <= 6.0, "%.3f event records + queries per launch", rec + qry);
  }
  vgpu_limiter_destroy(lim);
  sim_region_free(r);
}

/* A context destroyed with crowded launches in flight (some uncovered: no event of their own) is
 * charged their time up to its destruction, not their estimate (0 for untimed launches). */
static void test_forget_context(void) {
  sim_reset();
  sim_region_t r = sim_region_new(50);
  vgpu_limiter_driver_t drv = sim_driver();
  vgpu_limiter_config_t cfg = {r.region, r.ext, 1, VGPU_LIMITER_POLICY_DEFAULT, {0}, NULL};
  vgpu_limiter_t *lim = vgpu_limiter_create(&drv, &cfg);
  CUstream st[33];
  for (int i = 0; i < 33; i++) st[i] = sim_stream_new(1);
  SIM.current_ctx = 1;
  SIM.win_a = SIM.now;
  SIM.win_b = SIM.now + 1000 * MS;
  memset(SIM.busy, 0, sizeof(SIM.busy));
  int64_t t0 = SIM.now;
  for (int k = 0; k < 33 * 4; k++) { /* 26 ms of work queued: still running at the end */
    vgpu_limiter_before(lim, 0, st[k % 33]);
    sim_launch(st[k % 33], 200 * US);
    vgpu_limiter_after(lim, 0, st[k % 33]);
    SIM.now += 4 * US;
  }
  SIM.now += 5 * MS; /* the application computes; nothing polls; the GPU works on */
  int64_t held = SIM.now - t0; /* the serial engine ran from the first launch on */
  vgpu_limiter_forget_context(lim, (CUcontext)(intptr_t)1);
  vgpu_limiter_poll(lim, 0);
  double charged = (double)__atomic_load_n(&r.ext->devices[0].busy_ns, __ATOMIC_ACQUIRE);
  printf("  forget a crowded context: held %.2f ms until then, charged %.2f ms\n", held / 1e6,
         charged / 1e6);
  CHECK(charged >= 0.95 * (double)held, "charged %.0f ns < held %ld ns", charged, (long)held);
  vgpu_limiter_destroy(lim);
  sim_region_free(r);
}

int main(void) {
  test_forget_context();
  const int streams[] = {4, 33, 40};
  const int limits[] = {90, 25};
  for (int s = 0; s < 3; s++)
    for (int l = 0; l < 2; l++) run_case(streams[s], limits[l]);
  return test_summary("limiter_crowd_test");
}

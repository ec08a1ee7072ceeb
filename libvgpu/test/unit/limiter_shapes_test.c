/*
 * limiter_shapes_test.c — the SM limiter's accuracy goal of issue 15 on the simulated GPU: 1–4
 * containers × short (50 µs), 20 ms and seconds-long (1–5 s) kernels × limits 10–90, including
 * containers with different limits, within ±5 pp of the limit by the kernels' execution time
 * (throughput) and by device-busy time (kernels plus the context switches they cause, split
 * between the containers in proportion to their kernel time, as the GPU benchmark does).
 *
 * Seconds-long kernels at low limits build debts far beyond the ten seconds the shared bucket
 * used to keep: a 5 s kernel at 10 % owes 45 s of idle time. The old cap forgave the rest (16.7 %
 * for 2 s kernels and 33.3 % for 5 s kernels at a 10 % limit); these cells fail on that code.
 */
#include "limiter_sim.h"

#define MS 1000000LL
#define US 1000LL
#define S 1000000000LL
#define GOAL_PP 5.0

typedef struct {
  vgpu_limiter_t *lim;
  int ctx;
  CUstream st;
  int64_t dur;
} proc_t;

static int64_t g_until;

static void proc_body(void *arg) {
  proc_t *p = arg;
  while (SIM.now < g_until) {
    SIM.current_ctx = p->ctx;
    vgpu_limiter_before(p->lim, 0, p->st);
    sim_launch(p->st, p->dur);
    vgpu_limiter_after(p->lim, 0, p->st);
    des_wait(4 * US); /* CPU side of a launch */
  }
}

static vgpu_limiter_t *new_limiter(sim_region_t *r) {
  vgpu_limiter_driver_t drv = sim_driver();
  vgpu_limiter_config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.region = r->region;
  cfg.ext = r->ext;
  cfg.device_count = 1;
  cfg.policy = VGPU_LIMITER_POLICY_FORCE;
  return vgpu_limiter_create(&drv, &cfg);
}

typedef struct {
  const char *name;
  int n;                /* processes */
  int container[4];     /* container index of each process (processes of one container share) */
  int limit[4];         /* per container */
  int64_t dur[4];       /* kernel duration per process */
  int64_t settle, window;
} cell_t;

/* Runs one cell; returns the number of failed checks. */
static void run_cell(const cell_t *c) {
  sim_reset(); /* time slices of 2 ms, switches of 150 us (limiter_sim.h) */
  sim_region_t r[4];
  int ncont = 0;
  for (int i = 0; i < c->n; i++)
    if (c->container[i] + 1 > ncont) ncont = c->container[i] + 1;
  for (int k = 0; k < ncont; k++) r[k] = sim_region_new(c->limit[k]);
  proc_t ps[4];
  void (*bodies[4])(void *);
  void *args[4];
  int ctxs[4];
  for (int i = 0; i < c->n; i++) {
    ps[i].lim = new_limiter(&r[c->container[i]]);
    ps[i].ctx = i + 1;
    ps[i].st = sim_stream_new(i + 1);
    ps[i].dur = c->dur[i];
    bodies[i] = proc_body;
    args[i] = &ps[i];
    ctxs[i] = i + 1;
  }
  SIM.win_a = SIM.now + c->settle;
  SIM.win_b = SIM.win_a + c->window;
  memset(SIM.busy, 0, sizeof(SIM.busy));
  memset(SIM.switch_in, 0, sizeof(SIM.switch_in));
  SIM.switch_busy = 0;
  SIM.switch_busy = 0;
  g_until = SIM.win_b;
  des_run(c->n, bodies, args, ctxs);
  double len = (double)c->window, kernels_all = 0, thr[4] = {0};
  for (int i = 0; i < c->n; i++) {
    thr[c->container[i]] += 100.0 * (double)SIM.busy[i + 1] / len;
    kernels_all += 100.0 * (double)SIM.busy[i + 1] / len;
  }
  double sw = 100.0 * (double)SIM.switch_busy / len;
  for (int k = 0; k < ncont; k++) {
    double busy = thr[k] + (kernels_all > 0 ? sw * thr[k] / kernels_all : 0);
    printf("  %-34s container %d limit %2d%%: throughput %6.2f%% (%+5.2f pp), busy %6.2f%% "
           "(%+5.2f pp)\n",
           c->name, k, c->limit[k], thr[k], thr[k] - c->limit[k], busy, busy - c->limit[k]);
    CHECK(fabs(thr[k] - c->limit[k]) <= GOAL_PP, "%s container %d: throughput %.2f vs %d",
          c->name, k, thr[k], c->limit[k]);
    CHECK(fabs(busy - c->limit[k]) <= GOAL_PP, "%s container %d: busy %.2f vs %d", c->name, k,
          busy, c->limit[k]);
  }
  if (c->n > 1) {
    long seen = 0;
    double charged = 0;
    for (int i = 0; i < c->n; i++) {
      vgpu_limiter_stats_t st;
      vgpu_limiter_stats(ps[i].lim, 0, &st);
      seen += (long)st.switches;
      charged += (double)st.switch_ns;
    }
    printf("  %-34s switches over the run: %ld on the GPU (%.3f s), %ld seen by the limiters "
           "(%.3f s charged)\n",
           c->name, SIM.switches, (double)SIM.switches * (double)SIM.switch_ns / 1e9, seen,
           charged / 1e9);
  }
  for (int i = 0; i < c->n; i++) vgpu_limiter_destroy(ps[i].lim);
  for (int k = 0; k < ncont; k++) sim_region_free(r[k]);
}

/* Windows span at least six periods of the slowest container (kernel / limit) so that a kernel
 * cut by the window's edge costs at most ~2 pp; multi-container cells are kept short because the
 * simulator hands the CPU between "processes" every 100 µs while they wait on a long kernel. */
static const cell_t CELLS[] = {
    /* one container, seconds-long kernels: the cells the 10 s debt cap broke */
    {"1 container, 2 s kernels", 1, {0}, {10}, {2 * S}, 60 * S, 240 * S},
    {"1 container, 5 s kernels", 1, {0}, {10}, {5 * S}, 100 * S, 500 * S},
    {"1 container, 1 s kernels", 1, {0}, {50}, {1 * S}, 10 * S, 60 * S},
    {"1 container, 5 s kernels", 1, {0}, {90}, {5 * S}, 20 * S, 120 * S},
    {"1 container, 20 ms kernels", 1, {0}, {10}, {20 * MS}, 2 * S, 10 * S},
    /* two containers with different limits */
    {"2 containers, 2 s kernels", 2, {0, 1}, {10, 50}, {2 * S, 2 * S}, 20 * S, 120 * S},
    {"2 containers, 1 s kernels", 2, {0, 1}, {30, 60}, {1 * S, 1 * S}, 10 * S, 40 * S},
    {"2 containers, 20 ms kernels", 2, {0, 1}, {30, 60}, {20 * MS, 20 * MS}, 2 * S, 10 * S},
    {"2 containers, short + 1 s kernels", 2, {0, 1}, {20, 40}, {50 * US, 1 * S}, 10 * S, 30 * S},
    /* four containers */
    {"4 containers, 1 s kernels", 4, {0, 1, 2, 3}, {20, 20, 20, 20}, {S, S, S, S}, 10 * S, 30 * S},
    {"4 containers, mixed kernels", 4, {0, 1, 2, 3}, {10, 20, 30, 30},
     {50 * US, 20 * MS, 1 * S, 1 * S}, 10 * S, 20 * S},
    /* one container of two processes: a 5 s kernel's debt is the container's, and the peer's
     * short launches never erase it */
    {"1 container of 2 processes, 5 s + short", 2, {0}, {10}, {5 * S, 50 * US}, 50 * S,
     150 * S},
    /* the cell the H100 missed by device-busy share while switches were forgiven (+6.6 pp) */
    {"2 containers, short kernels", 2, {0, 1}, {30, 60}, {50 * US, 50 * US}, 2 * S, 10 * S},
};

int main(void) {
  printf("limiter_shapes_test: issue 15 accuracy matrix on the simulated GPU (goal +-%.0f pp)\n",
         GOAL_PP);
  const char *only = getenv("LIMITER_SHAPES_ONLY"); /* substring filter for exploring one cell */
  for (size_t i = 0; i < sizeof(CELLS) / sizeof(CELLS[0]); i++)
    if (only == NULL || strstr(CELLS[i].name, only) != NULL) run_cell(&CELLS[i]);
  return test_summary("limiter_shapes_test");
}

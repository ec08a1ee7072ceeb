/*
 * sm_throttle.c — the SM limit throttles through the real hooks (LD_PRELOAD=libvgpu.so over the
 * fake libcuda with FAKE_CUDA_KERNEL_US > 0, whose kernels take time on a serial engine and whose
 * events complete when their stream's kernels have run).
 *
 *   sm_throttle throttle   saturating loop (bounded queue like a training loop); first with the
 *                          region's sm_limit set to 0 (the solo unlimited rate, same run), then
 *                          at CUDA_DEVICE_SM_LIMIT: kernels completed per second must be the
 *                          limit's share of the solo rate (within a tolerance for a loaded CI
 *                          machine, far from the 100 % an unthrottled run reaches)
 *   sm_throttle degraded   the same measurement when the shared region is unusable (the runner
 *                          points CUDA_DEVICE_MEMORY_SHARED_CACHE at a symlink): the limit must
 *                          still throttle through the process-local region, whose sm_limit the
 *                          test toggles in its own mapping of that memory file
 *   sm_throttle switch     two contexts of one process take turns on the fake GPU, whose
 *                          context switches cost FAKE_CUDA_SWITCH_US (save + restore; the
 *                          library is not told): what the library charged must be the device
 *                          time the process caused (its kernels plus the switches onto its
 *                          contexts), and that the limit's share of the wall time. The code that
 *                          charged kernel time only added the switches on top; the code that
 *                          charged a fixed 150 us per switch was right for 150 us switches only.
 *
 *   sm_throttle streams    STREAMS busy streams in one process (issue 35), each kernel 1/STREAMS
 *                          of the fake GPU's SMs (they run side by side), a few in flight per
 *                          stream, completions polled so no stream holds the loop: at the limit
 *                          every stream progresses and the total rate is the limit's share of
 *                          the solo rate. Fails on a limiter whose timing events serialize the
 *                          streams sharing a hardware queue (more streams than
 *                          CUDA_DEVICE_MAX_CONNECTIONS) or whose gate stops every stream behind
 *                          one slow one
 *
 * Exit 0 = pass. Prints the measured numbers on stderr.
 */
#include <cuda.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "check.h"

unsigned long fakeCudaKernelsDone(void);
long long fakeCudaBusyNs(int ordinal);
long long fakeCudaSmBusyNs(int ordinal);
long long fakeCudaSwitchNs(int ordinal);
unsigned long fakeCudaQueueHeld(int ordinal, long long *ns);
unsigned long fakeCudaLaunchCount(void);
unsigned long fakeCudaDriverCalls(int kind); /* 0 launches, 1 event records, 2 event queries */
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The region mapped read-write: the test plays the node side that changes sm_limit at run time. */
static vgpu_region_t *region_rw(void) {
  const char *p = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  int fd = p ? open(p, O_RDWR) : -1;
  CHECK(fd >= 0);
  void *m = mmap(NULL, VGPU_REGION_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  CHECK(m != MAP_FAILED);
  return m;
}

static unsigned kernel_len = 1; /* blockDim.z: the fake's kernels run this many FAKE_CUDA_KERNEL_US */
#define DEPTH 8 /* batches in flight: 64 ms of queued work rides out a descheduled CI thread */
#define BATCH 8 /* kernels per batch */

typedef struct {
  CUstream stream;
  CUevent done[DEPTH];
  long batch;
} app_t;

/* Runs the saturating loop for `secs`; returns kernels completed per second over the run. */
static double run_for(app_t *a, double secs) {
  double t0 = now_s();
  unsigned long k0 = fakeCudaKernelsDone();
  while (now_s() - t0 < secs) {
    int slot = (int)(a->batch % DEPTH);
    if (a->batch >= DEPTH) CHECK(cuEventSynchronize(a->done[slot]) == CUDA_SUCCESS);
    for (int i = 0; i < BATCH; i++)
      CHECK(cuLaunchKernel(NULL, 132, 1, 1, 256, 1, kernel_len, 0, a->stream, NULL, NULL) ==
            CUDA_SUCCESS);
    CHECK(cuEventRecord(a->done[slot], a->stream) == CUDA_SUCCESS);
    a->batch++;
  }
  return (double)(fakeCudaKernelsDone() - k0) / (now_s() - t0);
}

/*
 * HAMi's vGPUmonitor reading the region file the way its documentation describes, from raw bytes
 * at the v1 offsets (independent of our struct): magic 19920718 at 0, major version 1 at 4, size
 * at least 2 008 952; proc_num at 2 008 896 clamped to [0, 1024]; slot i at 1856 + 1960 i with
 * status at +1928 (0 = skip), hostpid at +4 and device_util[d].sm_util at +1160 + 48 d + 16;
 * the container's utilization is the sum of sm_util over live slots.
 */
typedef struct {
  uint64_t sm_util;   /* summed over live slots */
  int live_slots;
  int hostpids_known; /* live slots with hostpid != 0 */
} hami_view_t;

static hami_view_t hami_read(int dev) {
  hami_view_t v = {0, 0, 0};
  static unsigned char buf[2008952];
  const char *path = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0);
  size_t got = 0;
  while (got < sizeof buf) {
    ssize_t n = pread(fd, buf + got, sizeof buf - got, (off_t)got);
    CHECK(n > 0);
    got += (size_t)n;
  }
  close(fd);
  int32_t magic, procnum, status, hostpid;
  uint32_t major;
  memcpy(&magic, buf, 4);
  memcpy(&major, buf + 4, 4);
  CHECK(magic == 19920718 && major == 1);
  memcpy(&procnum, buf + 2008896, 4);
  if (procnum < 0) procnum = 0;
  if (procnum > 1024) procnum = 1024;
  for (int i = 0; i < procnum; i++) {
    size_t base = 1856 + 1960 * (size_t)i;
    memcpy(&status, buf + base + 1928, 4);
    if (status == 0) continue;
    uint64_t sm;
    memcpy(&sm, buf + base + 1160 + 48 * (size_t)dev + 16, 8);
    memcpy(&hostpid, buf + base + 4, 4);
    v.sm_util += sm;
    v.live_slots++;
    v.hostpids_known += hostpid != 0;
  }
  return v;
}

/* The process-local region of degraded mode: the library's anonymous memory file, mapped in this
 * very process (found by its name in /proc/self/maps). NULL when there is none. */
static vgpu_region_t *local_region(void) {
  FILE *f = fopen("/proc/self/maps", "re");
  CHECK(f != NULL);
  char line[512];
  unsigned long start = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (strstr(line, "memfd:libvgpu-local-region") != NULL && start == 0)
      CHECK(sscanf(line, "%lx-", &start) == 1);
  fclose(f);
  return (vgpu_region_t *)start;
}

typedef struct {
  double solo, solo_busy, limited, lim_busy, share;
  uint64_t throttled_ns;
} throttle_result_t;

/* Solo unlimited rate (the region's sm_limit set to 0), then the rate at `limit`, same run, on
 * `stream` (NULL: a new one). */
static throttle_result_t measure(vgpu_region_t *r, int limit, CUstream stream) {
  throttle_result_t res;
  app_t a;
  memset(&a, 0, sizeof a);
  a.stream = stream;
  if (a.stream == NULL) CHECK(cuStreamCreate(&a.stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  for (int i = 0; i < DEPTH; i++)
    CHECK(cuEventCreate(&a.done[i], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);

  __atomic_store_n(&r->sm_limit[0], 0, __ATOMIC_RELEASE); /* solo unlimited rate, same run */
  run_for(&a, 0.2);
  double b0 = (double)fakeCudaBusyNs(0), t0 = now_s();
  double solo = run_for(&a, 1.0);
  double solo_busy = ((double)fakeCudaBusyNs(0) - b0) / ((now_s() - t0) * 1e9);

  __atomic_store_n(&r->sm_limit[0], (uint64_t)limit, __ATOMIC_RELEASE);
  run_for(&a, 0.5); /* settle */
  const vgpu_region_ext_t *x = (const vgpu_region_ext_t *)((const char *)r + VGPU_EXT_OFFSET);
  uint64_t thr0 = __atomic_load_n(&x->devices[0].throttled_ns, __ATOMIC_ACQUIRE);
  b0 = (double)fakeCudaBusyNs(0);
  t0 = now_s();
  double limited = run_for(&a, 2.0);
  double lim_busy = ((double)fakeCudaBusyNs(0) - b0) / ((now_s() - t0) * 1e9);
  uint64_t thr1 = __atomic_load_n(&x->devices[0].throttled_ns, __ATOMIC_ACQUIRE);
  res.solo = solo;
  res.solo_busy = solo_busy;
  res.limited = limited;
  res.lim_busy = lim_busy;
  res.share = 100.0 * limited / solo;
  res.throttled_ns = thr1 - thr0;
  return res;
}

/* The limit's share of the solo rate, and launches really held back. */
static void check_throttled(const char *what, const throttle_result_t *res, int limit) {
  fprintf(stderr,
          "sm_throttle: %s, %s us kernels, limit %d%%: solo %.0f kernels/s (device busy %.1f%%), "
          "limited %.0f kernels/s = %.1f%% of solo (device busy %.1f%%), throttled %.2f s\n",
          what, getenv("FAKE_CUDA_KERNEL_US"), limit, res->solo, 100 * res->solo_busy,
          res->limited, res->share, 100 * res->lim_busy, (double)res->throttled_ns / 1e9);
  CHECK(res->solo_busy > 0.8); /* the loop saturates the fake GPU when nothing limits it */
  /* +-12 pp: wide enough for a loaded 2-core runner (the gate sleeps on the host clock), far
   * from the ~100 % of a run the limiter does not throttle. */
  CHECK(res->share > limit - 12 && res->share < limit + 12);
  CHECK(res->throttled_ns > 0); /* launches were really held back */
}

/* A context and one allocation: the library has attached its region (shared or local) after. */
static int start_cuda(void) {
  const char *lim_env = getenv("CUDA_DEVICE_SM_LIMIT");
  const char *us_env = getenv("FAKE_CUDA_KERNEL_US");
  CHECK(lim_env != NULL && us_env != NULL && atoi(us_env) > 0);
  CHECK(cuInit(0) == CUDA_SUCCESS);
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, 1) == CUDA_SUCCESS);
  return atoi(lim_env);
}

static int case_throttle(void) {
  int limit = start_cuda();
  vgpu_region_t *r = region_rw();
  CHECK(r->sm_limit[0] == (uint64_t)limit);
  CHECK(local_region() == NULL); /* the shared region is in use, not a degraded one */
  throttle_result_t res = measure(r, limit, NULL);
  hami_view_t busy_view = hami_read(0); /* sm_util describes the last ~1 s: the limited phase */
  CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
  usleep(1500 * 1000);
  hami_view_t idle_view = hami_read(0);
  check_throttled("shared region", &res, limit);
  /* HAMi's monitor sees this container's utilization (HAMi-core's scale: percent), and 0 once
   * the process has been idle for a second; the slot names a host pid (host pid namespace). */
  fprintf(stderr, "sm_throttle: HAMi monitor view: sm_util %lu%% while limited, %lu%% idle, "
          "%d live slot(s), %d with a host pid\n", (unsigned long)busy_view.sm_util,
          (unsigned long)idle_view.sm_util, busy_view.live_slots, busy_view.hostpids_known);
  CHECK(busy_view.live_slots == 1 && busy_view.hostpids_known == 1);
  CHECK(busy_view.sm_util + 12 > (uint64_t)limit && busy_view.sm_util < (uint64_t)limit + 12);
  CHECK(idle_view.sm_util == 0);
  return 0;
}

/* Degraded mode: the process-local region carries the SM limit and the limiter's bucket. */
static int case_degraded(void) {
  int limit = start_cuda();
  vgpu_region_t *r = local_region();
  CHECK(r != NULL); /* the runner made the shared region unusable */
  CHECK(r->initialized_flag == VGPU_REGION_MAGIC);
  CHECK(r->sm_limit[0] == (uint64_t)limit);
  throttle_result_t res = measure(r, limit, NULL);
  check_throttled("degraded (process-local region)", &res, limit);
  return 0;
}

/* One busy stream that shares its hardware queue with the limiter's internal stream: the
 * application created it first and then 7 more (idle) streams, so the internal stream, created at
 * the first limited launch, is the 9th and lands in the busy stream's queue (8 queues,
 * round-robin by creation). A heartbeat recorded there completes only after the kernels queued
 * before it: late, as if another context had held the GPU, although this one ran, and the
 * limiter does not charge that "stretch". NOT FIXED (libvgpu/README.md, "SM limiter on any
 * card"): at 25 / 60 % the stream gets ~45 / ~81 % device time; not in test/run_preload.sh. */
static int case_shared_queue(void) {
  int limit = start_cuda();
  vgpu_region_t *r = region_rw();
  CUstream busy, idle[7];
  CHECK(cuStreamCreate(&busy, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  for (int i = 0; i < 7; i++) CHECK(cuStreamCreate(&idle[i], CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  throttle_result_t res = measure(r, limit, busy);
  check_throttled("stream sharing the internal stream's queue", &res, limit);
  /* Device time (what the limit limits), tighter than the rate check: +-4 pp. */
  CHECK(100 * res.lim_busy > limit - 4 && 100 * res.lim_busy < limit + 4);
  return 0;
}

/* Route 17 (issue 35): more contexts on the device than the limiter's table holds. Four contexts
 * take its slots with short kernels (100 us), then a fifth runs 10 ms kernels back to back. The
 * old library charged the fifth context's launches the device's estimate (100 us each): ~99 %. */
static int case_contexts(void) {
  int limit = start_cuda();
  vgpu_region_t *r = region_rw();
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
  CUcontext primary, extra[4];
  CHECK(cuCtxGetCurrent(&primary) == CUDA_SUCCESS);
  for (int i = 0; i < 4; i++) {
    CHECK(cuCtxCreate_v2(&extra[i], 0, dev) == CUDA_SUCCESS); /* current now */
    if (i == 3) break; /* the fifth: measured below */
  }
  CUcontext takers[4] = {primary, extra[0], extra[1], extra[2]};
  for (int i = 0; i < 4; i++) { /* short kernels: the table's four slots, estimates of 100 us */
    CHECK(cuCtxSetCurrent(takers[i]) == CUDA_SUCCESS);
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    for (int k = 0; k < 20; k++)
      CHECK(cuLaunchKernel(NULL, 132, 1, 1, 256, 1, 1, 0, s, NULL, NULL) == CUDA_SUCCESS);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
  }
  CHECK(cuCtxSetCurrent(extra[3]) == CUDA_SUCCESS);
  kernel_len = 100;
  throttle_result_t res = measure(r, limit, NULL);
  check_throttled("fifth context, 100 x", &res, limit);
  CHECK(100 * res.lim_busy > limit - 4 && 100 * res.lim_busy < limit + 4);
  return 0;
}

/* Route 20 (issue 35): a kernel that runs for seconds (FAKE_CUDA_KERNEL_US=100 x 30 000: 3 s,
 * standing in for a persistent kernel: nothing pre-empts it) while the process keeps launching
 * short kernels on another stream. It is charged as it runs (from LONG_RUN_NS = 2 s on), and the
 * launches behind it wait. The old library charged it only when it ended: nothing by 2.8 s. */
static const vgpu_region_ext_t *persist_x;
static double persist_t0, persist_charged_at;
static void *persist_watch(void *arg) {
  (void)arg;
  while (now_s() - persist_t0 < 2.8) usleep(1000);
  persist_charged_at = (double)__atomic_load_n(&persist_x->devices[0].busy_ns, __ATOMIC_ACQUIRE) / 1e9;
  return NULL;
}
static int case_persistent(void) {
  int limit = start_cuda();
  vgpu_region_t *r = region_rw();
  persist_x = (const vgpu_region_ext_t *)((const char *)r + VGPU_EXT_OFFSET);
  CUstream a, b;
  CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  persist_t0 = now_s();
  pthread_t w;
  CHECK(pthread_create(&w, NULL, persist_watch, NULL) == 0);
  CHECK(cuLaunchKernel(NULL, 132, 1, 1, 256, 1, 30000, 0, a, NULL, NULL) == CUDA_SUCCESS);
  double waited = 0;
  long launches = 0;
  while (now_s() - persist_t0 < 2.8) {
    double l0 = now_s();
    CHECK(cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, b, NULL, NULL) == CUDA_SUCCESS);
    waited += now_s() - l0;
    launches++;
    usleep(10000);
  }
  CHECK(pthread_join(w, NULL) == 0);
  fprintf(stderr,
          "sm_throttle: persistent: limit %d%%: at 2.8 s into a 3 s kernel, %.2f s charged; %ld "
          "launches on another stream waited %.2f s\n",
          limit, persist_charged_at, launches, waited);
  CHECK(persist_charged_at >= 0.5); /* charged as it ran, from ~2 s on (LONG_RUN_NS) */
  CHECK(waited >= 1.0);             /* and the launches behind it waited */
  return 0;
}

/* Turns in flight per context: 32 x (150 us kernel + 150 us switch) x 2 contexts = 19 ms of
 * queued work rides out a descheduled thread on a loaded runner. */
#define TURNS 32
/* One turn per context: a kernel on each context's stream, alternating, at most TURNS turns in
 * flight. Returns the device time (kernels + switches) over the run, as a fraction of it. */
static double run_turns(CUcontext ctx[2], CUstream st[2], CUevent done[2][TURNS], long *turn,
                        double secs, double *kernels_out) {
  double t0 = now_s();
  double k0 = (double)fakeCudaBusyNs(0), s0 = (double)fakeCudaSwitchNs(0);
  while (now_s() - t0 < secs) {
    long i = *turn;
    int c = (int)(i % 2), slot = (int)((i / 2) % TURNS);
    CHECK(cuCtxSetCurrent(ctx[c]) == CUDA_SUCCESS);
    if (i >= 2 * TURNS) CHECK(cuEventSynchronize(done[c][slot]) == CUDA_SUCCESS);
    CHECK(cuLaunchKernel(NULL, 132, 1, 1, 256, 1, 1, 0, st[c], NULL, NULL) == CUDA_SUCCESS);
    CHECK(cuEventRecord(done[c][slot], st[c]) == CUDA_SUCCESS);
    (*turn)++;
  }
  double wall = (now_s() - t0) * 1e9;
  double kernels = (double)fakeCudaBusyNs(0) - k0, sw = (double)fakeCudaSwitchNs(0) - s0;
  *kernels_out = kernels / wall;
  return (kernels + sw) / wall;
}

static int case_switch(void) {
  const char *lim_env = getenv("CUDA_DEVICE_SM_LIMIT");
  CHECK(lim_env != NULL && getenv("FAKE_CUDA_SWITCH_US") != NULL);
  int limit = atoi(lim_env);
  CHECK(cuInit(0) == CUDA_SUCCESS);
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
  CUcontext ctx[2];
  CUstream st[2];
  CUevent done[2][TURNS];
  for (int c = 0; c < 2; c++) {
    CHECK(cuCtxCreate_v2(&ctx[c], 0, dev) == CUDA_SUCCESS);
    CHECK(cuStreamCreate(&st[c], CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    for (int i = 0; i < TURNS; i++)
      CHECK(cuEventCreate(&done[c][i], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
  }
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, 1) == CUDA_SUCCESS); /* the region exists from here on */
  vgpu_region_t *r = region_rw();
  CHECK(r->sm_limit[0] == (uint64_t)limit);
  long turn = 0;
  double solo_k, lim_k;
  __atomic_store_n(&r->sm_limit[0], 0, __ATOMIC_RELEASE); /* unlimited, same run */
  run_turns(ctx, st, done, &turn, 0.2, &solo_k);
  double solo = run_turns(ctx, st, done, &turn, 1.0, &solo_k);
  __atomic_store_n(&r->sm_limit[0], (uint64_t)limit, __ATOMIC_RELEASE);
  run_turns(ctx, st, done, &turn, 0.5, &lim_k); /* settle */
  const vgpu_region_ext_t *x = (const vgpu_region_ext_t *)((const char *)r + VGPU_EXT_OFFSET);
  double c0 = (double)__atomic_load_n(&x->devices[0].busy_ns, __ATOMIC_ACQUIRE), t0 = now_s();
  double limited = run_turns(ctx, st, done, &turn, 2.5, &lim_k);
  double charged = ((double)__atomic_load_n(&x->devices[0].busy_ns, __ATOMIC_ACQUIRE) - c0) /
                   ((now_s() - t0) * 1e9);
  fprintf(stderr,
          "sm_throttle: switch: %s us switches, limit %d%%: unlimited device busy %.1f%% "
          "(kernels %.1f%%), limited device busy %.1f%% (kernels %.1f%%, switches %.1f%%), "
          "charged %.1f%%\n",
          getenv("FAKE_CUDA_SWITCH_US"), limit, 100 * solo, 100 * solo_k, 100 * limited,
          100 * lim_k, 100 * (limited - lim_k), 100 * charged);
  CHECK(solo > 0.6);             /* the turns keep the fake GPU busy when nothing limits them */
  CHECK(solo - solo_k > 0.2);    /* and the switches are a large part of it */
  CHECK(limited - lim_k > 0.02); /* still switching while limited */
  /* What the library charged is the device time the process caused, kernels plus switches,
   * whatever a switch costs (it is not told): +-2 pp. The fixed 150 us charge gave 26.0 / 33.4 /
   * 47.1 / 53.1 % device time at a 30 % limit for 50 / 150 / 400 / 1000 us switches. */
  CHECK(fabs(100 * charged - 100 * limited) <= 2.0);
  /* ...and that is the limit: +-4 pp on a loaded 2-core runner (28-32 % in quiet runs; a
   * descheduled test loop makes the process use less than its limit, never more). */
  CHECK(100 * limited > limit - 4 && 100 * limited < limit + 4);
  return 0;
}

#ifndef STREAMS_SLEEP_US
#define STREAMS_SLEEP_US 500
#endif
#define MAX_TEST_STREAMS 128
typedef struct {
  CUstream st[MAX_TEST_STREAMS];
  CUevent ev[MAX_TEST_STREAMS][64];
  int out[MAX_TEST_STREAMS], oldest[MAX_TEST_STREAMS];
  long done[MAX_TEST_STREAMS];
  unsigned long queries; /* cuEventQuery calls of the loop itself */
  int n, depth; /* streams, kernels in flight per stream (64 ms of work queued at least) */
  unsigned blocks; /* per kernel: 1/n of the fake GPU's 132 SMs, so n streams fill it */
} streams_app_t;

/* Keeps `depth` kernels in flight on every stream for `secs`; returns completions per second and
 * the slowest stream's completions per second. */
static double run_streams(streams_app_t *a, double secs, double *slowest) {
  long d0[MAX_TEST_STREAMS];
  for (int i = 0; i < a->n; i++) d0[i] = a->done[i];
  double t0 = now_s();
  while (now_s() - t0 < secs) {
    usleep(STREAMS_SLEEP_US); /* a loaded runner: leave the CPU to others, the queues hold 64 ms */
    for (int i = 0; i < a->n; i++)
      while (a->out[i] > 0 && (a->queries++, cuEventQuery(a->ev[i][a->oldest[i]])) == CUDA_SUCCESS) {
        a->oldest[i] = (a->oldest[i] + 1) % a->depth;
        a->out[i]--;
        a->done[i]++;
      }
    /* Breadth-first (one kernel per stream per pass), as multi-stream applications issue: a
     * stream's second kernel queued right behind its first would hold every stream sharing its
     * hardware queue (fake_cuda_engine.inc), with or without the limiter. */
    for (int pass = 0; pass < a->depth; pass++)
      for (int i = 0; i < a->n; i++) {
        if (a->out[i] >= a->depth) continue;
        CHECK(cuLaunchKernel(NULL, a->blocks, 1, 1, 32, 1, 1, 0, a->st[i], NULL, NULL) ==
              CUDA_SUCCESS);
        CHECK(cuEventRecord(a->ev[i][(a->oldest[i] + a->out[i]) % a->depth], a->st[i]) ==
              CUDA_SUCCESS);
        a->out[i]++;
      }
  }
  double wall = now_s() - t0;
  long total = 0, min = -1;
  for (int i = 0; i < a->n; i++) {
    long k = a->done[i] - d0[i];
    total += k;
    if (min < 0 || k < min) min = k;
  }
  *slowest = (double)min / wall;
  return (double)total / wall;
}

/* What the process spent on the host (CPU time, all threads) and the driver calls the fake saw. */
typedef struct {
  double cpu_s;
  unsigned long launches, records, queries, app_queries;
} host_cost_t;
static host_cost_t host_cost(const streams_app_t *a) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  host_cost_t h = {(double)ts.tv_sec + (double)ts.tv_nsec / 1e9, fakeCudaDriverCalls(0),
                   fakeCudaDriverCalls(1), fakeCudaDriverCalls(2), a->queries};
  return h;
}
/* Between two snapshots: CPU ns per launch; *extra = the event records and queries per launch
 * that the loop did not make (its own: one record per launch and a->queries), the library's. */
static double host_per_launch(const host_cost_t *x, const host_cost_t *y, double *extra) {
  double n = (double)(y->launches - x->launches);
  if (n < 1) n = 1;
  double own = (double)(y->launches - x->launches) + (double)(y->app_queries - x->app_queries);
  *extra = ((double)(y->records - x->records) + (double)(y->queries - x->queries) - own) / n;
  return (y->cpu_s - x->cpu_s) * 1e9 / n;
}

static int case_streams(void) {
  int limit = start_cuda();
  const char *n_env = getenv("STREAMS");
  CHECK(n_env != NULL);
  static streams_app_t a;
  a.n = atoi(n_env);
  CHECK(a.n >= 1 && a.n <= MAX_TEST_STREAMS);
  a.depth = a.n >= 32 ? 4 : 64 / a.n;
  a.blocks = a.n >= 132 ? 1 : 132 / (unsigned)a.n;
  for (int i = 0; i < a.n; i++) {
    CHECK(cuStreamCreate(&a.st[i], CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    for (int k = 0; k < a.depth; k++)
      CHECK(cuEventCreate(&a.ev[i][k], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
  }
  vgpu_region_t *r = region_rw();
  double slow_solo, slow_lim;
  __atomic_store_n(&r->sm_limit[0], 0, __ATOMIC_RELEASE); /* solo, same run */
  run_streams(&a, 0.3, &slow_solo);
  double b0 = (double)fakeCudaSmBusyNs(0), t0 = now_s(); /* SMs: all streams run side by side */
  host_cost_t h0 = host_cost(&a);
  double solo = run_streams(&a, 1.0, &slow_solo);
  host_cost_t h1 = host_cost(&a);
  double solo_busy = ((double)fakeCudaSmBusyNs(0) - b0) / ((now_s() - t0) * 1e9);
  __atomic_store_n(&r->sm_limit[0], (uint64_t)limit, __ATOMIC_RELEASE);
  run_streams(&a, 0.5, &slow_lim);
  const vgpu_region_ext_t *x = (const vgpu_region_ext_t *)((const char *)r + VGPU_EXT_OFFSET);
  double c0 = (double)__atomic_load_n(&x->devices[0].busy_ns, __ATOMIC_ACQUIRE);
  b0 = (double)fakeCudaBusyNs(0);
  double sm0 = (double)fakeCudaSmBusyNs(0);
  long long held_ns0;
  unsigned long held0 = fakeCudaQueueHeld(0, &held_ns0), k0 = fakeCudaLaunchCount();
  t0 = now_s();
  host_cost_t h2 = host_cost(&a);
  double lim = run_streams(&a, 2.0, &slow_lim);
  host_cost_t h3 = host_cost(&a);
  double wall_ns = (now_s() - t0) * 1e9;
  double calls_solo, calls_lim;
  double cpu_solo = host_per_launch(&h0, &h1, &calls_solo);
  double cpu_lim = host_per_launch(&h2, &h3, &calls_lim);
  double lim_busy = ((double)fakeCudaBusyNs(0) - b0) / wall_ns;
  double lim_sm = ((double)fakeCudaSmBusyNs(0) - sm0) / wall_ns;
  double charged = ((double)__atomic_load_n(&x->devices[0].busy_ns, __ATOMIC_ACQUIRE) - c0) / wall_ns;
  double share = 100.0 * lim / solo;
  long long held_ns1;
  unsigned long held = fakeCudaQueueHeld(0, &held_ns1) - held0, launched = fakeCudaLaunchCount() - k0;
  double held_pct = launched ? 100.0 * (double)held / (double)launched : 0;
  fprintf(stderr, "sm_throttle: streams: region: launches %lu, delayed %lu, throttled %.2f s\n",
          (unsigned long)x->devices[0].launches_total, (unsigned long)x->devices[0].launches_delayed,
          (double)x->devices[0].throttled_ns / 1e9);
  fprintf(stderr,
          "sm_throttle: streams: %d streams, limit %d%%: solo %.0f kernels/s, limited %.0f "
          "kernels/s = %.1f%% of solo (solo device busy %.1f%%); slowest stream %.1f/s (solo "
          "%.1f/s); limited: device busy %.1f%% (SMs %.1f%%), charged %.1f%%; kernels held "
          "behind a queue barrier %lu of %lu (%.2f%%, %.1f ms)\n",
          a.n, limit, solo, lim, share, 100 * solo_busy, slow_lim, slow_solo, 100 * lim_busy,
          100 * lim_sm, 100 * charged, held, launched, held_pct, (double)(held_ns1 - held_ns0) / 1e6);
  fprintf(stderr,
          "sm_throttle: streams: host per launch: solo %.0f ns CPU, %.2f extra event calls; "
          "limited %.0f ns CPU (library +%.0f ns), %.2f event calls of the library\n",
          cpu_solo, calls_solo, cpu_lim, cpu_lim - cpu_solo, calls_lim);
  /* Speed-independent checks only (the host's speed and load set the throughput: the work done
   * as a share of solo, printed above, is a GPU goal, libvgpu/gpu/streams_probe.sh):
   * 1. The limiter's timing events do not serialize the streams. The fake's hardware queues hold
   *    a queue behind every timing event recorded on it (fake_cuda_engine.inc), and the fake
   *    counts the kernels such a barrier held: 0-2 of up to 172 000 with the crowd mode; the
   *    limiter that bracketed every launch with timing events held 36-93 % of them with 33-128
   *    streams (its share of the solo rate there, in the fake and on an H100: libvgpu/README.md). */
  CHECK(held * 100 <= launched);
  /* 2. The limit holds: neither the device time charged nor the time the device was busy (some
   *    kernel running, NVML's utilization) is past it, and no device time goes uncharged (the old
   *    limiter, 8 streams: 4-12 % charged for a device 80-99 % busy, at 90 % and at 25 %). A
   *    loaded host may leave the process below its limit: no lower bound on either. */
  CHECK(100 * charged <= limit + 2.0 && 100 * lim_busy <= limit + 2.0);
  CHECK(100 * charged >= 100 * lim_busy - 3.0);
  /* 3. Every stream progresses (the old gate stopped all of them behind one "overdue" stream):
   *    the slowest does at least a quarter of the average stream's work in the same phase. Under
   *    ASan/UBSan (test/run_preload.sh with SANITIZE) the launch path is several times slower
   *    and the loop cannot keep 33-128 streams evenly fed: there, only that it progresses. */
  CHECK(slow_lim > 0);
  if (getenv("STREAMS_BOUNDS_ONLY") == NULL) CHECK(slow_lim >= lim / a.n / 4);
  /* 4. Few driver calls per launch when crowded (each costs ~1-3 us on a GPU): the limiter that
   *    recorded an E per launch and queried every stream's at every poll made 7-10 (33-128
   *    streams, libvgpu/README.md "Many busy streams"); one E per stream in flight: 1.4-3.4. */
  if (a.n > 8) CHECK(calls_lim <= 5.0);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "streams") == 0) return case_streams();
  if (argc == 2 && strcmp(argv[1], "throttle") == 0) return case_throttle();
  if (argc == 2 && strcmp(argv[1], "degraded") == 0) return case_degraded();
  if (argc == 2 && strcmp(argv[1], "switch") == 0) return case_switch();
  if (argc == 2 && strcmp(argv[1], "shared_queue") == 0) return case_shared_queue();
  if (argc == 2 && strcmp(argv[1], "contexts") == 0) return case_contexts();
  if (argc == 2 && strcmp(argv[1], "persistent") == 0) return case_persistent();
  fprintf(stderr, "usage: %s throttle|degraded|switch|streams|shared_queue|contexts|persistent\n",
          argv[0]);
  return 2;
}

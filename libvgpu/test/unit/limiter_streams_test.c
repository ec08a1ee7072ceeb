/*
 * limiter_streams_test.c — many busy streams in one host-bound process (issue 35), in virtual
 * time: gpu/limiter_bench.cu's "streams" shape against a GPU whose streams all run side by side.
 *
 * The model (deterministic, no threads): one host thread whose clock advances only by what its
 * driver calls cost (a launch, an event record, an event query: H200-like costs, so that one
 * pass over 33 streams takes about one 200 us kernel, as the bench measured: ~5.8 us per kernel)
 * and by the limiter's sleeps. The GPU runs every stream's kernels in order and all streams at
 * once (kernels of 1/N of the GPU fit side by side); an event completes when the work queued
 * before it on its stream is done. The application keeps two kernels in flight per stream and
 * refills a stream as soon as a poll of its oldest event says done (no sleeps): every driver
 * call the limiter adds and every pause that drains the streams costs it throughput, as on the
 * GPU (H200: 33 streams at a 90 % limit did 54 % of the no-library rate, README "Many busy
 * streams").
 *
 * Per N (1, 8, 33, 128) and limit: the kernels the application completed per second under the
 * limit against the same loop with the limit lifted (the library's unlimited path: no driver
 * calls), the device's busy share (the union of kernel runs, NVML's utilization) and the device
 * time charged. Checked: at 90 %, throughput >= 88 % of unlimited (83 % with 128 streams, see
 * below); at every limit, busy and charged within 2 pp of the limit (1 stream: 1 pp) and charged
 * >= busy - 1 pp; from 33 streams up, <= 0.3 event records + queries of the limiter per launch.
 * The library before the lazy covers (limiter_crowd.c): 84.9 / 60.7 % at 90 % with 33 / 128
 * streams and 1.5-2 event calls per launch (fails). Runs in ~1 s.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limiter.h"

#define US 1000LL
#define MS 1000000LL
#define MAXS 160
#define MAXEV 4096

#include "sim_check.h"

/* Host cost of the driver's calls (ns of the calling thread). */
static const int64_t COST_LAUNCH = 2500, COST_RECORD = 1500, COST_QUERY = 600, COST_CHEAP = 50;

static struct {
  int64_t now;
  int64_t kernel_ns;
  int nstreams;
  int64_t tail[MAXS]; /* when the stream's queued work ends */
  int64_t win_a, win_b; /* the kernels' runs inside it, for the device's busy union */
  struct {
    int64_t a, b;
  } *seg;
  long nseg, capseg;
  struct {
    int used, timing;
    int64_t done; /* 0 = never recorded */
  } ev[MAXEV];
  unsigned long calls[3]; /* the limiter's event records, event queries, capture-mode exchanges */
} G;

static void spend(int64_t ns) { G.now += ns; }

static void busy_add(int64_t a, int64_t b) { /* a kernel runs [a, b): kept for the union */
  if (b <= G.win_a || a >= G.win_b || G.win_b == 0) return;
  if (G.nseg == G.capseg) {
    G.capseg = G.capseg ? 2 * G.capseg : 1 << 16;
    G.seg = realloc(G.seg, (size_t)G.capseg * sizeof(*G.seg));
    if (G.seg == NULL) abort();
  }
  G.seg[G.nseg].a = a > G.win_a ? a : G.win_a;
  G.seg[G.nseg].b = b < G.win_b ? b : G.win_b;
  G.nseg++;
}
static int seg_cmp(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return a < b ? -1 : a > b;
}
static int64_t busy_union(void) {
  qsort(G.seg, G.nseg, sizeof(*G.seg), seg_cmp);
  int64_t total = 0, ca = 0, cb = -1;
  for (long i = 0; i < G.nseg; i++) {
    if (G.seg[i].a > cb) {
      if (cb > ca) total += cb - ca;
      ca = G.seg[i].a;
      cb = G.seg[i].b;
    } else if (G.seg[i].b > cb) {
      cb = G.seg[i].b;
    }
  }
  if (cb > ca) total += cb - ca;
  return total;
}

static int sidx(CUstream s) { return (int)(intptr_t)s - 1; }

/* 0: streams independent; else they are mapped round-robin onto this many hardware queues
 * dispatched in order (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default): a kernel starts no earlier
 * than the one queued before it in its queue, so after a pause that drained every stream the
 * application's refill (two per stream, back to back) runs the queue's streams one after another
 * until the phases even out (the fake driver's rule, fake_cuda_engine.inc). */
static int g_queues;
static int64_t g_qdispatch[64];
static void launch(CUstream s) {
  spend(COST_LAUNCH);
  int i = sidx(s);
  int64_t start = G.tail[i] > G.now ? G.tail[i] : G.now;
  if (g_queues > 0) { /* in-order dispatch: no earlier than the kernel queued before it started */
    int64_t *qd = &g_qdispatch[i % g_queues];
    if (*qd > start) start = *qd;
    *qd = start;
  }
  G.tail[i] = start + G.kernel_ns;
  busy_add(start, G.tail[i]);
}

static CUresult d_event_create(CUevent *e, unsigned flags) {
  for (int i = 0; i < MAXEV; i++)
    if (!G.ev[i].used) {
      G.ev[i].used = 1;
      G.ev[i].timing = !(flags & CU_EVENT_DISABLE_TIMING);
      G.ev[i].done = 0;
      *e = (CUevent)(intptr_t)(i + 1);
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult d_event_destroy(CUevent e) {
  G.ev[(intptr_t)e - 1].used = 0;
  return CUDA_SUCCESS;
}
static CUresult record(CUevent e, CUstream s) {
  spend(COST_RECORD);
  int64_t t = G.tail[sidx(s)];
  G.ev[(intptr_t)e - 1].done = t > G.now ? t : G.now;
  return CUDA_SUCCESS;
}
static CUresult query(CUevent e) {
  spend(COST_QUERY);
  int64_t d = G.ev[(intptr_t)e - 1].done;
  return d != 0 && d <= G.now ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
static CUresult d_record(CUevent e, CUstream s) {
  G.calls[0]++;
  return record(e, s);
}
static CUresult d_query(CUevent e) {
  G.calls[1]++;
  return query(e);
}
static CUresult d_sync(CUevent e) {
  int64_t d = G.ev[(intptr_t)e - 1].done;
  if (d > G.now) G.now = d;
  return CUDA_SUCCESS;
}
static CUresult d_elapsed(float *ms, CUevent a, CUevent b) {
  spend(COST_CHEAP);
  int64_t ta = G.ev[(intptr_t)a - 1].done, tb = G.ev[(intptr_t)b - 1].done;
  if (ta == 0 || tb == 0 || !G.ev[(intptr_t)a - 1].timing || !G.ev[(intptr_t)b - 1].timing)
    return CUDA_ERROR_INVALID_HANDLE;
  if (ta > G.now || tb > G.now) return CUDA_ERROR_NOT_READY;
  *ms = (float)((double)(tb - ta) / 1e6);
  return CUDA_SUCCESS;
}
static CUresult d_stream_create(CUstream *s, unsigned flags) {
  (void)flags;
  if (G.nstreams >= MAXS) return CUDA_ERROR_OUT_OF_MEMORY;
  *s = (CUstream)(intptr_t)(++G.nstreams);
  return CUDA_SUCCESS;
}
static CUresult d_stream_destroy(CUstream s) {
  (void)s;
  return CUDA_SUCCESS;
}
static CUresult d_ctx_get(CUcontext *c) {
  spend(COST_CHEAP);
  *c = (CUcontext)(intptr_t)1;
  return CUDA_SUCCESS;
}
static CUresult d_capturing(CUstream s, CUstreamCaptureStatus *st) {
  (void)s;
  spend(COST_CHEAP);
  *st = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
static CUresult d_exchange_capture(CUstreamCaptureMode *mode) {
  spend(COST_CHEAP);
  G.calls[2]++;
  *mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  return CUDA_SUCCESS;
}
static int64_t d_now(void *arg) {
  (void)arg;
  return G.now;
}
static void d_sleep(void *arg, int64_t ns) {
  (void)arg;
  G.now += ns + 20 * US; /* nanosleep's overshoot */
}

typedef struct {
  double per_s, busy, charged, records, queries, waits, wait_ms, exchanges;
} result_t;

/* The bench's loop from G.now for `len` ns (completions counted inside [a, a + len) only). */
static double app_loop(int n, CUstream *st, CUevent (*ev)[2], int *out, int *oldest,
                       vgpu_limiter_t *lim, int64_t len) {
  int64_t a = G.now, b = a + len;
  long done = 0;
  while (G.now < b) {
    for (int i = 0; i < n; i++) {
      while (out[i] > 0 && query(ev[i][oldest[i]]) == CUDA_SUCCESS) {
        if (G.now < b) done++;
        oldest[i] ^= 1;
        out[i]--;
      }
      while (out[i] < 2) {
        vgpu_limiter_before(lim, 0, st[i]);
        launch(st[i]);
        vgpu_limiter_after(lim, 0, st[i]);
        record(ev[i][oldest[i] ^ out[i]], st[i]);
        out[i]++;
      }
    }
  }
  return (double)done / ((double)len / 1e9);
}

static result_t run_case(int n, int limit, double *unlimited) {
  memset(&G, 0, sizeof(G));
  memset(g_qdispatch, 0, sizeof(g_qdispatch));
  G.now = 1000 * 1000 * MS;
  G.kernel_ns = 200 * US;
  G.win_a = G.win_b = 0;
  vgpu_region_t *region = calloc(1, sizeof(*region));
  vgpu_region_ext_t *ext = calloc(1, sizeof(*ext));
  if (region == NULL || ext == NULL) abort();
  region->device_num = 1;
  region->utilization_switch = 1;
  region->priority = 1;
  vgpu_limiter_driver_t drv;
  memset(&drv, 0, sizeof(drv));
  drv.cuEventCreate = d_event_create;
  drv.cuEventDestroy = d_event_destroy;
  drv.cuEventRecord = d_record;
  drv.cuEventQuery = d_query;
  drv.cuEventSynchronize = d_sync;
  drv.cuEventElapsedTime = d_elapsed;
  drv.cuStreamCreate = d_stream_create;
  drv.cuStreamDestroy = d_stream_destroy;
  drv.cuCtxGetCurrent = d_ctx_get;
  drv.cuStreamIsCapturing = d_capturing;
  drv.cuThreadExchangeStreamCaptureMode = d_exchange_capture;
  drv.now_ns = d_now;
  drv.sleep_ns = d_sleep;
  vgpu_limiter_config_t cfg = {region, ext, 1, VGPU_LIMITER_POLICY_DEFAULT, {0}, NULL};
  vgpu_limiter_t *lim = vgpu_limiter_create(&drv, &cfg);
  static CUstream st[MAXS];
  static CUevent ev[MAXS][2];
  static int out[MAXS], oldest[MAXS];
  for (int i = 0; i < n; i++) {
    d_stream_create(&st[i], 0);
    d_event_create(&ev[i][0], CU_EVENT_DISABLE_TIMING);
    d_event_create(&ev[i][1], CU_EVENT_DISABLE_TIMING);
    out[i] = oldest[i] = 0;
  }
  region->sm_limit[0] = 0; /* the limit lifted: the library's unlimited path */
  app_loop(n, st, ev, out, oldest, lim, 200 * MS);
  double solo = app_loop(n, st, ev, out, oldest, lim, 1000 * MS);
  region->sm_limit[0] = (uint64_t)limit;
  app_loop(n, st, ev, out, oldest, lim, 1000 * MS); /* settle (the trim) */
  int64_t len = 3000 * MS;
  G.win_a = G.now;
  G.win_b = G.now + len;
  unsigned long r0 = G.calls[0], q0 = G.calls[1], x0 = G.calls[2];
  uint64_t c0 = __atomic_load_n(&ext->devices[0].busy_ns, __ATOMIC_ACQUIRE);
  uint64_t l0 = ext->devices[0].launches_total, w0 = ext->devices[0].launches_delayed;
  uint64_t th0 = ext->devices[0].throttled_ns;
  result_t res;
  res.per_s = app_loop(n, st, ev, out, oldest, lim, len);
  vgpu_limiter_poll(lim, 0);
  double launches = (double)(ext->devices[0].launches_total - l0);
  if (launches < 1) launches = 1;
  res.busy = 100.0 * (double)busy_union() / (double)len;
  res.charged =
      100.0 * (double)(__atomic_load_n(&ext->devices[0].busy_ns, __ATOMIC_ACQUIRE) - c0) / (double)len;
  res.waits = (double)(ext->devices[0].launches_delayed - w0) / ((double)len / 1e9);
  res.wait_ms = (double)(ext->devices[0].throttled_ns - th0) / 1e6 / (double)(ext->devices[0].launches_delayed - w0 + 1);
  res.exchanges = (double)(G.calls[2] - x0) / launches;
  res.records = (double)(G.calls[0] - r0) / launches;
  res.queries = (double)(G.calls[1] - q0) / launches;
  *unlimited = solo;
  vgpu_limiter_destroy(lim);
  free(G.seg);
  free(region);
  free(ext);
  return res;
}

int main(void) {
  const int ns[] = {1, 8, 33, 128};
  const int limits[] = {90, 25};
  for (int qi = 0; qi < 2; qi++)
    for (int a = 0; a < 4; a++)
    for (int b = 0; b < 2; b++) {
      g_queues = qi == 0 ? 0 : 8;
      if (g_queues > 0 && ns[a] <= 8) continue; /* a stream per queue: the same as above */
      double solo;
      result_t r = run_case(ns[a], limits[b], &solo);
      double thr = 100.0 * r.per_s / solo;
      printf("  %s%3d streams, limit %d%%: %.1f%% of unlimited (%.0f of %.0f kernels/s), busy %.2f%%, "
             "charged %.2f%%; the limiter's records %.3f, queries %.3f per launch; %.1f waits/s of %.2f ms\n",
             g_queues ? "8 queues: " : "", ns[a], limits[b], thr, r.per_s, solo, r.busy, r.charged, r.records, r.queries, r.waits, r.wait_ms);
      double tol = ns[a] == 1 ? 1.0 : 2.0;
      CHECK(fabs(r.busy - limits[b]) <= tol, "busy %.2f%% at %d%%", r.busy, limits[b]);
      CHECK(r.charged >= r.busy - 1.0, "charged %.2f%% < busy %.2f%%", r.charged, r.busy);
      CHECK(r.charged <= limits[b] + tol, "charged %.2f%% at %d%%", r.charged, limits[b]);
      /* Issue 35's goal, >= 88 % of the unlimited work at 90 %. With 128 streams the loop is
       * host-bound (~4.6 us per kernel) and the launch hook's two cheap driver calls alone
       * (context, capture status: 50 ns each here) take 2.2 % of it, and on 8 queues each of the
       * 3 pauses a second is followed by a refill that runs each queue's 16 streams one after
       * another: 83 % there (not the goal). The library before this change: 84.9 / 60.7 %
       * (33 / 128 streams), with 8 queues 78.5 / 70.9 %. */
      if (limits[b] == 90) {
        double want = ns[a] >= 128 ? 83.0 : 88.0;
        CHECK(thr >= want, "throughput %.1f%% of unlimited at 90%% (want >= %.0f)", thr, want);
      }
      /* Few event calls per launch once crowded (one E per stream per CROWD_COVER_NS). */
      if (ns[a] > 8) CHECK(r.records + r.queries <= 0.3, "%.3f event calls per launch", r.records + r.queries);
      /* ...and no capture-mode exchange around a crowded launch that makes no driver call (two
       * per launch before: ~2 % of the loop at 128 streams). */
      if (ns[a] > 8) CHECK(r.exchanges <= 0.3, "%.3f capture-mode exchanges per launch", r.exchanges);
    }
  return test_summary("limiter_streams_test");
}

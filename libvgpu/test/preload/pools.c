/*
 * pools.c — stream-ordered allocations under LD_PRELOAD against the fake driver, whose pools grow
 * in granules larger than the request like the real driver's (test/run_preload.sh runs these with
 * FAKE_CUDA_POOL_GRANULE=32 MiB, the step measured on H100/H200). `pools <case>`; exit 0 = pass.
 *
 * What they prove: the container's count is a hard bound for pools too — a request whose pool
 * growth would cross the limit is refused before the driver is asked (reserve ahead the growth
 * rounded up to the step); growth the estimate missed is undone (free, synchronize, trim) when it
 * does not fit; threads and processes racing for one limit never push the count above it; and the
 * count equals what the pools physically reserve after allocations, frees, synchronizes, release
 * thresholds and trims.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>

#include "cases.h"

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuStreamSynchronize_ptsz(CUstream hStream);

#define STEP (32 * MiB) /* FAKE_CUDA_POOL_GRANULE */

/* One entry point of the four; pool NULL = the device's current pool. */
static CUresult alloc_via(int how, CUdeviceptr *d, size_t n, CUmemoryPool pool) {
  switch (how) {
    case 0: return cuMemAllocAsync(d, n, 0);
    case 1: return cuMemAllocAsync_ptsz(d, n, 0);
    case 2: return cuMemAllocFromPoolAsync(d, n, pool, 0);
    default: return cuMemAllocFromPoolAsync_ptsz(d, n, pool, 0);
  }
}

/* Limit 48 MiB, step 32 MiB. 1 MiB requests fill the first 32 MiB step; the 33rd would grow the
 * pool by another 32 MiB to 64 MiB: refused before the driver is asked, for every entry point.
 * (The old accounting reserved only the 1 MiB and ended at 64 MiB.) */
static int case_chunk_overshoot(void) {
  setup();
  for (int how = 0; how < 4; how++) {
    CUmemoryPool pool = how >= 2 ? make_pool() : NULL;
    CUdeviceptr held[64];
    int n = 0;
    CUresult rc;
    while ((rc = alloc_via(how, &held[n], 1 * MiB, pool)) == CUDA_SUCCESS) {
      CHECK(test_used(0) <= 48 * MiB);
      CHECK(++n < 64);
    }
    CHECK(rc == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ_U(n, 32);
    CHECK_EXACT(STEP); /* the limit minus less than one step, never above */
    /* A larger request whose growth crosses the limit: 20 MiB fits 12 MiB of free space, the rest
     * needs a whole step. */
    for (int i = 0; i < n; i++) CHECK(cuMemFreeAsync(held[i], 0) == CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(0) == CUDA_SUCCESS);
    CHECK_EXACT(0);
    CUdeviceptr a, b;
    CHECK(alloc_via(how, &a, 20 * MiB, pool) == CUDA_SUCCESS);
    CHECK_EXACT(STEP);
    CHECK(alloc_via(how, &b, 20 * MiB, pool) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EXACT(STEP);
    CHECK(alloc_via(how, &b, 12 * MiB, pool) == CUDA_SUCCESS); /* exactly the free space */
    CHECK_EXACT(STEP);
    CHECK(cuMemFreeAsync(a, 0) == CUDA_SUCCESS);
    CHECK(cuMemFreeAsync(b, 0) == CUDA_SUCCESS);
    CHECK(cuStreamSynchronize_ptsz(0) == CUDA_SUCCESS);
    CHECK_EXACT(0);
    if (pool) CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS);
  }
  const vgpu_region_ext_t *e = test_ext();
  CHECK(e->devices[0].oom_rejections == 8); /* every refusal was counted (and logged) */
  return 0;
}

/* The estimate can be wrong: a block freed on a stream is not reusable until the host
 * synchronizes, so free space that looks available is not, and the pool grows anyway. When that
 * growth does not fit, the allocation is undone (freed, stream synchronized, pool trimmed back)
 * and refused; the count never shows the overshoot. */

static int case_undo(void) {
  setup();
  CUdeviceptr w;
  CHECK(cuMemAllocAsync(&w, 1, 0) == CUDA_SUCCESS); /* registers the slot before sampling */
  CHECK(cuMemFreeAsync(w, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
  struct test_sampler smp;
  CHECK(test_sampler_start(&smp, 48 * MiB) == 0);
  /* Default pool, release threshold 0: the synchronize of the undo releases everything unused. */
  CUdeviceptr a, b;
  CHECK(cuMemAllocAsync(&a, 20 * MiB, 0) == CUDA_SUCCESS);
  CHECK_EXACT(STEP);
  CHECK(cuMemFreeAsync(a, 0) == CUDA_SUCCESS); /* USED 0, but the 20 MiB are pending */
  CHECK(cuMemAllocAsync(&b, 24 * MiB, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ_U(b, 0);
  CHECK_EXACT(0);
  CHECK(cuMemAllocAsync(&b, 24 * MiB, 0) == CUDA_SUCCESS); /* after the synchronize it fits */
  CHECK_EXACT(STEP);
  CHECK(cuMemFreeAsync(b, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK_EXACT(0);
  /* Explicit pool keeping everything (threshold max): the synchronize releases nothing, the trim
   * gives back exactly the growth that did not fit. */
  CUmemoryPool pool = make_pool();
  cuuint64_t keep_all = UINT64_MAX;
  CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all) == CUDA_SUCCESS);
  CHECK(cuMemAllocFromPoolAsync(&a, 20 * MiB, pool, 0) == CUDA_SUCCESS);
  CHECK(cuMemFreeAsync(a, 0) == CUDA_SUCCESS);
  CHECK(cuMemAllocFromPoolAsync_ptsz(&b, 24 * MiB, pool, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EXACT(STEP); /* the first step stays (kept by the threshold), the second was trimmed */
  CHECK(cuMemAllocFromPoolAsync(&b, 24 * MiB, pool, 0) == CUDA_SUCCESS); /* reuses the kept step */
  CHECK_EXACT(STEP);
  CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  CHECK_EQ_U(test_sampler_stop(&smp), 0); /* 0 = never above 48 MiB */
  return 0;
}

/* Counts stay exact: frees (kept until a synchronize), every synchronize hook, release threshold,
 * trim, synchronous cuMemFree of a pool block, pool destruction. Limit 1 GiB. */
static int case_exact(void) {
  setup();
  CUdeviceptr a, b;
  CHECK(cuMemAllocAsync(&a, 100 * MiB, 0) == CUDA_SUCCESS);
  CHECK_EXACT(4 * STEP); /* 100 MiB -> 128 MiB */
  CHECK(cuMemAllocAsync(&b, 10 * MiB, 0) == CUDA_SUCCESS);
  CHECK_EXACT(4 * STEP); /* fits the 28 MiB left */
  CHECK(cuMemFreeAsync(a, 0) == CUDA_SUCCESS);
  CHECK(cuMemFreeAsync(b, 0) == CUDA_SUCCESS);
  CHECK_EXACT(4 * STEP); /* the pool holds them until the host synchronizes */
  CHECK(cuStreamSynchronize(0) == CUDA_SUCCESS);
  CHECK_EXACT(0); /* released at the synchronize, counted at once */
  CUmemoryPool def;
  CHECK(cuDeviceGetMemPool(&def, 0) == CUDA_SUCCESS);
  cuuint64_t thr = 64 * MiB;
  CHECK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr) == CUDA_SUCCESS);
  CHECK(cuMemAllocAsync(&a, 100 * MiB, 0) == CUDA_SUCCESS);
  CHECK(cuMemFreeAsync(a, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK_EXACT(64 * MiB); /* kept up to the threshold */
  CHECK(cuMemAllocAsync(&a, 40 * MiB, 0) == CUDA_SUCCESS);
  CHECK_EXACT(64 * MiB); /* from what the pool kept */
  thr = 0;
  CHECK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr) == CUDA_SUCCESS);
  CHECK(cuMemFreeAsync(a, 0) == CUDA_SUCCESS);
  CUevent ev;
  CHECK(cuEventCreate(&ev, 0) == CUDA_SUCCESS);
  CHECK(cuEventRecord(ev, 0) == CUDA_SUCCESS);
  CHECK(cuEventSynchronize(ev) == CUDA_SUCCESS);
  CHECK(cuEventDestroy(ev) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  /* Trim without a synchronize releases only blocks whose free completed. */
  thr = UINT64_MAX;
  CHECK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr) == CUDA_SUCCESS);
  CHECK(cuMemAllocAsync(&a, 40 * MiB, 0) == CUDA_SUCCESS);
  CHECK(cuMemAllocAsync(&b, 40 * MiB, 0) == CUDA_SUCCESS);
  CHECK_EXACT(3 * STEP);
  CHECK(cuMemFreeAsync(b, 0) == CUDA_SUCCESS);
  CHECK(cuMemPoolTrimTo(def, 0) == CUDA_SUCCESS);
  CHECK_EXACT(3 * STEP); /* b's free is still pending */
  CHECK(cuStreamSynchronize(0) == CUDA_SUCCESS);
  CHECK_EXACT(3 * STEP); /* the threshold keeps it */
  CHECK(cuMemPoolTrimTo(def, 0) == CUDA_SUCCESS);
  CHECK_EXACT(2 * STEP); /* a's 40 MiB still in use */
  CHECK(cuMemFree(a) == CUDA_SUCCESS); /* synchronous free of a pool block */
  CHECK(cuMemPoolTrimTo(def, 0) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  thr = 0;
  CHECK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr) == CUDA_SUCCESS);
  /* An explicit pool next to the default one; destroying it releases its count. */
  CUmemoryPool pool = make_pool();
  CHECK(cuMemAllocFromPoolAsync(&a, 1 * MiB, pool, 0) == CUDA_SUCCESS);
  CHECK(cuMemAllocAsync(&b, 33 * MiB, 0) == CUDA_SUCCESS);
  CHECK_EXACT(STEP + 2 * STEP);
  CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS);
  CHECK_EXACT(2 * STEP);
  CHECK(cuMemFreeAsync(b, 0) == CUDA_SUCCESS);
  size_t f, t;
  CHECK(cuMemGetInfo(&f, &t) == CUDA_SUCCESS);
  CHECK_EXACT(2 * STEP);
  CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK_EXACT(0);
  return 0;
}

/* Eight threads allocate and free (stream-ordered, with synchronizes) against a 80 MiB limit:
 * never above it (the old accounting reached 96 MiB), back to exactly 0 at the end. */
static void *worker(void *arg) {
  CHECK(cuCtxSetCurrent((CUcontext)arg) == CUDA_SUCCESS);
  unsigned seed = (unsigned)(uintptr_t)&arg;
  CUdeviceptr held[8] = {0};
  for (int i = 0; i < 2000; i++) {
    int k = rand_r(&seed) % 8;
    if (held[k]) {
      CHECK(cuMemFreeAsync(held[k], 0) == CUDA_SUCCESS);
      held[k] = 0;
    } else {
      size_t sz = (size_t)(1 + rand_r(&seed) % 8) * MiB;
      CUresult rc = (k & 1) ? cuMemAllocAsync(&held[k], sz, 0) : cuMemAllocAsync_ptsz(&held[k], sz, 0);
      CHECK(rc == CUDA_SUCCESS || rc == CUDA_ERROR_OUT_OF_MEMORY);
      if (rc != CUDA_SUCCESS) held[k] = 0;
    }
    if (i % 97 == 0) CHECK(cuStreamSynchronize(0) == CUDA_SUCCESS);
  }
  for (int k = 0; k < 8; k++)
    if (held[k]) CHECK(cuMemFreeAsync(held[k], 0) == CUDA_SUCCESS);
  return NULL;
}

static int case_threads(void) {
  CUcontext ctx = setup();
  CUdeviceptr w;
  CHECK(cuMemAllocAsync(&w, 1, 0) == CUDA_SUCCESS);
  CHECK(cuMemFreeAsync(w, 0) == CUDA_SUCCESS);
  pthread_t t[8];
  struct test_sampler smp;
  CHECK(test_sampler_start(&smp, 80 * MiB) == 0);
  for (int i = 0; i < 8; i++) CHECK(pthread_create(&t[i], NULL, worker, ctx) == 0);
  for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
  CHECK_EQ_U(test_sampler_stop(&smp), 0);
  CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK_EXACT(0);
  const vgpu_region_ext_t *e = test_ext();
  CHECK(e->devices[0].oom_rejections > 0); /* the limit was actually reached */
  return 0;
}

/* Four processes, each with its own pool, race 1 MiB requests for one 100 MiB limit: together
 * they get exactly three 32 MiB steps (96 requests), never a fourth (old accounting: up to 128). */
static int case_processes(void) {
  enum { N = 4 };
  int fds[N][2];
  pid_t kids[N];
  int go[2], hold[2];
  CHECK(pipe(go) == 0 && pipe(hold) == 0);
  for (int i = 0; i < N; i++) {
    CHECK(pipe(fds[i]) == 0);
    kids[i] = fork();
    if (kids[i] == 0) {
      setup();
      char c;
      CHECK(read(go[0], &c, 1) == 1);
      int got = 0;
      CUdeviceptr p;
      CUresult rc;
      while ((rc = (i & 1) ? cuMemAllocAsync_ptsz(&p, 1 * MiB, 0) : cuMemAllocAsync(&p, 1 * MiB, 0)) ==
             CUDA_SUCCESS) {
        CHECK(test_used(0) <= 100 * MiB);
        got++;
      }
      CHECK(rc == CUDA_ERROR_OUT_OF_MEMORY);
      CHECK(write(fds[i][1], &got, sizeof got) == (ssize_t)sizeof got);
      CHECK(read(hold[0], &c, 1) == 1);
      exit(0);
    }
  }
  struct test_sampler smp;
  CHECK(test_sampler_start(&smp, 100 * MiB) == 0);
  CHECK(write(go[1], "xxxx", N) == N);
  int total = 0;
  for (int i = 0; i < N; i++) {
    int got = 0;
    CHECK(read(fds[i][0], &got, sizeof got) == (ssize_t)sizeof got);
    total += got;
  }
  CHECK_EQ_U(test_sampler_stop(&smp), 0);
  CHECK_EQ_U(total, 96);
  CHECK_EQ_U(test_used(0), 3 * STEP);
  CHECK(write(hold[1], "xxxx", N) == N);
  for (int i = 0; i < N; i++) {
    int st;
    CHECK(waitpid(kids[i], &st, 0) == kids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  CHECK_EQ_U(test_used(0), 0);
  return 0;
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      {"pool_overshoot", case_chunk_overshoot}, {"pool_undo", case_undo}, {"pool_exact", case_exact},
      {"pool_threads", case_threads}, {"pool_processes", case_processes},
  };
  return run_case(argc, argv, cases, sizeof cases / sizeof cases[0]);
}

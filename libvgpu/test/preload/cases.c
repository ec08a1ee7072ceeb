/*
 * cases.c — libvgpu behaviour under LD_PRELOAD against the fake driver (test/fake/fake_cuda.c).
 * One program, one case per argument: `cases <name>`; exit 0 = pass. test/run_preload.sh sets the
 * environment (limit, cache file, fake devices) per case and runs each with and without checks of
 * its stderr. Every case asserts on what the application sees AND on the region bytes that other
 * readers (HAMi's monitor, our exporter) see.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "check.h"
#undef cuGetProcAddress

unsigned long fakeCudaLaunchCount(void);
extern CUdeviceptr vgpu_ctor_ptr; /* libctor.so */
extern int vgpu_ctor_rc;
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

static CUcontext setup(int dev) {
  CHECK(cuInit(0) == CUDA_SUCCESS);
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
  return ctx;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *lib_of(void *fn) {
  Dl_info info;
  if (!fn || !dladdr(fn, &info) || !info.dli_fname) return "?";
  return info.dli_fname;
}
static int in_libvgpu(void *fn) { return strstr(lib_of(fn), "libvgpu") != NULL; }

/* limit 64 MiB: reserve-before-allocate, OOM, free, meminfo, total mem. */
static int case_limit(void) {
  setup(0);
  CUdeviceptr a, b, c;
  CHECK(cuMemAlloc(&a, 32 * MiB) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 32 * MiB);
  CHECK(cuMemAlloc(&b, 40 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ_U(test_used(0), 32 * MiB); /* the refused reservation was rolled back */
  CHECK(cuMemAlloc(&c, 32 * MiB) == CUDA_SUCCESS); /* exactly up to the limit */
  CHECK(cuMemAlloc(&b, 1) == CUDA_ERROR_OUT_OF_MEMORY);
  size_t free_b = 0, total = 0;
  CHECK(cuMemGetInfo(&free_b, &total) == CUDA_SUCCESS);
  CHECK_EQ_U(total, 64 * MiB);
  CHECK_EQ_U(free_b, 0);
  CHECK(cuMemFree(c) == CUDA_SUCCESS);
  CHECK(cuMemGetInfo(&free_b, &total) == CUDA_SUCCESS);
  CHECK_EQ_U(free_b, 32 * MiB);
  size_t tm = 0;
  CHECK(cuDeviceTotalMem(&tm, 0) == CUDA_SUCCESS);
  CHECK_EQ_U(tm, 64 * MiB);
  CHECK(cuMemFree(a) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 0);
  const vgpu_region_ext_t *e = test_ext();
  CHECK(e->devices[0].oom_rejections == 2);
  CHECK(e->devices[0].oom_rejected_bytes == 40 * MiB + 1);
  return 0;
}

/* Freed exactly once: a double free or a foreign pointer never decrements. */
static int case_double_free(void) {
  setup(0);
  CUdeviceptr a, b;
  CHECK(cuMemAlloc(&a, 8 * MiB) == CUDA_SUCCESS);
  CHECK(cuMemAlloc(&b, 4 * MiB) == CUDA_SUCCESS);
  CHECK(cuMemFree(a) == CUDA_SUCCESS);
  CHECK(cuMemFree(a) != CUDA_SUCCESS);
  CHECK(cuMemFree((CUdeviceptr)0x1234) != CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 4 * MiB);
  CHECK(cuMemFree(b) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 0);
  return 0;
}

/* Pitch counts what the driver returned; managed counts once (the fake's managed allocator calls
 * its own cuMemAlloc through the PLT: the reentrancy guard must keep it from counting twice). */
static int case_pitch_managed(void) {
  setup(0);
  CUdeviceptr p, m;
  size_t pitch = 0;
  CHECK(cuMemAllocPitch(&p, &pitch, 1000, 300, 4) == CUDA_SUCCESS);
  CHECK_EQ_U(pitch, 1024);
  CHECK_EQ_U(test_used(0), 1024 * 300);
  CHECK(cuMemAllocManaged(&m, 10 * MiB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 1024 * 300 + 10 * MiB);
  CHECK(cuMemFree(p) == CUDA_SUCCESS);
  CHECK(cuMemFree(m) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 0);
  /* Over the limit (64 MiB): pitched estimate is refused before the driver is called. */
  CHECK(cuMemAllocPitch(&p, &pitch, 1 << 20, 100, 4) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ_U(test_used(0), 0);
  return 0;
}

/* VMM handles are counted on the device of their location, released on cuMemRelease. */
static int case_vmm(void) {
  setup(0);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h1, h2;
  CHECK(cuMemCreate(&h1, 32 * MiB, &prop, 0) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 32 * MiB);
  CHECK(cuMemCreate(&h2, 40 * MiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemRelease(h1) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h1) != CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 0);
  return 0;
}

/* Arrays and mipmaps: counted at the driver's requirement (the fake rounds to 64 KiB). */
static int case_arrays(void) {
  setup(0);
  CUDA_ARRAY_DESCRIPTOR d = {.Width = 100, .Height = 100, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
  CUarray a;
  CHECK(cuArrayCreate(&a, &d) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 65536); /* 40 000 bytes rounded up by the driver */
  CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = 256, .Height = 256, .Depth = 16, .Format = CU_AD_FORMAT_UNSIGNED_INT8,
                                .NumChannels = 4};
  CUarray a3;
  CHECK(cuArray3DCreate(&a3, &d3) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 65536 + 4 * MiB);
  CUmipmappedArray mm;
  CUDA_ARRAY3D_DESCRIPTOR dm = {.Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4};
  CHECK(cuMipmappedArrayCreate(&mm, &dm, 3) == CUDA_SUCCESS);
  unsigned long long mip = 4 * MiB + 1 * MiB + 256 * 1024;
  CHECK_EQ_U(test_used(0), 65536 + 4 * MiB + mip);
  CUDA_ARRAY3D_DESCRIPTOR big = {.Width = 8192, .Height = 8192, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
  CUarray b;
  CHECK(cuArray3DCreate(&b, &big) == CUDA_ERROR_OUT_OF_MEMORY); /* 256 MiB > 64 MiB */
  CHECK(cuArrayDestroy(a) == CUDA_SUCCESS);
  CHECK(cuArrayDestroy(a3) == CUDA_SUCCESS);
  CHECK(cuMipmappedArrayDestroy(mm) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 0);
  return 0;
}

/* Stream-ordered allocations count what the pool reserves (granule 2 MiB in the fake). */
static int case_pools(void) {
  setup(0);
  CUdeviceptr a, b;
  CHECK(cuMemAllocAsync(&a, 3 * MiB, 0) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 4 * MiB);
  CHECK(cuMemAllocAsync(&b, 1 * MiB, 0) == CUDA_SUCCESS); /* fits the reserved headroom */
  CHECK_EQ_U(test_used(0), 4 * MiB);
  CHECK(cuMemFreeAsync(a, 0) == CUDA_SUCCESS);
  CHECK(cuMemFreeAsync(b, 0) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 4 * MiB); /* the pool keeps its reservation until a sync */
  CHECK(cuStreamSynchronize(0) == CUDA_SUCCESS);
  size_t f, t;
  CHECK(cuMemGetInfo(&f, &t) == CUDA_SUCCESS); /* re-reads pool reservations */
  CHECK_EQ_U(test_used(0), 0);
  /* An explicit pool on device 0, and the limit (64 MiB) holds for pools too. */
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool;
  CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
  CHECK(cuMemAllocFromPoolAsync(&a, 50 * MiB, pool, 0) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 50 * MiB);
  CHECK(cuMemAllocFromPoolAsync(&b, 20 * MiB, pool, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemFreeAsync(a, 0) == CUDA_SUCCESS);
  CHECK(cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS); /* like the driver: the free is not seen yet */
  CHECK_EQ_U(test_used(0), 50 * MiB);
  CHECK(cuStreamSynchronize(0) == CUDA_SUCCESS); /* keeps up to the threshold (0): releases all */
  CHECK_EQ_U(test_used(0), 0);
  CHECK(cuMemAllocFromPoolAsync(&a, 10 * MiB, pool, 0) == CUDA_SUCCESS);
  CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 0);
  return 0;
}

/* Contexts (LIBVGPU_CONTEXT_SIZE=8m): primary once while retained, non-primary each; destroying
 * a context releases the allocations it owned. */
static int case_contexts(void) {
  CHECK(cuInit(0) == CUDA_SUCCESS);
  CUcontext p1, p2, c;
  CHECK(cuDevicePrimaryCtxRetain(&p1, 0) == CUDA_SUCCESS);
  CHECK(cuDevicePrimaryCtxRetain(&p2, 0) == CUDA_SUCCESS);
  CHECK_EQ_U(test_my_used(0, 0), 8 * MiB);
  CHECK(cuCtxCreate_v2(&c, 0, 0) == CUDA_SUCCESS);
  CHECK_EQ_U(test_my_used(0, 0), 16 * MiB);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 4 * MiB) == CUDA_SUCCESS); /* in the new context (it is current) */
  CHECK_EQ_U(test_my_used(0, -1), 20 * MiB);
  CHECK(cuCtxDestroy(c) == CUDA_SUCCESS);
  CHECK_EQ_U(test_my_used(0, -1), 8 * MiB);
  CHECK(cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS);
  CHECK_EQ_U(test_my_used(0, 0), 8 * MiB);
  CHECK(cuCtxSetCurrent(p1) == CUDA_SUCCESS);
  CHECK(cuMemAlloc(&a, 4 * MiB) == CUDA_SUCCESS);
  CHECK(cuDevicePrimaryCtxReset(0) == CUDA_SUCCESS); /* frees the allocation with the context */
  CHECK_EQ_U(test_my_used(0, 2), 0);
  CHECK(cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS);
  CHECK_EQ_U(test_my_used(0, -1), 0);
  /* A context that does not fit the limit (64 MiB) is refused. */
  CUdeviceptr big;
  CHECK(cuDevicePrimaryCtxRetain(&p1, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(p1) == CUDA_SUCCESS);
  CHECK(cuMemAlloc(&big, 52 * MiB) == CUDA_SUCCESS);
  CHECK(cuCtxCreate_v2(&c, 0, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  return 0;
}

/* dlsym hands out hooks for interposed names, the driver's pointer for the rest, NULL for none. */
static int case_dlsym(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  CHECK(h != NULL);
  void *alloc = dlsym(h, "cuMemAlloc_v2");
  CHECK(in_libvgpu(alloc));
  void *sync = dlsym(h, "cuEventRecord");
  CHECK(sync != NULL && strstr(lib_of(sync), "libcuda") != NULL);
  CHECK(dlsym(h, "cuNoSuchFunction") == NULL);
  CHECK(in_libvgpu(dlsym(h, "cuGetProcAddress_v2")));
  /* RTLD_NEXT stays relative to the caller (this executable): the next cuMemAlloc_v2 after it is
   * the preloaded libvgpu's, not the driver's that follows libvgpu. */
  CHECK(in_libvgpu(dlsym(RTLD_NEXT, "cuMemAlloc_v2")));
  CHECK(strstr(lib_of(dlsym(RTLD_NEXT, "cuEventRecord")), "libcuda") != NULL);
  setup(0);
  CUresult (*fn)(CUdeviceptr *, size_t) = (CUresult(*)(CUdeviceptr *, size_t))alloc;
  CUdeviceptr p;
  CHECK(fn(&p, 8 * MiB) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 8 * MiB);
  CHECK(fn(&p, 60 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  return 0;
}

/* cuGetProcAddress honours cudaVersion and the per-thread-stream flag. */
static int case_getproc(void) {
  setup(0);
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  CHECK(cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, &st) == CUDA_SUCCESS);
  CHECK(in_libvgpu(fn));
  CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS);
  void *v4 = NULL, *v3 = NULL, *v2 = NULL;
  CHECK(cuGetProcAddress_v2("cuCtxCreate", &v4, 12080, 0, &st) == CUDA_SUCCESS);
  CHECK(cuGetProcAddress_v2("cuCtxCreate", &v3, 11080, 0, &st) == CUDA_SUCCESS);
  CHECK(cuGetProcAddress_v2("cuCtxCreate", &v2, 10000, 0, &st) == CUDA_SUCCESS);
  CHECK(v4 == (void *)cuCtxCreate_v4 && in_libvgpu(v4));
  CHECK(v3 == dlsym(RTLD_DEFAULT, "cuCtxCreate_v3") && in_libvgpu(v3));
  CHECK(v2 == dlsym(RTLD_DEFAULT, "cuCtxCreate_v2") && in_libvgpu(v2));
  void *l = NULL, *lp = NULL;
  CHECK(cuGetProcAddress_v2("cuLaunchKernel", &l, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st) == CUDA_SUCCESS);
  CHECK(cuGetProcAddress_v2("cuLaunchKernel", &lp, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st) ==
        CUDA_SUCCESS);
  CHECK(l != lp && in_libvgpu(l) && in_libvgpu(lp));
  CHECK(lp == dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz"));
  void *s = NULL;
  CHECK(cuGetProcAddress_v2("cuEventRecord", &s, 12000, 0, &st) == CUDA_SUCCESS);
  CHECK(strstr(lib_of(s), "libcuda") != NULL); /* unknown to us: the driver's own */
  CHECK(cuGetProcAddress_v2("cuNoSuchThing", &s, 12000, 0, &st) == CUDA_ERROR_NOT_FOUND);
  void *gpa = NULL;
  CHECK(cuGetProcAddress_v2("cuGetProcAddress", &gpa, 12000, 0, &st) == CUDA_SUCCESS);
  CHECK(in_libvgpu(gpa));
  /* Through the pointer we handed out, later lookups stay interposed. */
  CUresult (*gp)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
      (CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))gpa;
  CHECK(gp("cuMemFree", &fn, 12000, 0, &st) == CUDA_SUCCESS && in_libvgpu(fn));
  /* And the memory path through it is counted. */
  CUresult (*al)(CUdeviceptr *, size_t);
  CHECK(gp("cuMemAlloc", (void **)&al, 12000, 0, &st) == CUDA_SUCCESS);
  CUdeviceptr p;
  CHECK(al(&p, 16 * MiB) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 16 * MiB);
  CHECK(al(&p, 60 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  unsigned long before = fakeCudaLaunchCount();
  CUresult (*lk)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                 void **, void **) = lp;
  CHECK(lk(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
  CHECK(fakeCudaLaunchCount() == before + 1);
  return 0;
}

/* FAKE_CUDA_TRAMPOLINES=1: the driver returns pointers we cannot recognise; the version table
 * still maps the request to our hook. */
static int case_getproc_fallback(void) {
  setup(0);
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  CHECK(cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, &st) == CUDA_SUCCESS);
  CHECK(fn == (void *)cuMemAlloc_v2 && in_libvgpu(fn));
  CUdeviceptr p;
  CHECK(((CUresult(*)(CUdeviceptr *, size_t))fn)(&p, 70 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  return 0;
}

/* Many threads allocating and freeing: never above the limit, back to 0 at the end. */
static void *worker(void *arg) {
  CUcontext ctx = arg;
  cuCtxSetCurrent(ctx);
  unsigned seed = (unsigned)(uintptr_t)&ctx;
  CUdeviceptr held[8] = {0};
  for (int i = 0; i < 3000; i++) {
    int k = rand_r(&seed) % 8;
    if (held[k]) {
      CHECK(cuMemFree(held[k]) == CUDA_SUCCESS);
      held[k] = 0;
    } else {
      size_t sz = (size_t)(1 + rand_r(&seed) % 4) * MiB;
      CUresult rc = cuMemAlloc(&held[k], sz);
      CHECK(rc == CUDA_SUCCESS || rc == CUDA_ERROR_OUT_OF_MEMORY);
      if (rc != CUDA_SUCCESS) held[k] = 0;
    }
  }
  for (int k = 0; k < 8; k++)
    if (held[k]) CHECK(cuMemFree(held[k]) == CUDA_SUCCESS);
  return NULL;
}
static int case_threads(void) {
  CUcontext ctx = setup(0);
  CUdeviceptr warm;
  CHECK(cuMemAlloc(&warm, 1) == CUDA_SUCCESS); /* registers before the sampler starts */
  CHECK(cuMemFree(warm) == CUDA_SUCCESS);
  pthread_t t[8];
  struct test_sampler smp;
  CHECK(test_sampler_start(&smp, 64 * MiB) == 0);
  for (int i = 0; i < 8; i++) CHECK(pthread_create(&t[i], NULL, worker, ctx) == 0);
  for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
  CHECK_EQ_U(test_sampler_stop(&smp), 0); /* 0 = the sampler never saw usage above 64 MiB */
  CHECK_EQ_U(test_used(0), 0);
  return 0;
}

/* Several processes race for one container limit: together they get exactly floor(limit/chunk). */
static int case_processes(void) {
  enum { N = 4 };
  int fds[N][2];
  pid_t kids[N];
  int go[2], hold[2]; /* start together; stay alive until the parent has looked */
  CHECK(pipe(go) == 0 && pipe(hold) == 0);
  for (int i = 0; i < N; i++) {
    CHECK(pipe(fds[i]) == 0);
    kids[i] = fork();
    if (kids[i] == 0) {
      setup(0);
      char c;
      CHECK(read(go[0], &c, 1) == 1);
      int got = 0;
      CUdeviceptr p;
      while (cuMemAlloc(&p, 6 * MiB) == CUDA_SUCCESS) got++; /* whole 2 MiB pages */
      CHECK(write(fds[i][1], &got, sizeof got) == (ssize_t)sizeof got);
      CHECK(read(hold[0], &c, 1) == 1);
      exit(0);
    }
  }
  CHECK(write(go[1], "xxxx", N) == N);
  int total = 0;
  for (int i = 0; i < N; i++) {
    int got = 0;
    CHECK(read(fds[i][0], &got, sizeof got) == (ssize_t)sizeof got);
    total += got;
  }
  CHECK_EQ_U(total, 64 / 6); /* 10 chunks of 6 MiB fit in 64 MiB, the 11th never */
  CHECK_EQ_U(test_used(0), 10 * 6 * MiB);
  CHECK(write(hold[1], "xxxx", N) == N);
  for (int i = 0; i < N; i++) {
    int st;
    CHECK(waitpid(kids[i], &st, 0) == kids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  CHECK_EQ_U(test_used(0), 0); /* clean exits free their slots */
  return 0;
}

/* fork: the child is its own process in the region; the parent's count is untouched. */
static int case_fork(void) { /* LIBVGPU_CONTEXT_SIZE=8m: each process's context counts 8 MiB */
  setup(0);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 16 * MiB) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 24 * MiB);
  pid_t pid = fork();
  if (pid == 0) {
    setup(0);
    CUdeviceptr b;
    CHECK_EQ_U(test_my_used(0, 2), 0);  /* the parent's allocations are not the child's */
    CHECK_EQ_U(test_my_used(0, 0), 8 * MiB); /* its own primary context counts again */
    CHECK(cuMemAlloc(&b, 8 * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U(test_my_used(0, 2), 8 * MiB);
    CHECK_EQ_U(test_used(0), 40 * MiB);
    CHECK(cuMemAlloc(&b, 32 * MiB) == CUDA_ERROR_OUT_OF_MEMORY); /* the parent's 24 count */
    exit(0); /* a clean exit frees the slot at once (an _exit is covered by dead_memory) */
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_EQ_U(test_used(0), 24 * MiB);
  CHECK_EQ_U(test_my_used(0, 2), 16 * MiB);
  CHECK(cuMemFree(a) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 8 * MiB);
  return 0;
}

/* SIGKILL at random points, hundreds of times: nobody deadlocks (alarm), and the dead processes'
 * memory leaves the count (dead slots freed by the next allocation that needs room or the
 * liveness sweep). */
static int case_sigkill(void) {
  int iterations = getenv("SIGKILL_ITERATIONS") ? atoi(getenv("SIGKILL_ITERATIONS")) : 300;
  setup(0);
  alarm(120);
  unsigned seed = (unsigned)getpid();
  for (int it = 0; it < iterations; it++) {
    pid_t pid = fork();
    if (pid == 0) {
      setup(0);
      CUdeviceptr p[4] = {0};
      for (unsigned i = 0;; i++) { /* allocate and free until killed */
        int k = (int)(i % 4);
        if (p[k]) {
          cuMemFree(p[k]);
          p[k] = 0;
        } else if (cuMemAlloc(&p[k], 2 * MiB) != CUDA_SUCCESS) {
          p[k] = 0;
        }
      }
    }
    struct timespec ts = {0, (long)(rand_r(&seed) % 3000) * 1000};
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
  }
  /* Everything the dead left behind must be reclaimable: the whole limit, within 2 s. */
  double t0 = now_s();
  CUdeviceptr all;
  CUresult rc = cuMemAlloc(&all, 64 * MiB);
  double waited = now_s() - t0;
  fprintf(stderr, "sigkill: %d kills, full-limit allocation after %.3f s\n", iterations, waited);
  CHECK(rc == CUDA_SUCCESS);
  CHECK(waited < 2.0);
  CHECK_EQ_U(test_used(0), 64 * MiB);
  const vgpu_region_t *r = test_region();
  int live = 0;
  for (int i = 0; i < r->proc_num; i++) live += r->procs[i].status != 0;
  if (live != 1 || r->proc_num > 2) {
    for (int i = 0; i < r->proc_num; i++)
      fprintf(stderr, "slot %d pid %d status %d total %llu\n", i, r->procs[i].pid, r->procs[i].status,
              (unsigned long long)r->procs[i].used[0].total);
  }
  CHECK(live == 1); /* dead slots were freed, not leaked */
  return 0;
}

/* A process holding memory is SIGKILLed; another one gets the memory within 2 s. */
static int case_dead_memory(void) {
  setup(0);
  int p[2];
  CHECK(pipe(p) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    setup(0);
    CUdeviceptr a;
    CHECK(cuMemAlloc(&a, 48 * MiB) == CUDA_SUCCESS);
    CHECK(write(p[1], "x", 1) == 1);
    pause();
    _exit(0);
  }
  char c;
  CHECK(read(p[0], &c, 1) == 1);
  CUdeviceptr b;
  CHECK(cuMemAlloc(&b, 32 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  double t0 = now_s();
  CHECK(cuMemAlloc(&b, 32 * MiB) == CUDA_SUCCESS);
  CHECK(now_s() - t0 < 2.0);
  CHECK_EQ_U(test_used(0), 32 * MiB);
  return 0;
}

/* Launch hooks call through (and the ptsz/Ex/cooperative/graph variants are interposed). */
static int case_launch(void) {
  setup(0);
  unsigned long before = fakeCudaLaunchCount();
  CHECK(cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
  CHECK(cuLaunchKernelEx(&cfg, NULL, NULL, NULL) == CUDA_SUCCESS);
  CHECK(cuLaunchCooperativeKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL) == CUDA_SUCCESS);
  CHECK(cuGraphLaunch(NULL, NULL) == CUDA_SUCCESS);
  CHECK(fakeCudaLaunchCount() == before + 4);
  const char *names[] = {"cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
                         "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz",
                         "cuLaunchCooperativeKernelMultiDevice", "cuGraphLaunch", "cuGraphLaunch_ptsz"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) CHECK(in_libvgpu(dlsym(RTLD_DEFAULT, names[i])));
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 1) == CUDA_SUCCESS); /* region exists now */
  CHECK(cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
  CHECK(test_region()->last_kernel_time + 5 >= (uint64_t)time(NULL));
  return 0;
}

/* A process that only initialises CUDA and counts devices creates no region file. */
static int case_no_gpu_use(void) {
  CHECK(cuInit(0) == CUDA_SUCCESS);
  int n = 0;
  CHECK(cuDeviceGetCount(&n) == CUDA_SUCCESS && n >= 1);
  CHECK(access(getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE"), F_OK) != 0);
  return 0;
}

/* CUDA_VISIBLE_DEVICES=1,0 with per-device limits: CUDA 0 is region device 1. */
static int case_cvd_reorder(void) {
  setup(0);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 60 * MiB) == CUDA_ERROR_OUT_OF_MEMORY); /* limit _1 = 50m */
  CHECK(cuMemAlloc(&a, 40 * MiB) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(1), 40 * MiB);
  CHECK_EQ_U(test_used(0), 0);
  size_t f, t;
  CHECK(cuMemGetInfo(&f, &t) == CUDA_SUCCESS);
  CHECK_EQ_U(t, 50 * MiB);
  CUcontext c1;
  CHECK(cuDevicePrimaryCtxRetain(&c1, 1) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(c1) == CUDA_SUCCESS);
  CHECK(cuMemAlloc(&a, 90 * MiB) == CUDA_SUCCESS); /* limit _0 = 100m */
  CHECK_EQ_U(test_used(0), 90 * MiB);
  const vgpu_region_t *r = test_region();
  CHECK_EQ_U(r->limit[0], 100 * MiB);
  CHECK_EQ_U(r->limit[1], 50 * MiB);
  CHECK(r->device_num >= 2);
  return 0;
}

/* CUDA_VISIBLE_DEVICES by UUID, with NVML present: the same physical device by uuid. */
static int case_cvd_uuid(void) {
  setup(0);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 40 * MiB) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(1), 40 * MiB); /* CUDA 0 = physical 1 = NVML index 1 */
  const vgpu_region_t *r = test_region();
  CHECK(strcmp(r->uuids[1], "GPU-00000000-0000-0000-0000-000000000001") == 0);
  CHECK(strcmp(r->uuids[0], "GPU-00000000-0000-0000-0000-000000000000") == 0);
  CHECK_EQ_U(r->device_num, 2);
  return 0;
}

/* NVML inside the container: total = limit, used = tracked, free = the rest; via dlsym too. */
typedef struct {
  unsigned long long total, free, used;
} nvml_mem_t;
static int case_nvml(void) {
  setup(0);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 24 * MiB) == CUDA_SUCCESS);
  void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  CHECK(h != NULL);
  int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
  int (*get)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
  int (*mem)(void *, nvml_mem_t *) = (int (*)(void *, nvml_mem_t *))dlsym(h, "nvmlDeviceGetMemoryInfo");
  CHECK(init && get && mem && in_libvgpu((void *)mem));
  CHECK(init() == 0);
  void *dev = NULL;
  CHECK(get(0, &dev) == 0);
  nvml_mem_t m;
  CHECK(mem(dev, &m) == 0);
  CHECK_EQ_U(m.total, 64 * MiB);
  CHECK_EQ_U(m.used, 24 * MiB);
  CHECK_EQ_U(m.free, 40 * MiB);
  void *dev1 = NULL;
  CHECK(get(1, &dev1) == 0);
  CHECK(mem(dev1, &m) == 0); /* device 1 has no limit: the physical answer */
  CHECK_EQ_U(m.total, 80ull << 30);
  return 0;
}

/* An NVML-only process (nvidia-smi) creates no region and sees the environment's limit. */
static int case_nvml_only(void) {
  void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  CHECK(h != NULL);
  int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
  int (*get)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
  int (*mem)(void *, nvml_mem_t *) = (int (*)(void *, nvml_mem_t *))dlsym(h, "nvmlDeviceGetMemoryInfo");
  CHECK(init() == 0);
  void *dev = NULL;
  CHECK(get(0, &dev) == 0);
  nvml_mem_t m;
  CHECK(mem(dev, &m) == 0);
  CHECK_EQ_U(m.total, 64 * MiB);
  CHECK_EQ_U(m.used, 0);
  CHECK_EQ_U(m.free, 64 * MiB);
  CHECK(access(getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE"), F_OK) != 0);
  return 0;
}

/* A rejected limit value leaves the device unlimited (and the runner checks the log line). */
static int case_unlimited(void) {
  setup(0);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 1ull << 30) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 1ull << 30);
  CHECK_EQ_U(test_region()->limit[0], 0);
  size_t f, t;
  CHECK(cuMemGetInfo(&f, &t) == CUDA_SUCCESS);
  CHECK_EQ_U(t, 16ull << 30); /* physical */
  return 0;
}

/* Allocate until OOM (the runner checks the OOM log line's content). */
static int case_oom_log(void) {
  setup(0);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 48 * MiB) == CUDA_SUCCESS);
  CHECK(cuMemAlloc(&a, 32 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  return 0;
}

/* CUDA_DISABLE_CONTROL=true: pure pass-through, no region. */
/* CUDA_DISABLE_CONTROL is the device plugin's switch (it then does not mount the library); a
 * tenant setting it in its own environment does not switch the limit off. */
static int case_disabled(void) {
  setup(0);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 256 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(access(getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE"), F_OK) == 0);
  return 0;
}

/* LIBVGPU_CONTEXT_SIZE is a minimum: a context NVML measures at 40 MiB is charged 40 MiB even
 * when the environment says 1 byte (the runner sets FAKE_CUDA_CONTEXT_BYTES=40 MiB, limit 64 MiB). */
static int case_context_floor(void) {
  setup(0);
  CHECK_EQ_U(test_my_used(0, 0), 40 * MiB);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 32 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemAlloc(&a, 16 * MiB) == CUDA_SUCCESS);
  CUcontext c;
  CHECK(cuCtxCreate_v2(&c, 0, 0) == CUDA_ERROR_OUT_OF_MEMORY); /* a second 40 MiB does not fit */
  CHECK_EQ_U(test_my_used(0, -1), 56 * MiB);
  return 0;
}

/* A limit that cannot be parsed, with no valid one beside it: the fail-safe limit (1 byte, the
 * smallest the region can express) refuses every real allocation. */
static int case_failsafe(void) {
  setup(0);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 1 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemAlloc(&a, 4096) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ_U(test_region()->limit[0], 1);
  CHECK_EQ_U(test_used(0), 0);
  return 0;
}

/* Region limits changed at run time (shrreg-tool / exporter) apply to the next allocation. */
static int case_runtime_limit(void) {
  setup(0);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 16 * MiB) == CUDA_SUCCESS);
  int fd = open(getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE"), O_RDWR);
  CHECK(fd >= 0);
  vgpu_region_t *r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(r != MAP_FAILED);
  __atomic_store_n(&r->limit[0], 20 * MiB, __ATOMIC_RELEASE);
  CHECK(cuMemAlloc(&a, 8 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  __atomic_store_n(&r->limit[0], 8 * MiB, __ATOMIC_RELEASE); /* below usage: free clamps at 0 */
  size_t f = 1, t = 0;
  CHECK(cuMemGetInfo(&f, &t) == CUDA_SUCCESS);
  CHECK_EQ_U(t, 8 * MiB);
  CHECK_EQ_U(f, 0);
  return 0;
}

/* A library constructor allocated before main (VGPU_CTOR_ALLOC=1): counted, freeable. */
static int case_ctor(void) {
  CHECK(vgpu_ctor_rc == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 24 * MiB);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 48 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemFree(vgpu_ctor_ptr) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 0);
  return 0;
}

/* NVML _v2 memory info and cuGetProcAddress v1 (CUDA 11.3-11.x callers). */
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvml_mem_v2_t;
static int case_nvml_v2_getproc_v1(void) {
  setup(0);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 10 * MiB) == CUDA_SUCCESS);
  void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  CHECK(h != NULL);
  int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
  int (*get)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
  int (*mem2)(void *, nvml_mem_v2_t *) = (int (*)(void *, nvml_mem_v2_t *))dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
  CHECK(init && get && mem2 && in_libvgpu((void *)mem2));
  CHECK(init() == 0);
  void *dev = NULL;
  CHECK(get(0, &dev) == 0);
  nvml_mem_v2_t m = {.version = (unsigned)(sizeof(nvml_mem_v2_t) | (2u << 24))};
  CHECK(mem2(dev, &m) == 0);
  CHECK_EQ_U(m.total, 64 * MiB);
  CHECK_EQ_U(m.used, 10 * MiB);
  CHECK_EQ_U(m.free, 54 * MiB);
  CHECK_EQ_U(m.reserved, 0);
  void *fn = NULL;
  CHECK(cuGetProcAddress("cuMemAlloc", &fn, 11030, 0) == CUDA_SUCCESS);
  CHECK(in_libvgpu(fn));
  CHECK(((CUresult(*)(CUdeviceptr *, size_t))fn)(&a, 60 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  return 0;
}

/* Another process freed our slot (it judged us dead, e.g. from another pid namespace while we
 * were stopped): we register again instead of writing into what may be someone else's slot. */
static int case_slot_lost(void) {
  setup(0);
  CUdeviceptr a, b;
  CHECK(cuMemAlloc(&a, 8 * MiB) == CUDA_SUCCESS);
  int fd = open(getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE"), O_RDWR);
  vgpu_region_t *r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(r != MAP_FAILED);
  int mine = -1;
  for (int i = 0; i < r->proc_num; i++)
    if (r->procs[i].pid == getpid()) mine = i;
  CHECK(mine >= 0);
  __atomic_store_n(&r->procs[mine].status, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&r->procs[mine].pid, 0, __ATOMIC_RELEASE);
  memset(r->procs[mine].used, 0, sizeof r->procs[mine].used);
  CHECK(cuMemAlloc(&b, 4 * MiB) == CUDA_SUCCESS);
  /* A fresh slot holding everything the process still holds: nothing it allocated before the
   * loss escapes the count. */
  CHECK_EQ_U(test_used(0), 12 * MiB);
  CHECK(cuMemFree(a) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 4 * MiB);
  CHECK(cuMemFree(b) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 0);
  return 0;
}

int main(int argc, char **argv) {
  static const struct {
    const char *name;
    int (*fn)(void);
  } cases[] = {
      {"limit", case_limit},           {"double_free", case_double_free},
      {"pitch_managed", case_pitch_managed}, {"vmm", case_vmm},
      {"arrays", case_arrays},         {"pools", case_pools},
      {"contexts", case_contexts},     {"dlsym", case_dlsym},
      {"getproc", case_getproc},       {"getproc_fallback", case_getproc_fallback},
      {"threads", case_threads},       {"processes", case_processes},
      {"fork", case_fork},             {"sigkill", case_sigkill},
      {"dead_memory", case_dead_memory}, {"launch", case_launch},
      {"no_gpu_use", case_no_gpu_use}, {"cvd_reorder", case_cvd_reorder},
      {"cvd_uuid", case_cvd_uuid},     {"nvml", case_nvml},
      {"nvml_only", case_nvml_only},   {"unlimited", case_unlimited},
      {"oom_log", case_oom_log},       {"disabled", case_disabled},
      {"failsafe", case_failsafe},     {"context_floor", case_context_floor},
      {"runtime_limit", case_runtime_limit}, {"ctor", case_ctor}, {"slot_lost", case_slot_lost},
      {"nvml_v2_getproc_v1", case_nvml_v2_getproc_v1},
  };
  if (argc != 2) {
    fprintf(stderr, "usage: %s <case>\n", argv[0]);
    return 2;
  }
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (strcmp(cases[i].name, argv[1]) == 0) return cases[i].fn();
  fprintf(stderr, "unknown case %s\n", argv[1]);
  return 2;
}

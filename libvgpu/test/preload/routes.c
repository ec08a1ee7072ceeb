/*
 * routes.c — the routes around the limits of issue 35 (libvgpu/README.md "Routes around the
 * limits"), each under LD_PRELOAD against the fake driver, which models the driver rule the route
 * relies on (test/fake/fake_cuda_routes.inc). `routes <case>`; exit 0 = pass. Every case failed
 * on the library before its fix.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>
#include <time.h>

#include "cases.h"

long long fakeCudaBusyNs(int ordinal);
long long fakeCudaCopyNs(int ordinal);
#undef cuGraphInstantiate
typedef CUresult (*graph_instantiate_v1_fn)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);

/* Item 3: more pools than any fixed table. Limit 1 GiB, pools grow in 2 MiB granules: 600 pools
 * with 1 MiB each would hold 1200 MiB; the 513th is refused and every pool is counted. (Before:
 * pools past 256 were not counted at all and all 600 succeeded.) */
static int case_pools_many(void) {
  setup();
  static CUmemoryPool pools[600];
  static CUdeviceptr p[600];
  int ok = 0;
  for (int i = 0; i < 600; i++) {
    pools[i] = make_pool();
    CUresult rc = cuMemAllocFromPoolAsync(&p[i], 1 * MiB, pools[i], 0);
    CHECK(rc == CUDA_SUCCESS || rc == CUDA_ERROR_OUT_OF_MEMORY);
    if (rc == CUDA_SUCCESS) ok++;
    CHECK(test_used(0) <= 1024 * MiB);
    CHECK_COUNTED();
  }
  CHECK_EQ_U(ok, 512);
  CHECK_EXACT(1024 * MiB);
  for (int i = 0; i < 600; i++) CHECK(cuMemPoolDestroy(pools[i]) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  return 0;
}

/* Item 4: cuMemAllocAsync on an explicit stream with no current context runs in the stream's
 * context (driver rule); it is charged to that context's device. Limit 64 MiB. (Before: the
 * device lookup failed and the allocation went through uncounted.) */
static int case_async_no_ctx(void) {
  setup();
  CUstream s;
  CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
  CUdeviceptr a = 0, b = 0;
  CHECK(cuMemAllocAsync(&a, 100 * MiB, s) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EXACT(0);
  CHECK(cuMemAllocAsync(&a, 30 * MiB, s) == CUDA_SUCCESS);
  CHECK_EXACT(30 * MiB);
  CHECK(cuMemAllocAsync(&b, 40 * MiB, s) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EXACT(30 * MiB);
  /* No stream either: nothing to charge, refused (the driver has no context to use). */
  CHECK(cuMemAllocAsync(&b, 1 * MiB, NULL) != CUDA_SUCCESS);
  CHECK_EXACT(30 * MiB);
  /* From an explicit pool on the stream: the pool's device. */
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
  CUmemoryPool pool = make_pool();
  CHECK(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
  CHECK(cuMemAllocFromPoolAsync(&b, 40 * MiB, pool, s) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemAllocFromPoolAsync(&b, 20 * MiB, pool, s) == CUDA_SUCCESS);
  CHECK_EXACT(30 * MiB + 20 * MiB);
  CHECK(cuMemFreeAsync(a, s) == CUDA_SUCCESS);
  CHECK(cuMemFreeAsync(b, s) == CUDA_SUCCESS);
  CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
  CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS);
  CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK_EXACT(0);
  return 0;
}


/* Item 1: the driver maps whole pages (FAKE_CUDA_ALLOC_GRANULE = 2 MiB, like H100/H200): 2 MiB +
 * 4 KiB holds 4 MiB and is charged 4 MiB; allocating until OOM ends at the limit, the count equal
 * to what the device holds. Limit 64 MiB. (Before: 30 allocations, 120 MiB held, 60 counted.) */
static int case_granularity(void) {
  setup();
  CUdeviceptr p[64];
  int n = 0;
  while (n < 64 && cuMemAlloc(&p[n], 2 * MiB + 4096) == CUDA_SUCCESS) {
    n++;
    CHECK_COUNTED();
  }
  CHECK_EQ_U(n, 16);
  CHECK_EXACT(64 * MiB);
  for (int i = 0; i < n; i++) CHECK(cuMemFree(p[i]) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  /* Pitched: 2 MiB + 512 B rows x 3 -> 6 MiB + 1536 B -> 8 MiB. Small allocations: as requested. */
  size_t pitch;
  CHECK(cuMemAllocPitch(&p[0], &pitch, 2 * MiB + 512, 3, 4) == CUDA_SUCCESS);
  CHECK_EQ_U(pitch, 2 * MiB + 512);
  CHECK_EXACT(8 * MiB);
  CHECK(cuMemAlloc(&p[1], 4096) == CUDA_SUCCESS);
  CHECK_EXACT(8 * MiB + 4096);
  CHECK(cuMemFree(p[0]) == CUDA_SUCCESS);
  CHECK(cuMemFree(p[1]) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  return 0;
}

/* Item 7: module and library globals (FAKE_CUDA_MODULE_BYTES = 40 MiB each, seen through NVML like
 * the real driver's; the context 8 MiB): a load that takes the container over its limit is undone
 * and refused. Limit 64 MiB. (Before: counted, 88 MiB, never refused.) */
static int case_module_refuse(void) {
  setup();
  CUmodule m1, m2;
  CUlibrary lib;
  CHECK(cuModuleLoadData(&m1, "image") == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 48 * MiB);
  CHECK(cuModuleLoadData(&m2, "image") == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ_U(test_used(0), 48 * MiB);
  CHECK_EQ_U(fakeCudaDeviceUsed(0), 40 * MiB); /* the refused module was unloaded */
  CHECK(cuLibraryLoadData(&lib, "image", NULL, NULL, 0, NULL, NULL, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ_U(fakeCudaDeviceUsed(0), 40 * MiB);
  CHECK(cuModuleUnload(m1) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 8 * MiB);
  CHECK(cuLibraryLoadData(&lib, "image", NULL, NULL, 0, NULL, NULL, 0) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 48 * MiB);
  CHECK(cuLibraryUnload(lib) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 8 * MiB);
  return 0;
}

/* Item 2: a kernel's local memory (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES) grows the context's local
 * memory at launch to that size for every resident thread (132 SMs x 2048 threads in the fake):
 * charged before the launch, refused when it does not fit. Limit 64 MiB. (Before: only
 * cuCtxSetLimit(STACK_SIZE) was charged; the launch took 33 MiB uncounted.) */
#define LMEM_STEP (128ull * 132 * 2048) /* 128 bytes per thread beyond the 1 KiB default stack */
static int case_lmem(void) {
  setup();
  CUmodule m;
  CUfunction small, mid, big;
  CHECK(cuModuleLoadData(&m, "image") == CUDA_SUCCESS);
  CHECK(cuModuleGetFunction(&small, m, "lmem_512") == CUDA_SUCCESS);
  CHECK(cuModuleGetFunction(&mid, m, "lmem_1152") == CUDA_SUCCESS);
  CHECK(cuModuleGetFunction(&big, m, "lmem_1280") == CUDA_SUCCESS);
  CHECK(cuLaunchKernel(small, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
  CHECK_EXACT(0); /* within the default stack */
  CHECK(cuLaunchKernel(mid, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
  CHECK_EXACT(LMEM_STEP);
  CHECK(cuLaunchKernel(mid, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS);
  CHECK_EXACT(LMEM_STEP);
  CHECK(cuLaunchKernel(big, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EXACT(LMEM_STEP);
  CHECK(cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS); /* the context goes, and its local memory */
  CHECK_EXACT(0);
  return 0;
}

/* Items 14/21: OpenCL through NVIDIA's ICD goes around every CUDA hook: with a limit, the ICD's
 * entry points are not found (an ICD loader then lists no NVIDIA platform); without any limit they
 * are. (Before: found, OpenCL used the GPU uncounted and unthrottled.) */
static int opencl(int expect_refused) {
  void *h = dlopen("libnvidia-opencl.so.1", RTLD_NOW | RTLD_LOCAL);
  CHECK(h != NULL);
  static const char *names[] = {"clGetExtensionFunctionAddress", "clIcdGetPlatformIDsKHR", "clGetPlatformIDs"};
  for (int i = 0; i < 3; i++) {
    void *f = dlsym(h, names[i]);
    CHECK(expect_refused ? f == NULL : f != NULL);
  }
  CHECK(dlsym(h, "clNoSuchSymbol") == NULL);
  return 0;
}
static int case_opencl_refused(void) { return opencl(1); }
static int case_opencl_unlimited(void) { return opencl(0); }

/* Item 9 (in part): glibc's dlsym reached through dlvsym (or dlsym("dlsym")) answered libcuda's raw
 * functions around every hook. Now the lookup functions answer libvgpu's own. Limit 64 MiB.
 * (Before: the raw cuMemAlloc_v2, 100 MiB held, nothing counted.) */
typedef CUresult (*mem_alloc_fn)(CUdeviceptr *, size_t);
typedef void *(*dlsym_fn)(void *, const char *);
/* glibc's oldest symbol versions differ per architecture: aarch64's glibc began at 2.17, so its
 * dlsym/printf/memcpy are GLIBC_2.17 there (a lookup of GLIBC_2.2.5 finds nothing: HAMi-core's
 * arm64 failure). */
#if defined(__aarch64__)
#define GLIBC_BASE_VERSION "GLIBC_2.17"
#define GLIBC_MEMCPY_VERSION "GLIBC_2.17"
#elif defined(__x86_64__)
#define GLIBC_BASE_VERSION "GLIBC_2.2.5"
#define GLIBC_MEMCPY_VERSION "GLIBC_2.14"
#else
#error "routes.c: add this architecture's glibc base versions"
#endif
static int case_dlvsym(void) {
  setup();
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  CHECK(h != NULL);
  dlsym_fn via[4] = {
      (dlsym_fn)dlvsym(RTLD_DEFAULT, "dlsym", GLIBC_BASE_VERSION),
      (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"),
      (dlsym_fn)dlsym(RTLD_DEFAULT, "dlsym"),
      (dlsym_fn)dlsym(RTLD_NEXT, "dlsym"),
  };
  for (int i = 0; i < 4; i++) {
    if (i == 1 && via[i] == NULL) continue; /* glibc older than 2.34 */
    CHECK(via[i] != NULL);
    mem_alloc_fn alloc = (mem_alloc_fn)via[i](h, "cuMemAlloc_v2");
    CHECK(alloc != NULL);
    CUdeviceptr p;
    CHECK(alloc(&p, 100 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(alloc(&p, 8 * MiB) == CUDA_SUCCESS);
    CHECK_EXACT(8 * MiB);
    CHECK(cuMemFree(p) == CUDA_SUCCESS);
    CHECK_EXACT(0);
  }
  /* Everything else is glibc's answer. */
  CHECK(dlvsym(RTLD_DEFAULT, "memcpy", GLIBC_MEMCPY_VERSION) != NULL);
  CHECK(dlvsym(RTLD_NEXT, "printf", GLIBC_BASE_VERSION) != NULL);
  CHECK(dlvsym(h, "cuNoSuchFunction", GLIBC_BASE_VERSION) == NULL);
  return 0;
}

/* Items 10/11: memory exported by CUDA IPC or as a dmabuf can outlive its cuMemFree (an importer,
 * an open fd): it stays charged to the container that allocated it until the process exits.
 * Limit 64 MiB. (Before: released at the free, the device held 80 MiB with 40 counted.) */
static int case_ipc_export(void) {
  setup();
  CUdeviceptr a, b, c;
  CHECK(cuMemAlloc(&a, 40 * MiB) == CUDA_SUCCESS);
  CUipcMemHandle h;
  CHECK(cuIpcGetMemHandle(&h, a) == CUDA_SUCCESS);
  CHECK(cuMemFree(a) == CUDA_SUCCESS);
  CHECK_EXACT(40 * MiB); /* the importer keeps it */
  CHECK(cuMemAlloc(&b, 40 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemAlloc(&b, 8 * MiB) == CUDA_SUCCESS);
  int fd;
  CHECK(cuMemGetHandleForAddressRange(&fd, b, 8 * MiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) == CUDA_SUCCESS);
  CHECK(cuMemFree(b) == CUDA_SUCCESS);
  CHECK_EXACT(48 * MiB);
  CHECK(cuMemAlloc(&c, 8 * MiB) == CUDA_SUCCESS); /* not exported: released at its free */
  CHECK(cuMemFree(c) == CUDA_SUCCESS);
  CHECK_EXACT(48 * MiB);
  return 0;
}

/* Item 11, VMM memory: a dmabuf of a cuMemMap range keeps the physical allocation alive after
 * cuMemUnmap and cuMemRelease until its fd is closed (fake_cuda_handles.inc, the real driver's
 * rule); the creator stays charged until it exits (a close is invisible to a hook). Limit 64 MiB.
 * (Without the VMM marking: released at unmap+release, the device held 32 MiB with 0 counted.) */
static int case_dmabuf_vmm(void) {
  setup();
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  CHECK(cuMemCreate(&h, 32 * MiB, &prop, 0) == CUDA_SUCCESS);
  CHECK(cuMemAddressReserve(&va, 32 * MiB, 0, 0, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(va, 32 * MiB, 0, h, 0) == CUDA_SUCCESS);
  int fd = -1;
  CHECK(cuMemGetHandleForAddressRange(&fd, va, 32 * MiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) == CUDA_SUCCESS);
  CHECK(fd >= 0);
  CHECK(cuMemUnmap(va, 32 * MiB) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h) == CUDA_SUCCESS);
  CHECK(cuMemAddressFree(va, 32 * MiB) == CUDA_SUCCESS);
  CHECK_EXACT(32 * MiB); /* the fd keeps it */
  CHECK(cuMemCreate(&h, 40 * MiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EXACT(32 * MiB);
  /* Not exported: released at unmap + release, as before. */
  CHECK(cuMemCreate(&h, 16 * MiB, &prop, 0) == CUDA_SUCCESS);
  CHECK(cuMemAddressReserve(&va, 16 * MiB, 0, 0, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(va, 16 * MiB, 0, h, 0) == CUDA_SUCCESS);
  CHECK_EXACT(48 * MiB);
  CHECK(cuMemUnmap(va, 16 * MiB) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h) == CUDA_SUCCESS);
  CHECK_EXACT(32 * MiB);
  return 0;
}

/* Item 11, part of an allocation: a dmabuf of an interior range keeps the whole allocation alive
 * (cuMemAlloc memory, and every VMM allocation mapped in the range, also across two mappings).
 * Limit 64 MiB. (Before: only a range starting at an allocation's or mapping's start was marked
 * exported; here the device held 56 MiB with 0 counted.) */
static int case_dmabuf_interior(void) {
  setup();
  CUdeviceptr a;
  int fd = -1;
  CHECK(cuMemAlloc(&a, 16 * MiB) == CUDA_SUCCESS);
  CHECK(cuMemGetHandleForAddressRange(&fd, a + 4 * MiB, 4 * MiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) ==
        CUDA_SUCCESS);
  CHECK(cuMemFree(a) == CUDA_SUCCESS);
  CHECK_EXACT(16 * MiB);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  /* The upper half of one mapping. */
  CUmemGenericAllocationHandle h, h2;
  CUdeviceptr va;
  CHECK(cuMemCreate(&h, 32 * MiB, &prop, 0) == CUDA_SUCCESS);
  CHECK(cuMemAddressReserve(&va, 32 * MiB, 0, 0, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(va, 32 * MiB, 0, h, 0) == CUDA_SUCCESS);
  CHECK(cuMemGetHandleForAddressRange(&fd, va + 16 * MiB, 16 * MiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) ==
        CUDA_SUCCESS);
  CHECK(cuMemUnmap(va, 32 * MiB) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h) == CUDA_SUCCESS);
  CHECK_EXACT(48 * MiB);
  /* A range across two adjacent mappings, starting inside the first. */
  CHECK(cuMemCreate(&h, 4 * MiB, &prop, 0) == CUDA_SUCCESS);
  CHECK(cuMemCreate(&h2, 4 * MiB, &prop, 0) == CUDA_SUCCESS);
  CHECK(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(va, 4 * MiB, 0, h, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(va + 4 * MiB, 4 * MiB, 0, h2, 0) == CUDA_SUCCESS);
  CHECK(cuMemGetHandleForAddressRange(&fd, va + 2 * MiB, 4 * MiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) ==
        CUDA_SUCCESS);
  CHECK(cuMemUnmap(va, 8 * MiB) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h2) == CUDA_SUCCESS);
  CHECK_EXACT(56 * MiB);
  CHECK(cuMemAlloc(&a, 16 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  /* A mapping outside any exported range is released at unmap + release, as before. */
  CHECK(cuMemCreate(&h, 4 * MiB, &prop, 0) == CUDA_SUCCESS);
  CHECK(cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(va, 4 * MiB, 0, h, 0) == CUDA_SUCCESS);
  CHECK(cuMemUnmap(va, 4 * MiB) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h) == CUDA_SUCCESS);
  CHECK_EXACT(56 * MiB);
  return 0;
}

/* ---- SM routes: a launch loop through one entry point; the share of the fake GPU's time it gets
 * (kernels of FAKE_CUDA_KERNEL_US on a serial engine) must stay near CUDA_DEVICE_SM_LIMIT (30 %;
 * unthrottled the loop takes ~100 %). */

typedef CUresult (*launch_fn)(CUstream s);
/* Saturating loop for `secs` after a warm-up of the same length: 8 launches a batch, at most 8
 * batches queued (events on the launch stream, in the stream's context). Returns the busy share. */
static long long (*g_engine_ns)(int) = fakeCudaBusyNs; /* which engine's busy time is measured */
static double busy_share(launch_fn launch, CUstream s, CUcontext event_ctx, double secs) {
  CUevent done[8];
  CHECK(cuCtxPushCurrent(event_ctx) == CUDA_SUCCESS);
  for (int i = 0; i < 8; i++) CHECK(cuEventCreate(&done[i], 0) == CUDA_SUCCESS);
  CUcontext popped;
  CHECK(cuCtxPopCurrent(&popped) == CUDA_SUCCESS);
  double share = 0;
  long batch = 0;
  for (int phase = 0; phase < 2; phase++) {
    double t0 = now_s();
    long long b0 = g_engine_ns(0);
    while (now_s() - t0 < secs) {
      int slot = (int)(batch % 8);
      if (batch >= 8) CHECK(cuEventSynchronize(done[slot]) == CUDA_SUCCESS);
      for (int i = 0; i < 8; i++) CHECK(launch(s) == CUDA_SUCCESS);
      CHECK(cuCtxPushCurrent(event_ctx) == CUDA_SUCCESS);
      CHECK(cuEventRecord(done[slot], s) == CUDA_SUCCESS);
      CHECK(cuCtxPopCurrent(&popped) == CUDA_SUCCESS);
      batch++;
    }
    share = (double)(g_engine_ns(0) - b0) / 1e9 / (now_s() - t0);
  }
  return share;
}

#define CHECK_SHARE(share)                                                                         \
  do {                                                                                             \
    double s_ = (share);                                                                           \
    fprintf(stderr, "routes: %s: busy share %.1f %% at limit 30 %%\n", __func__, s_ * 100);        \
    CHECK(s_ > 0.10 && s_ < 0.45);                                                                 \
  } while (0)

static CUresult launch_kernel(CUstream s) { return cuLaunchKernel(NULL, 132, 1, 1, 256, 1, 1, 0, s, NULL, NULL); }
static CUresult launch_grid_async(CUstream s) { return cuLaunchGridAsync(NULL, 132, 1, s); }
static CUresult launch_grid(CUstream s) { (void)s; return cuLaunchGrid(NULL, 132, 1); }
static CUresult launch_v1(CUstream s) { (void)s; return cuLaunch(NULL); }

/* Item 15: a context-independent kernel launched on an explicit stream with no current context
 * (the driver runs it in the stream's context). Before: the gate found no device, 100 %. */
static int case_launch_no_ctx(void) {
  CUcontext ctx = setup();
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
  CHECK_SHARE(busy_share(launch_kernel, s, ctx, 1.0));
  return 0;
}

/* Item 16 (hook side): a launch into a stream of another context than the current one is timed in
 * the stream's context. */
static int case_launch_other_ctx(void) {
  CUcontext a = setup(), b;
  CHECK(cuCtxCreate_v2(&b, 0, 0) == CUDA_SUCCESS); /* current now */
  CUstream sb;
  CHECK(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(a) == CUDA_SUCCESS);
  CHECK_SHARE(busy_share(launch_kernel, sb, b, 1.0));
  return 0;
}

/* Item 18: the pre-4.0 launch API (cuFuncSetBlockShape + cuParamSet* + cuLaunchGrid[Async] /
 * cuLaunch). Before: not hooked, ~100 %. */
static int case_launch_legacy(void) {
  CUcontext ctx = setup();
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  CHECK(cuFuncSetBlockShape(NULL, 256, 1, 1) == CUDA_SUCCESS);
  CHECK(cuParamSetSize(NULL, 0) == CUDA_SUCCESS);
  CHECK_SHARE(busy_share(launch_grid_async, s, ctx, 0.7));
  CHECK_SHARE(busy_share(launch_grid, NULL, ctx, 0.7));
  CHECK_SHARE(busy_share(launch_v1, NULL, ctx, 0.7));
  return 0;
}

static CUresult memset_async(CUstream s) { return cuMemsetD32Async(0x1000, 0, 1 << 28, s); }
static CUresult memset_sync_mix(CUstream s) {
  static int i;
  switch (i++ % 3) {
    case 0: return cuMemsetD8(0x1000, 0, 1 << 28);
    case 1: return cuMemsetD32(0x1000, 0, 1 << 28);
    default: return cuMemsetD2D16Async(0x1000, 4096, 0, 2048, 1024, s);
  }
}

/* Item 19: GPU work that is not a launch (memsets back to back). Before: never throttled, 100 %. */
static int case_memset(void) {
  CUcontext ctx = setup();
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  CHECK_SHARE(busy_share(memset_async, s, ctx, 0.7));
  CHECK_SHARE(busy_share(memset_sync_mix, NULL, ctx, 0.7));
  return 0;
}

/* Copies (cuMemcpy*) are NOT gated by the SM limiter, by decision: they run on the copy engines
 * (DMA), not on the SMs the limit shares; NVML's utilization, which HAMi's monitor and the
 * exporter compare with the limit, counts kernel time only; and an honest job overlapping its
 * host-to-device transfers with compute would see its transfer time charged against its compute
 * share. (Memsets are gated: the driver runs them as kernels on the SMs, item 19.) The memory
 * bandwidth a device-to-device copy loop takes from neighbours is not limited (README "Routes around
 * the limits"). This case guards the decision: back-to-back copies under a 30 % SM limit keep the
 * fake's copy engine busy (> 80 %) and take no SM time; gated like a launch they get 30 %. */
static CUresult copy_dtod(CUstream s) { return cuMemcpyDtoDAsync(0x2000, 0x1000, 1 << 28, s); }
static CUresult copy_htod(CUstream s) {
  static char host[64];
  return cuMemcpyHtoDAsync(0x2000, host, sizeof host, s);
}
static int case_copies_ungated(void) {
  CUcontext ctx = setup();
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  long long sm0 = fakeCudaBusyNs(0);
  g_engine_ns = fakeCudaCopyNs;
  launch_fn copies[2] = {copy_dtod, copy_htod};
  for (int i = 0; i < 2; i++) {
    double share = busy_share(copies[i], s, ctx, 0.5);
    fprintf(stderr, "routes: copies: copy engine busy %.1f %% under an SM limit of 30 %%\n", share * 100);
    CHECK(share > 0.8);
  }
  CHECK_EQ_U(fakeCudaBusyNs(0), sm0); /* no SM time */
  return 0;
}

static CUgraph alloc_graph(size_t bytes, CUdeviceptr *dptr) {
  CUgraph g;
  CHECK(cuGraphCreate(&g, 0) == CUDA_SUCCESS);
  CUDA_MEM_ALLOC_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.poolProps.location.id = 0;
  p.bytesize = bytes;
  CUgraphNode alloc;
  CHECK(cuGraphAddMemAllocNode(&alloc, g, NULL, 0, &p) == CUDA_SUCCESS);
  *dptr = p.dptr;
  return g;
}

/* Item 8: the CUDA 10 cuGraphInstantiate reached through dlsym and through cuGetProcAddress with
 * an old cudaVersion: a graph whose allocation node cannot fit is refused, one that fits is
 * counted at launch. Limit 64 MiB. Before: the raw entry point, 80 MiB held, nothing counted. */
static int case_graph_v1(void) {
  setup();
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  CHECK(h != NULL);
  graph_instantiate_v1_fn via_dlsym = (graph_instantiate_v1_fn)dlsym(h, "cuGraphInstantiate");
  graph_instantiate_v1_fn via_getproc = NULL;
  CHECK(cuGetProcAddress_v2("cuGraphInstantiate", (void **)&via_getproc, 10000, 0, NULL) == CUDA_SUCCESS);
  CHECK(via_dlsym != NULL && via_getproc != NULL);
  graph_instantiate_v1_fn routes[2] = {via_dlsym, via_getproc};
  for (int i = 0; i < 2; i++) {
    CUgraphExec x;
    CUdeviceptr d;
    CHECK(routes[i](&x, alloc_graph(80 * MiB, &d), NULL, NULL, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EXACT(0);
    CHECK(routes[i](&x, alloc_graph(40 * MiB, &d), NULL, NULL, 0) == CUDA_SUCCESS);
    CUdeviceptr plain;
    CHECK(cuMemAlloc(&plain, 32 * MiB) == CUDA_SUCCESS);
    CHECK(cuGraphLaunch(x, 0) == CUDA_ERROR_OUT_OF_MEMORY); /* 40 + 32 > 64 */
    CHECK(cuMemFree(plain) == CUDA_SUCCESS);
    CHECK(cuGraphLaunch(x, 0) == CUDA_SUCCESS);
    CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
    CHECK_COUNTED();
    CHECK(test_used(0) >= 40 * MiB);
    CHECK(cuGraphExecDestroy(x) == CUDA_SUCCESS);
    CHECK(cuMemFree(d) == CUDA_SUCCESS); /* the graph has no free node */
    CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS);
    CHECK_EXACT(0);
  }
  return 0;
}

static const test_case_t cases[] = {
    {"pools_many", case_pools_many},
    {"async_no_ctx", case_async_no_ctx},
    {"launch_no_ctx", case_launch_no_ctx},
    {"launch_other_ctx", case_launch_other_ctx},
    {"launch_legacy", case_launch_legacy},
    {"graph_v1", case_graph_v1},
    {"granularity", case_granularity},
    {"module_refuse", case_module_refuse},
    {"lmem", case_lmem},
    {"opencl_refused", case_opencl_refused},
    {"opencl_unlimited", case_opencl_unlimited},
    {"memset", case_memset},
    {"copies_ungated", case_copies_ungated},
    {"dlvsym", case_dlvsym},
    {"ipc_export", case_ipc_export},
    {"dmabuf_vmm", case_dmabuf_vmm},
    {"dmabuf_interior", case_dmabuf_interior},
};

int main(int argc, char **argv) {
  return run_case(argc, argv, cases, sizeof cases / sizeof cases[0]);
}

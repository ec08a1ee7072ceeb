/*
 * memkinds.c — every way to hold device memory besides plain allocations, under LD_PRELOAD against
 * the fake driver, which models each one's real lifetime (test/fake/fake_cuda.c): VMM handles with
 * mappings, retained, exported and imported handles; graph allocation nodes served from the graph
 * pool at launch; cuCtxSetLimit reservations; a context destroyed with many live allocations.
 * `memkinds <case>`; exit 0 = pass. test/run_preload.sh runs them with CUDA_DEVICE_MEMORY_LIMIT=64m.
 *
 * What each proves: a request over the limit gets CUDA_ERROR_OUT_OF_MEMORY (before the driver is
 * asked), the container's count equals what the fake device physically holds after every step,
 * and usage returns to its baseline after the frees.
 */
#include <cuda.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "cases.h"

static CUmemAllocationProp device_prop(void) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

/* cuMemCreate -> reserve -> map -> set access -> release: the documented VMM pattern. Returns the
 * mapped address; the handle is released, the mapping keeps the memory. */
static CUdeviceptr create_map_release(size_t size) {
  CUmemAllocationProp prop = device_prop();
  CUmemGenericAllocationHandle h;
  CHECK(cuMemCreate(&h, size, &prop, 0) == CUDA_SUCCESS);
  CUdeviceptr va;
  CHECK(cuMemAddressReserve(&va, size, 0, 0, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(va, size, 0, h, 0) == CUDA_SUCCESS);
  CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CHECK(cuMemSetAccess(va, size, &acc, 1) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h) == CUDA_SUCCESS);
  return va;
}

/* Memory stays counted after cuMemRelease while mapped; an over-limit create is refused; the
 * count returns to zero at the last unmap (one unmap may cover several adjacent mappings). */
static int case_vmm_mapped(void) {
  setup();
  CUdeviceptr a = create_map_release(32 * MiB);
  CHECK_EXACT(32 * MiB);
  CUdeviceptr b = create_map_release(24 * MiB);
  CHECK_EXACT(56 * MiB);
  CUmemAllocationProp prop = device_prop();
  CUmemGenericAllocationHandle h;
  CHECK(cuMemCreate(&h, 16 * MiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EXACT(56 * MiB);
  CHECK(cuMemUnmap(a, 32 * MiB) == CUDA_SUCCESS);
  CHECK_EXACT(24 * MiB);
  CHECK(cuMemUnmap(b, 24 * MiB) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  /* Two handles mapped side by side in one reservation, unmapped by one call. */
  CUmemGenericAllocationHandle h1, h2;
  CHECK(cuMemCreate(&h1, 16 * MiB, &prop, 0) == CUDA_SUCCESS);
  CHECK(cuMemCreate(&h2, 16 * MiB, &prop, 0) == CUDA_SUCCESS);
  CUdeviceptr va;
  CHECK(cuMemAddressReserve(&va, 32 * MiB, 0, 0, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(va, 16 * MiB, 0, h1, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(va + 16 * MiB, 16 * MiB, 0, h2, 0) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h1) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h2) == CUDA_SUCCESS);
  CHECK_EXACT(32 * MiB);
  CHECK(cuMemUnmap(va, 32 * MiB) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  /* A handle mapped twice lives until both mappings are gone. */
  CHECK(cuMemCreate(&h1, 8 * MiB, &prop, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(va, 8 * MiB, 0, h1, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(va + 16 * MiB, 8 * MiB, 0, h1, 0) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h1) == CUDA_SUCCESS);
  CHECK(cuMemUnmap(va, 8 * MiB) == CUDA_SUCCESS);
  CHECK_EXACT(8 * MiB);
  CHECK(cuMemUnmap(va + 16 * MiB, 8 * MiB) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  CHECK(cuMemRelease(h1) != CUDA_SUCCESS); /* released once only */
  CHECK_EXACT(0);
  return 0;
}

/* Threads racing the VMM pattern (create -> map -> release, retain, unmap, release) under one
 * limit: the count never goes above it, every refused create leaves nothing behind, and the count
 * and the device are back to zero at the end. */
static pthread_barrier_t g_vmm_start;
static void *vmm_worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  pthread_barrier_wait(&g_vmm_start); /* all threads race from the same moment */
  CUmemAllocationProp prop = device_prop();
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
  struct { CUdeviceptr va; size_t size; CUmemGenericAllocationHandle again; int retained; } ring[3] = {{0}};
  for (int i = 0; i < 3000; i++) {
    int k = i % 3; /* each thread keeps up to three mappings whose handles are released */
    if (ring[k].va) {
      CHECK(cuMemUnmap(ring[k].va, ring[k].size) == CUDA_SUCCESS);
      if (ring[k].retained) CHECK(cuMemRelease(ring[k].again) == CUDA_SUCCESS);
      ring[k].va = 0;
    }
    size_t size = (size_t)(1 + rand_r(&seed) % 8) * 2 * MiB;
    CUmemGenericAllocationHandle h;
    if (cuMemCreate(&h, size, &prop, 0) != CUDA_SUCCESS) continue;
    CHECK(cuMemAddressReserve(&ring[k].va, size, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(ring[k].va, size, 0, h, 0) == CUDA_SUCCESS);
    CHECK(cuMemRelease(h) == CUDA_SUCCESS);
    ring[k].size = size;
    ring[k].retained = rand_r(&seed) % 2;
    if (ring[k].retained)
      CHECK(cuMemRetainAllocationHandle(&ring[k].again, (void *)(uintptr_t)ring[k].va) == CUDA_SUCCESS);
  }
  for (int k = 0; k < 3; k++) {
    if (!ring[k].va) continue;
    CHECK(cuMemUnmap(ring[k].va, ring[k].size) == CUDA_SUCCESS);
    if (ring[k].retained) CHECK(cuMemRelease(ring[k].again) == CUDA_SUCCESS);
  }
  return NULL;
}

static volatile int g_phys_stop;
static size_t g_phys_max;
static void *phys_sampler(void *arg) { /* what the (fake) device physically holds */
  (void)arg;
  while (!g_phys_stop) {
    size_t u = fakeCudaDeviceUsed(0);
    if (u > g_phys_max) g_phys_max = u;
  }
  return NULL;
}

static int case_vmm_threads(void) {
  setup();
  struct test_sampler sampler;
  pthread_t phys, t[6];
  CHECK(test_sampler_start(&sampler, 64 * MiB) == 0);
  CHECK(pthread_create(&phys, NULL, phys_sampler, NULL) == 0);
  CHECK(pthread_barrier_init(&g_vmm_start, NULL, 6) == 0);
  for (int i = 0; i < 6; i++) CHECK(pthread_create(&t[i], NULL, vmm_worker, (void *)(uintptr_t)(i + 1)) == 0);
  for (int i = 0; i < 6; i++) pthread_join(t[i], NULL);
  g_phys_stop = 1;
  pthread_join(phys, NULL);
  CHECK_EQ_U(test_sampler_stop(&sampler), 0);
  CHECK(g_phys_max <= 64 * MiB); /* the device never held more than the limit */
  CHECK_EXACT(0);
  return 0;
}

/* A handle re-obtained from an address holds the memory after the original handle and the mapping
 * are gone, until it is released too. */
static int case_vmm_retain(void) {
  setup();
  CUmemAllocationProp prop = device_prop();
  CUmemGenericAllocationHandle h, again;
  CHECK(cuMemCreate(&h, 32 * MiB, &prop, 0) == CUDA_SUCCESS);
  CUdeviceptr va;
  CHECK(cuMemAddressReserve(&va, 32 * MiB, 0, 0, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(va, 32 * MiB, 0, h, 0) == CUDA_SUCCESS);
  CHECK(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(va + 4096)) == CUDA_SUCCESS);
  CHECK(again == h);
  CHECK(cuMemRelease(h) == CUDA_SUCCESS);
  CHECK(cuMemUnmap(va, 32 * MiB) == CUDA_SUCCESS);
  CHECK_EXACT(32 * MiB);
  CHECK(cuMemCreate(&h, 40 * MiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemRelease(again) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  CHECK(cuMemCreate(&h, 40 * MiB, &prop, 0) == CUDA_SUCCESS);
  CHECK(cuMemRelease(h) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  return 0;
}

/* Shareable handles: the exporter stays charged after releasing (an exported descriptor keeps the
 * memory alive); an importer is charged for what it maps, refused over the limit, and released when
 * its handle is released and unmapped. */
static int case_vmm_share(void) {
  setup();
  CUmemAllocationProp prop = device_prop();
  CUmemGenericAllocationHandle h, imported;
  CHECK(cuMemCreate(&h, 16 * MiB, &prop, 0) == CUDA_SUCCESS);
  int fd = -1;
  CHECK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS);
  CHECK(fd >= 0);
  CHECK(cuMemRelease(h) == CUDA_SUCCESS);
  CHECK_EXACT(16 * MiB); /* the descriptor holds it: still counted */
  CHECK(cuMemImportFromShareableHandle(&imported, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ==
        CUDA_SUCCESS);
  CUdeviceptr va;
  CHECK(cuMemAddressReserve(&va, 16 * MiB, 0, 0, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(va, 16 * MiB, 0, imported, 0) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 32 * MiB); /* the importer's share too (same process here: counted twice) */
  /* An importer mapping that does not fit is refused before the driver maps it. */
  CUmemGenericAllocationHandle big, big_imported;
  CHECK(cuMemCreate(&big, 24 * MiB, &prop, 0) == CUDA_SUCCESS);
  int fd2 = -1;
  CHECK(cuMemExportToShareableHandle(&fd2, big, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS);
  CHECK(cuMemImportFromShareableHandle(&big_imported, (void *)(intptr_t)fd2,
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == CUDA_SUCCESS);
  CUdeviceptr va2;
  CHECK(cuMemAddressReserve(&va2, 24 * MiB, 0, 0, 0) == CUDA_SUCCESS);
  CHECK(cuMemMap(va2, 24 * MiB, 0, big_imported, 0) == CUDA_ERROR_OUT_OF_MEMORY); /* 56 + 24 > 64 */
  CHECK_EQ_U(test_used(0), 56 * MiB);
  CHECK(cuMemRelease(big_imported) == CUDA_SUCCESS);
  CHECK(cuMemUnmap(va, 16 * MiB) == CUDA_SUCCESS);
  CHECK(cuMemRelease(imported) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 40 * MiB); /* the exporters' charges stay until the process exits */
  close(fd);
  close(fd2);
  CHECK(cuMemRelease(big) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 40 * MiB);
  return 0;
}

static CUgraph alloc_graph(size_t bytes, int with_free, CUdeviceptr *dptr) {
  CUgraph g;
  CHECK(cuGraphCreate(&g, 0) == CUDA_SUCCESS);
  CUDA_MEM_ALLOC_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.poolProps.location.id = 0;
  p.bytesize = bytes;
  CUgraphNode alloc, freen;
  CHECK(cuGraphAddMemAllocNode(&alloc, g, NULL, 0, &p) == CUDA_SUCCESS);
  *dptr = p.dptr;
  if (with_free) CHECK(cuGraphAddMemFreeNode(&freen, g, &alloc, 1, p.dptr) == CUDA_SUCCESS);
  return g;
}

/* Graph allocation nodes (run with the real driver's 32 MiB graph pool step): the graph pool is
 * counted from the launch on (reserved before it), kept
 * while the pool keeps the memory (after the graph's own free, after cuGraphExecDestroy) and
 * released by cuDeviceGraphMemTrim; a graph that cannot fit is refused at instantiate and launch. */
static int case_graph_mem(void) {
  setup();
  CUdeviceptr d, plain;
  CUgraph g = alloc_graph(32 * MiB, 1, &d);
  CUgraphExec x;
  CHECK(cuGraphInstantiateWithFlags(&x, g, 0) == CUDA_SUCCESS);
  CHECK_EXACT(0); /* nothing is mapped before the launch */
  CHECK(cuGraphLaunch(x, 0) == CUDA_SUCCESS);
  CHECK(cuStreamSynchronize(0) == CUDA_SUCCESS);
  CHECK_EXACT(32 * MiB); /* the pool keeps the block after the graph's free node ran */
  CHECK(cuMemAlloc(&plain, 40 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuGraphLaunch(x, 0) == CUDA_SUCCESS); /* reuses the pool's block */
  CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK_EXACT(32 * MiB);
  CHECK(cuGraphExecDestroy(x) == CUDA_SUCCESS);
  CHECK_EXACT(32 * MiB);
  CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  /* Too big for the limit: refused at instantiate. */
  CUdeviceptr d2;
  CUgraph big = alloc_graph(80 * MiB, 1, &d2);
  CHECK(cuGraphInstantiateWithFlags(&x, big, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EXACT(0);
  /* Fits at instantiate, not at launch: plain memory took the room in between. */
  CUdeviceptr d3;
  CUgraph mid = alloc_graph(40 * MiB, 0, &d3);
  CHECK(cuGraphInstantiateWithFlags(&x, mid, 0) == CUDA_SUCCESS);
  CHECK(cuMemAlloc(&plain, 32 * MiB) == CUDA_SUCCESS);
  CHECK(cuGraphLaunch(x, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EXACT(32 * MiB);
  CHECK(cuMemFree(plain) == CUDA_SUCCESS);
  /* An allocation the graph does not free lives after the launch until cuMemFree; the pool keeps
   * the block until trimmed. */
  CHECK(cuGraphLaunch(x, 0) == CUDA_SUCCESS);
  CHECK(cuStreamSynchronize(0) == CUDA_SUCCESS);
  CHECK_EXACT(64 * MiB); /* 40 MiB rounded up to the pool's 32 MiB step */
  CHECK(cuMemFree(d3) == CUDA_SUCCESS);
  CHECK_EXACT(64 * MiB);
  CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  CHECK(cuGraphExecDestroy(x) == CUDA_SUCCESS);
  /* cuGraphUpload maps like a launch. */
  CHECK(cuGraphInstantiateWithFlags(&x, g, 0) == CUDA_SUCCESS);
  CHECK(cuGraphUpload(x, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK_EXACT(32 * MiB);
  CHECK(cuGraphExecDestroy(x) == CUDA_SUCCESS);
  CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  return 0;
}

/* Stream-ordered allocations captured into a graph (cudaMallocAsync inside cudaStreamBeginCapture):
 * the capture must survive the hook (no pool query while the stream captures), the allocation is
 * an allocation node, counted from the launch like any graph memory, and refused when it cannot
 * fit. */
static int case_graph_capture(void) {
  setup();
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  CUdeviceptr d, plain;
  CUgraph g;
  CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS);
  CHECK(cuMemAllocAsync(&d, 32 * MiB, s) == CUDA_SUCCESS);
  CHECK(cuStreamEndCapture(s, &g) == CUDA_SUCCESS);
  CHECK_EXACT(0); /* captured, not allocated */
  CUgraphExec x;
  CHECK(cuGraphInstantiateWithFlags(&x, g, 0) == CUDA_SUCCESS);
  CHECK(cuGraphLaunch(x, s) == CUDA_SUCCESS);
  CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
  CHECK_EXACT(32 * MiB);
  CHECK(cuMemAlloc(&plain, 40 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemFree(d) == CUDA_SUCCESS);
  CHECK(cuGraphExecDestroy(x) == CUDA_SUCCESS);
  CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  /* A captured allocation too big for the limit: the graph is refused at instantiate. */
  CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  CHECK(cuMemAllocAsync(&d, 80 * MiB, s) == CUDA_SUCCESS);
  CHECK(cuStreamEndCapture(s, &g) == CUDA_SUCCESS);
  CHECK(cuGraphInstantiateWithFlags(&x, g, 0) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EXACT(0);
  return 0;
}

/* cuCtxSetLimit: heap and printf FIFO count their whole size once set, the stack its growth for
 * every resident thread (the fake: 132 SMs x 2048); lowering or destroying the context releases. */
static int case_ctx_limits(void) {
  setup();
  CHECK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 100 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EXACT(0);
  CHECK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 32 * MiB) == CUDA_SUCCESS);
  CHECK_EXACT(32 * MiB);
  CHECK(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 4 * MiB) == CUDA_SUCCESS);
  CHECK_EXACT(36 * MiB);
  CHECK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024 + 128) == CUDA_ERROR_OUT_OF_MEMORY); /* +33 MiB */
  CHECK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024 + 64) == CUDA_SUCCESS);                /* +16.5 MiB */
  CHECK_EXACT(36 * MiB + 64ull * 132 * 2048);
  CHECK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * MiB) == CUDA_SUCCESS);
  CHECK_EXACT(12 * MiB + 64ull * 132 * 2048);
  /* A second context's limits go away with it. */
  CUcontext c;
  CHECK(cuCtxCreate_v2(&c, 0, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 24 * MiB) == CUDA_SUCCESS);
  CHECK_EXACT(36 * MiB + 64ull * 132 * 2048);
  CHECK(cuCtxDestroy(c) == CUDA_SUCCESS);
  CHECK_EXACT(12 * MiB + 64ull * 132 * 2048);
  CHECK(cuDevicePrimaryCtxReset(0) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  return 0;
}

/* A context destroyed with many live allocations releases every one of them (and nothing of the
 * context beside it). */
static int case_ctx_destroy_many(void) {
  CUcontext primary = setup();
  CUdeviceptr keep;
  CHECK(cuMemAlloc(&keep, 1 * MiB) == CUDA_SUCCESS);
  CUcontext c;
  CHECK(cuCtxCreate_v2(&c, 0, 0) == CUDA_SUCCESS);
  enum { N = 5000 };
  for (int i = 0; i < N; i++) {
    CUdeviceptr d;
    CHECK(cuMemAlloc(&d, 4096) == CUDA_SUCCESS);
  }
  CHECK_EXACT(1 * MiB + N * 4096ull);
  CHECK(cuCtxDestroy(c) == CUDA_SUCCESS);
  CHECK_EXACT(1 * MiB);
  CHECK(cuCtxSetCurrent(primary) == CUDA_SUCCESS);
  CHECK(cuMemFree(keep) == CUDA_SUCCESS);
  CHECK_EXACT(0);
  return 0;
}

/* Rewrites the fake NVML's script (FAKE_NVML_CONFIG): one GPU matching the fake libcuda's device
 * 0, this process using `used` bytes on it. */
static void nvml_reports(unsigned long long used) {
  const char *path = getenv("FAKE_NVML_CONFIG");
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  CHECK(f != NULL);
  fprintf(f, "device 0 uuid=GPU-00000000-0000-0000-0000-000000000000 name=Fake total=85899345920 used=%llu\n"
             "process 0 pid=%d used=%llu\n",
          used, (int)getpid(), used);
  CHECK(fclose(f) == 0);
  CHECK(rename(tmp, path) == 0);
}

/* Memory no allocation shows (a module's globals, JIT code): what NVML reports for the process
 * beyond what is counted is charged right after a module load, so the next allocation that does
 * not fit is refused; it is released when NVML shows it gone (after the unload). */
static int case_untracked(void) {
  nvml_reports(0);
  setup();
  CUdeviceptr a, b;
  CHECK(cuMemAlloc(&a, 8 * MiB) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 8 * MiB);
  nvml_reports(8 * MiB + 20 * MiB); /* the module's 20 MiB of globals */
  CUmodule m;
  CHECK(cuModuleLoadData(&m, "image") == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 28 * MiB);
  CHECK_EQ_U(test_my_used(0, 2), 8 * MiB); /* data stays data; the rest is module memory */
  CHECK(cuMemAlloc(&b, 40 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  nvml_reports(8 * MiB);
  CHECK(cuModuleUnload(m) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 8 * MiB);
  CHECK(cuMemAlloc(&b, 40 * MiB) == CUDA_SUCCESS);
  CHECK(cuMemFree(b) == CUDA_SUCCESS);
  CHECK(cuMemFree(a) == CUDA_SUCCESS);
  nvml_reports(0);
  size_t free_b, total;
  CHECK(cuMemGetInfo(&free_b, &total) == CUDA_SUCCESS); /* reconciles too */
  CHECK_EQ_U(test_used(0), 0);
  return 0;
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      {"vmm_mapped", case_vmm_mapped}, {"vmm_retain", case_vmm_retain},   {"vmm_share", case_vmm_share},
      {"graph_mem", case_graph_mem},   {"ctx_limits", case_ctx_limits}, {"ctx_destroy_many", case_ctx_destroy_many},
      {"untracked", case_untracked},    {"vmm_threads", case_vmm_threads},    {"graph_capture", case_graph_capture},
  };
  return run_case(argc, argv, cases, sizeof cases / sizeof cases[0]);
}

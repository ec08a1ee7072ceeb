/*
 * mem_patterns.c — every way to hold device memory, one pattern per run, on a real GPU (driver API;
 * run by gpu/run_mem_patterns.sh with and without libvgpu under CUDA_DEVICE_MEMORY_LIMIT).
 *
 *   mem_patterns vmm <n> <mib>      n x (cuMemCreate -> reserve -> map -> set access -> memset ->
 *                                   release), mappings kept; then unmap all
 *   mem_patterns retain <mib>       create -> map -> retain from the address -> release -> unmap:
 *                                   the retained handle holds it; an over-limit create; release it
 *   mem_patterns share <mib>        create -> export POSIX fd -> import -> map the import; the
 *                                   creator releases and unmaps (the import keeps the memory); a
 *                                   request that fits only if that is not counted; then release all
 *   mem_patterns graph <n> <mib>    n graphs with one allocation node each (no free node),
 *                                   instantiated and launched until refused; a graph over the limit;
 *                                   then cuMemFree + cuDeviceGraphMemTrim. Prints the graph pool's
 *                                   reservation after instantiate, upload and launch of the first.
 *   mem_patterns heap <mib>         cuCtxSetLimit(MALLOC_HEAP_SIZE) 8 GiB (over the limit), then
 *                                   <mib>; a kernel that mallocs from it; stack size 16 KiB and the
 *                                   kernel again; back to the defaults (refused after a launch)
 *   mem_patterns module <cubin>     load a module with a 512 MiB __device__ array: what NVML sees
 *                                   after load and after its first kernel
 *   mem_patterns control <mib>      cuMemAlloc chunks until refused, then free them
 * A sampler thread reads NVML's per-process usage every 2 ms; output lines "RESULT key=value ...":
 * base (NVML after the context, before the pattern), max (highest NVML seen), after (NVML after
 * the frees, settled), oom (a request of the pattern was refused with CUDA_ERROR_OUT_OF_MEMORY),
 * tracked_after (what libvgpu counts for the process at the end).
 */
#include <pthread.h>
#include <stdint.h>

#include "gpu_common.h"

/* A request that fits a 4 GiB limit beside the context (~520 MiB) but not beside one more GiB held
 * by the pattern: the probe of "is what the pattern holds counted". */
#define SPARE_MIB 3072

static CUdevice g_dev;
static volatile int g_stop;
static volatile long long g_max;
static int g_oom;

static void *sampler(void *arg) {
  (void)arg;
  while (!g_stop) {
    long long v = nvml_self_used(g_dev);
    if (v > g_max) g_max = v;
    usleep(2000);
  }
  return NULL;
}

static long long settled(void) { /* NVML after the device went idle */
  cuCtxSynchronize();
  usleep(300000);
  long long v = nvml_self_used(g_dev);
  if (v > g_max) g_max = v;
  return v;
}

static void note(const char *what, CUresult rc) {
  if (rc == CUDA_ERROR_OUT_OF_MEMORY) g_oom++;
  long long v = nvml_self_used(g_dev); /* also the high-water mark: a step may free right after */
  if (v > g_max) g_max = v;
  printf("STEP %s rc=%d nvml=%lld tracked=%llu\n", what, (int)rc, v, tracked_self(0));
  fflush(stdout);
}

static CUmemAllocationProp dev_prop(int shareable) {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = g_dev;
  if (shareable) p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

static CUresult create_map(size_t size, int shareable, CUmemGenericAllocationHandle *h, CUdeviceptr *va) {
  CUmemAllocationProp prop = dev_prop(shareable);
  CUresult rc = cuMemCreate(h, size, &prop, 0);
  if (rc != CUDA_SUCCESS) return rc;
  CK(cuMemAddressReserve(va, size, 0, 0, 0));
  CK(cuMemMap(*va, size, 0, *h, 0));
  CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CK(cuMemSetAccess(*va, size, &acc, 1));
  CK(cuMemsetD8(*va, 1, size));
  return CUDA_SUCCESS;
}

static int do_vmm(int n, size_t size) {
  CUmemGenericAllocationHandle h;
  CUdeviceptr va[64];
  int got = 0;
  for (int i = 0; i < n && i < 64; i++) {
    CUresult rc = create_map(size, 0, &h, &va[got]);
    note("vmm_create_map", rc);
    if (rc != CUDA_SUCCESS) continue;
    CK(cuMemRelease(h));
    got++;
  }
  settled();
  printf("RESULT got=%d of=%d\n", got, n);
  for (int i = 0; i < got; i++) {
    CK(cuMemUnmap(va[i], size));
    CK(cuMemAddressFree(va[i], size));
  }
  return got;
}

static int do_retain(size_t size) {
  CUmemGenericAllocationHandle h, again, big;
  CUdeviceptr va;
  CK(create_map(size, 0, &h, &va));
  CK(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(va + 4096)));
  printf("RESULT same_handle=%d\n", again == h);
  CK(cuMemRelease(h));
  CK(cuMemUnmap(va, size));
  settled();
  note("retained_after_unmap", CUDA_SUCCESS);
  CUmemAllocationProp prop = dev_prop(0);
  CUresult rc = cuMemCreate(&big, SPARE_MIB * MiB, &prop, 0); /* fits only if the retained GiB is not counted */
  note("create_spare_while_retained", rc);
  if (rc == CUDA_SUCCESS) CK(cuMemRelease(big));
  CK(cuMemRelease(again));
  CK(cuMemAddressFree(va, size));
  return 0;
}

static int do_share(size_t size) {
  CUmemGenericAllocationHandle h, imp, big;
  CUdeviceptr va, va2;
  CK(create_map(size, 1, &h, &va));
  int fd = -1;
  CK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  CK(cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  printf("RESULT import_same_handle=%d\n", imp == h);
  CK(cuMemAddressReserve(&va2, size, 0, 0, 0));
  CUresult rc = cuMemMap(va2, size, 0, imp, 0);
  note("map_import", rc);
  /* The creator lets go; the importer's mapping keeps the memory. */
  CK(cuMemRelease(h));
  CK(cuMemUnmap(va, size));
  settled();
  note("creator_released_unmapped", CUDA_SUCCESS);
  CUmemAllocationProp prop = dev_prop(0);
  CUresult brc = cuMemCreate(&big, SPARE_MIB * MiB, &prop, 0); /* fits only if the shared GiB is not counted */
  note("create_spare_while_import_mapped", brc);
  if (brc == CUDA_SUCCESS) CK(cuMemRelease(big));
  if (rc == CUDA_SUCCESS) CK(cuMemUnmap(va2, size));
  CK(cuMemRelease(imp));
  settled();
  note("import_released_fd_open", CUDA_SUCCESS);
  close(fd);
  CK(cuMemAddressFree(va, size));
  CK(cuMemAddressFree(va2, size));
  return 0;
}

static unsigned long long graph_reserved(void) {
  cuuint64_t v = 0;
  cuDeviceGetGraphMemAttribute(g_dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v);
  return (unsigned long long)v;
}

static CUresult alloc_graph(size_t size, CUgraph *g, CUdeviceptr *dptr) {
  CK(cuGraphCreate(g, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.poolProps.location.id = g_dev;
  p.bytesize = size;
  CUgraphNode node, ms;
  CK(cuGraphAddMemAllocNode(&node, *g, NULL, 0, &p));
  *dptr = p.dptr;
  CUDA_MEMSET_NODE_PARAMS m;
  memset(&m, 0, sizeof m);
  m.dst = p.dptr;
  m.elementSize = 1;
  m.width = size;
  m.height = 1;
  m.value = 1;
  CUcontext ctx;
  CK(cuCtxGetCurrent(&ctx));
  return cuGraphAddMemsetNode(&ms, *g, &node, 1, &m, ctx);
}

static int do_graph(int n, size_t size) {
  CUgraph g[64];
  CUgraphExec x[64];
  CUdeviceptr d[64];
  int launched = 0;
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  /* Where the graph pool grows: instantiate, upload, launch (1 MiB and the pattern's size). */
  CUgraph small;
  CUgraphExec sx;
  CUdeviceptr sd;
  CK(alloc_graph(1 * MiB, &small, &sd));
  CK(cuGraphInstantiateWithFlags(&sx, small, 0));
  unsigned long long r_inst = graph_reserved();
  CK(cuGraphUpload(sx, s));
  CK(cuStreamSynchronize(s));
  unsigned long long r_up = graph_reserved();
  CK(cuGraphLaunch(sx, s));
  CK(cuStreamSynchronize(s));
  printf("RESULT graph_1MiB reserved_after_instantiate=%llu after_upload=%llu after_launch=%llu\n", r_inst, r_up,
         graph_reserved());
  CK(cuMemFree(sd));
  CK(cuGraphExecDestroy(sx));
  CK(cuDeviceGraphMemTrim(g_dev));
  printf("RESULT graph_trim reserved=%llu\n", graph_reserved());
  for (int i = 0; i < n && i < 64; i++) {
    CK(alloc_graph(size, &g[i], &d[i]));
    CUresult rc = cuGraphInstantiateWithFlags(&x[i], g[i], 0);
    note("graph_instantiate", rc);
    if (rc != CUDA_SUCCESS) break;
    rc = cuGraphLaunch(x[i], s);
    if (rc == CUDA_SUCCESS) rc = cuStreamSynchronize(s);
    note("graph_launch", rc);
    if (i == 0) printf("RESULT graph_first reserved=%llu\n", graph_reserved());
    if (rc != CUDA_SUCCESS) {
      CK(cuGraphExecDestroy(x[i]));
      break;
    }
    launched++;
  }
  CUgraph huge;
  CUgraphExec hx;
  CUdeviceptr hd;
  CK(alloc_graph(6144 * MiB, &huge, &hd));
  CUresult rc = cuGraphInstantiateWithFlags(&hx, huge, 0);
  note("graph_6GiB_instantiate", rc);
  if (rc == CUDA_SUCCESS) {
    rc = cuGraphLaunch(hx, s);
    if (rc == CUDA_SUCCESS) rc = cuStreamSynchronize(s);
    note("graph_6GiB_launch", rc);
    if (rc == CUDA_SUCCESS) CK(cuMemFree(hd));
    CK(cuGraphExecDestroy(hx));
  }
  settled();
  printf("RESULT launched=%d of=%d\n", launched, n);
  for (int i = 0; i < launched; i++) {
    CK(cuMemFree(d[i]));
    CK(cuGraphExecDestroy(x[i]));
  }
  CK(cuCtxSynchronize());
  CK(cuDeviceGraphMemTrim(g_dev));
  return launched;
}

static CUmodule load_kernels(const char *cubin) {
  CUmodule m;
  CK(cuModuleLoad(&m, cubin));
  return m;
}

static int do_heap(size_t size, const char *cubin) {
  note("heap_set_8GiB", cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8192 * MiB));
  note("heap_set", cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, size));
  CUmodule m = load_kernels(cubin);
  note("module_loaded", CUDA_SUCCESS);
  CUfunction f;
  CK(cuModuleGetFunction(&f, m, "use_heap"));
  CUdeviceptr ok;
  CK(cuMemAlloc(&ok, 4096));
  CK(cuMemsetD8(ok, 0, 4096));
  unsigned long long bytes = 256 * MiB;
  void *args[] = {&bytes, &ok};
  CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL));
  CK(cuCtxSynchronize());
  int okv = 0;
  CK(cuMemcpyDtoH(&okv, ok, sizeof okv));
  note("heap_kernel", CUDA_SUCCESS);
  printf("RESULT heap_malloc_ok=%d\n", okv);
  note("stack_16KiB", cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 16384));
  CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, args, NULL));
  CK(cuCtxSynchronize());
  note("stack_kernel", CUDA_SUCCESS);
  size_t v = 0;
  cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE);
  printf("RESULT stack_now=%zu\n", v);
  note("stack_default", cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024));
  note("heap_default_after_launch", cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * MiB));
  CK(cuMemFree(ok));
  CK(cuModuleUnload(m));
  return 0;
}

static int do_module(const char *cubin) {
  long long before = nvml_self_used(g_dev);
  CUmodule m = load_kernels(cubin);
  note("module_loaded", CUDA_SUCCESS);
  long long loaded = nvml_self_used(g_dev);
  CUfunction f;
  CK(cuModuleGetFunction(&f, m, "touch_global"));
  CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, NULL, NULL));
  CK(cuCtxSynchronize());
  note("module_kernel_ran", CUDA_SUCCESS);
  long long ran = nvml_self_used(g_dev);
  CUdeviceptr p;
  CUresult rc = cuMemAlloc(&p, SPARE_MIB * MiB); /* fits only if the module's memory is not counted */
  note("alloc_spare_after_module", rc);
  if (rc == CUDA_SUCCESS) CK(cuMemFree(p));
  printf("RESULT module_after_load=%lld module_after_kernel=%lld\n", loaded - before, ran - before);
  CK(cuModuleUnload(m));
  return 0;
}

static int do_control(size_t size) {
  CUdeviceptr p[256];
  int n = 0;
  CUresult rc;
  while (n < 256 && (rc = cuMemAlloc(&p[n], size)) == CUDA_SUCCESS) {
    CK(cuMemsetD8(p[n], 1, size));
    n++;
  }
  note("alloc_until_refused", rc);
  settled();
  printf("RESULT got=%d\n", n);
  for (int i = 0; i < n; i++) CK(cuMemFree(p[i]));
  return n;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  const char *mode = argv[1];
  CK(cuInit(0));
  CK(cuDeviceGet(&g_dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, g_dev));
  CK(cuCtxSetCurrent(ctx));
  CUdeviceptr warm; /* let lazy runtime state settle before the baseline */
  CK(cuMemAlloc(&warm, 2 * MiB));
  CK(cuMemFree(warm));
  long long base = settled();
  unsigned long long tbase = tracked_self(0);
  g_max = base;
  pthread_t t;
  pthread_create(&t, NULL, sampler, NULL);
  const char *cubin = getenv("MEM_PATTERNS_CUBIN");
  if (!strcmp(mode, "vmm")) do_vmm(atoi(argv[2]), (size_t)atoll(argv[3]) * MiB);
  else if (!strcmp(mode, "retain")) do_retain((size_t)atoll(argv[2]) * MiB);
  else if (!strcmp(mode, "share")) do_share((size_t)atoll(argv[2]) * MiB);
  else if (!strcmp(mode, "graph")) do_graph(atoi(argv[2]), (size_t)atoll(argv[3]) * MiB);
  else if (!strcmp(mode, "heap")) do_heap((size_t)atoll(argv[2]) * MiB, cubin);
  else if (!strcmp(mode, "module")) do_module(cubin);
  else if (!strcmp(mode, "control")) do_control((size_t)atoll(argv[2]) * MiB);
  else return 2;
  long long after = settled();
  g_stop = 1;
  pthread_join(t, NULL);
  printf("RESULT mode=%s base=%lld max=%lld after=%lld oom=%d tracked_base=%llu tracked_after=%llu\n", mode, base,
         (long long)g_max, after, g_oom, tbase, tracked_self(0));
  return 0;
}

/*
 * routes_probe.c — the routes around the limits of issue 35 on a real GPU, one per run (run by
 * routes_probe.sh with and without libvgpu). `routes_probe <route> <cubin>`. Prints one line:
 *   RESULT route=<r> ok=<successes> refused=<first error> held=<NVML bytes of this process>
 *          tracked=<libvgpu's count for the container> [rate=<kernels/s>]
 * Memory routes try to take ~9 GiB (past a 4 GiB limit); SM routes run a spinning kernel for 3 s.
 * arrays, managed_pool, child and hold3g (routes 5, 6, 13, 12) were added by the second pass on
 * issue 35; routes_probe.sh runs a subset with ROUTES_ONLY="...". Routes 9, 10, 11, 14, 17, 20 and
 * 21 are in routes_probe_more.inc.
 */
#define _GNU_SOURCE /* dl_iterate_phdr (routes_probe_more.inc) */
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* the pre-4.0 launch API on purpose */

#include "gpu_common.h"

#undef cuGraphInstantiate
typedef CUresult (*inst_v1)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);

static CUdevice g_dev;
static CUcontext g_ctx;
static void *g_image;

static void *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    exit(2);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) exit(2);
  fclose(f);
  return b;
}

static void report(const char *route, int ok, CUresult refused, double rate) {
  CK(cuCtxSetCurrent(g_ctx));
  CK(cuCtxSynchronize());
  printf("RESULT route=%s ok=%d refused=%d held=%lld tracked=%llu rate=%.1f\n", route, ok, (int)refused,
         nvml_self_used(g_dev), tracked_all(0), rate);
  fflush(stdout);
}

static CUmemoryPool make_pool(void) {
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = g_dev;
  CUmemoryPool p = NULL;
  CUresult rc = cuMemPoolCreate(&p, &props);
  return rc == CUDA_SUCCESS ? p : NULL;
}

/* Saturating launch loop for `secs`: returns kernels per second (all completed at the end). */
typedef CUresult (*launcher)(CUstream s);
static CUfunction g_spin;
static CUkernel g_spin_kernel;
static long long g_cycles = 200000; /* ~0.1 ms at 1.98 GHz */
static CUresult launch_func(CUstream s) {
  void *args[] = {&g_cycles};
  return cuLaunchKernel(g_spin, 528, 1, 1, 256, 1, 1, 0, s, args, NULL);
}
static CUresult launch_kernel_noctx(CUstream s) {
  void *args[] = {&g_cycles};
  return cuLaunchKernel((CUfunction)g_spin_kernel, 528, 1, 1, 256, 1, 1, 0, s, args, NULL);
}
static CUresult launch_legacy(CUstream s) { return cuLaunchGridAsync(g_spin, 528, 1, s); }
static CUdeviceptr g_buf;
static CUresult launch_memset(CUstream s) { return cuMemsetD32Async(g_buf, 0, (256 * MiB) / 4, s); }

static double loop(launcher l, CUstream s, CUcontext cur, double secs) {
  CUevent ev[16];
  CK(cuCtxSetCurrent(g_ctx));
  for (int i = 0; i < 16; i++) CK(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
  CK(cuCtxSetCurrent(cur));
  long n = 0, b = 0;
  double t0 = now_s();
  while (now_s() - t0 < secs) {
    if (b >= 16) CK(cuEventSynchronize(ev[b % 16]));
    for (int i = 0; i < 8; i++) {
      CK(l(s));
      n++;
    }
    CK(cuCtxPushCurrent(g_ctx));
    CK(cuEventRecord(ev[b % 16], s));
    CUcontext popped;
    CK(cuCtxPopCurrent(&popped));
    b++;
  }
  CK(cuCtxSetCurrent(g_ctx));
  CK(cuStreamSynchronize(s));
  return (double)n / (now_s() - t0);
}

#include "routes_probe_more.inc" /* routes 9, 10, 11, 14, 17, 20, 21 */

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  const char *route = argv[1];
  CK(cuInit(0));
  CK(cuDeviceGet(&g_dev, 0));
  CK(cuDevicePrimaryCtxRetain(&g_ctx, g_dev));
  CK(cuCtxSetCurrent(g_ctx));
  g_image = read_file(argv[2]);
  if (more_routes(route, argv[2])) return 0; /* routes_probe_more.inc (some are sm_ routes) */
  CUresult rc = CUDA_SUCCESS;
  int ok = 0;
  if (strcmp(route, "granularity") == 0) { /* item 1 */
    CUdeviceptr p;
    while (ok < 4000 && (rc = cuMemAlloc(&p, 2 * MiB + 4096)) == CUDA_SUCCESS) ok++;
    report(route, ok, rc, 0);
  } else if (strcmp(route, "small") == 0) { /* what small allocations hold (no fix claimed) */
    CUdeviceptr p;
    while (ok < 100000 && (rc = cuMemAlloc(&p, 64 * 1024 + 4)) == CUDA_SUCCESS) ok++;
    report(route, ok, rc, 0);
  } else if (strcmp(route, "pools") == 0) { /* item 3: 300 pools, then 32 MiB from each, last first */
    static CUmemoryPool pools[300];
    int made = 0;
    while (made < 300 && (pools[made] = make_pool()) != NULL) made++;
    for (int i = made - 1; i >= 0; i--) {
      CUdeviceptr p;
      if ((rc = cuMemAllocFromPoolAsync(&p, 32 * MiB, pools[i], 0)) != CUDA_SUCCESS) break;
      ok++;
    }
    report(route, ok, rc, 0);
  } else if (strcmp(route, "async_noctx") == 0) { /* item 4 */
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuCtxSetCurrent(NULL));
    CUdeviceptr p;
    while (ok < 200 && (rc = cuMemAllocAsync(&p, 64 * MiB, s)) == CUDA_SUCCESS) ok++;
    CK(cuCtxSetCurrent(g_ctx));
    CK(cuStreamSynchronize(s));
    report(route, ok, rc, 0);
  } else if (strcmp(route, "graph_v1") == 0) { /* item 8 */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    inst_v1 inst = h ? (inst_v1)dlsym(h, "cuGraphInstantiate") : NULL;
    if (!inst) {
      printf("RESULT route=%s skipped=no_cuGraphInstantiate\n", route);
      return 0;
    }
    for (int i = 0; i < 4; i++) {
      CUgraph g;
      CK(cuGraphCreate(&g, 0));
      CUDA_MEM_ALLOC_NODE_PARAMS prm;
      memset(&prm, 0, sizeof prm);
      prm.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      prm.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prm.poolProps.location.id = g_dev;
      prm.bytesize = 2048 * MiB;
      CUgraphNode node;
      CK(cuGraphAddMemAllocNode(&node, g, NULL, 0, &prm));
      CUgraphExec x;
      if ((rc = inst(&x, g, NULL, NULL, 0)) != CUDA_SUCCESS) break;
      if ((rc = cuGraphLaunch(x, 0)) != CUDA_SUCCESS) break;
      CK(cuStreamSynchronize(0));
      ok++;
    }
    report(route, ok, rc, 0);
  } else if (strcmp(route, "module") == 0) { /* item 7: 512 MiB of globals per load */
    CUmodule m;
    while (ok < 20 && (rc = cuModuleLoadData(&m, g_image)) == CUDA_SUCCESS) {
      CUfunction f;
      CK(cuModuleGetFunction(&f, m, "touch_big"));
      int n = ok;
      void *args[] = {&n};
      CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, args, NULL));
      CK(cuCtxSynchronize());
      ok++;
    }
    report(route, ok, rc, 0);
  } else if (strcmp(route, "lmem") == 0) { /* item 2 */
    CUmodule m;
    CK(cuModuleLoadData(&m, g_image));
    CUfunction f;
    CK(cuModuleGetFunction(&f, m, "lmem32k"));
    int n = 3;
    void *out = NULL;
    void *args[] = {&out, &n};
    rc = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, args, NULL);
    if (rc == CUDA_SUCCESS) {
      ok = 1;
      rc = cuCtxSynchronize();
    }
    report(route, ok, rc, 0);
  } else if (strcmp(route, "arrays") == 0) { /* item 5: small layered arrays (4 KiB of texels) */
    CUDA_ARRAY3D_DESCRIPTOR d;
    memset(&d, 0, sizeof d);
    d.Width = 16;
    d.Height = 16;
    d.Depth = 4;
    d.Format = CU_AD_FORMAT_FLOAT;
    d.NumChannels = 1;
    d.Flags = CUDA_ARRAY3D_LAYERED;
    CUDA_ARRAY3D_DESCRIPTOR t = d; /* the driver's layout of the shape (holds no memory) */
    t.Flags |= CUDA_ARRAY3D_DEFERRED_MAPPING;
    CUDA_ARRAY_MEMORY_REQUIREMENTS req;
    memset(&req, 0, sizeof req);
    CUarray tw;
    if (cuArray3DCreate(&tw, &t) == CUDA_SUCCESS) {
      cuArrayGetMemoryRequirements(&req, tw, g_dev);
      cuArrayDestroy(tw);
    }
    fprintf(stderr, "arrays: deferred twin requirement size=%zu alignment=%zu\n", req.size, req.alignment);
    CUarray a;
    while (ok < 70000 && (rc = cuArray3DCreate(&a, &d)) == CUDA_SUCCESS) ok++;
    printf("INFO route=arrays req_size=%zu req_align=%zu\n", req.size, req.alignment);
    report(route, ok, rc, 0);
  } else if (strcmp(route, "managed_pool") == 0) { /* item 6: 256 MiB blocks, prefetched to the GPU */
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_MANAGED;
    props.location.type = CU_MEM_LOCATION_TYPE_NONE;
    CUmemoryPool pool;
    if ((rc = cuMemPoolCreate(&pool, &props)) != CUDA_SUCCESS) {
      printf("RESULT route=%s skipped=managed_pool_create_%d\n", route, (int)rc);
      return 0;
    }
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = g_dev};
    while (ok < 36) {
      CUdeviceptr p;
      if ((rc = cuMemAllocFromPoolAsync(&p, 256 * MiB, pool, s)) != CUDA_SUCCESS) break;
      if ((rc = cuMemPrefetchAsync(p, 256 * MiB, loc, 0, s)) != CUDA_SUCCESS) break;
      CK(cuStreamSynchronize(s));
      ok++;
    }
    report(route, ok, rc, 0);
  } else if (strcmp(route, "child_alloc") == 0) { /* item 13's child: runs without libvgpu */
    CUdeviceptr p;
    int got = 0;
    while (got < 6 && cuMemAlloc(&p, 1024 * MiB) == CUDA_SUCCESS) got++;
    CK(cuCtxSynchronize());
    char ch = 'r';
    if (write(atoi(getenv("PROBE_READY_FD")), &ch, 1) != 1) return 3;
    sleep(30); /* held until the parent kills it */
    return 0;
  } else if (strcmp(route, "child") == 0) { /* item 13: a child exec'd without LD_PRELOAD takes 6 GiB */
    int pfd[2];
    if (pipe(pfd) != 0) return 3;
    fflush(NULL);
    pid_t c = fork();
    if (c == 0) {
      unsetenv("LD_PRELOAD");
      char fd[16];
      snprintf(fd, sizeof fd, "%d", pfd[1]);
      setenv("PROBE_READY_FD", fd, 1);
      execl("/proc/self/exe", "routes_probe", "child_alloc", argv[2], (char *)NULL);
      _exit(127);
    }
    char ch;
    if (read(pfd[0], &ch, 1) != 1) return 3;
    usleep(1200 * 1000); /* the library's periodic reconciliation */
    CUdeviceptr p;
    while (ok < 16 && (rc = cuMemAlloc(&p, 64 * MiB)) == CUDA_SUCCESS) ok++;
    long long child_held = nvml_pid_used(g_dev, (unsigned)c);
    CK(cuCtxSynchronize());
    printf("RESULT route=%s ok=%d refused=%d held=%lld tracked=%llu child_held=%lld rate=0\n", route, ok, (int)rc,
           nvml_self_used(g_dev) + (child_held > 0 ? child_held : 0), tracked_all(0), child_held);
    fflush(stdout);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
  } else if (strcmp(route, "hold3g") == 0) { /* item 12: one of three processes, 3 x 1 GiB, held 5 s */
    CUdeviceptr p;
    while (ok < 3 && (rc = cuMemAlloc(&p, 1024 * MiB)) == CUDA_SUCCESS) ok++;
    CK(cuCtxSynchronize());
    sleep(5);
    report(route, ok, rc, 0);
  } else if (strncmp(route, "sm_", 3) == 0) { /* items 15, 16, 18 */
    CUmodule m;
    CK(cuModuleLoadData(&m, g_image));
    CK(cuModuleGetFunction(&g_spin, m, "spin"));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    double rate = 0;
    if (strcmp(route, "sm_plain") == 0) {
      rate = loop(launch_func, s, g_ctx, 3.0);
    } else if (strcmp(route, "sm_noctx") == 0) {
      CUlibrary lib;
      CK(cuLibraryLoadData(&lib, g_image, NULL, NULL, 0, NULL, NULL, 0));
      CK(cuLibraryGetKernel(&g_spin_kernel, lib, "spin"));
      rate = loop(launch_kernel_noctx, s, NULL, 3.0);
    } else if (strcmp(route, "sm_legacy") == 0) {
      CK(cuFuncSetBlockShape(g_spin, 256, 1, 1));
      CK(cuParamSetSize(g_spin, 8));
      CK(cuParamSetv(g_spin, 0, &g_cycles, 8));
      rate = loop(launch_legacy, s, g_ctx, 3.0);
    } else if (strcmp(route, "sm_memset") == 0) { /* item 19: 256 MiB memsets back to back */
      CK(cuMemAlloc(&g_buf, 256 * MiB));
      rate = loop(launch_memset, s, g_ctx, 3.0);
    } else if (strcmp(route, "sm_otherctx") == 0) {
      CUlibrary lib;
      CK(cuLibraryLoadData(&lib, g_image, NULL, NULL, 0, NULL, NULL, 0));
      CK(cuLibraryGetKernel(&g_spin_kernel, lib, "spin"));
      CUcontext other;
      CK(cuCtxCreate(&other, NULL, 0, g_dev)); /* the stream is g_ctx's, `other` is current */
      rate = loop(launch_kernel_noctx, s, other, 3.0);
    }
    report(route, 1, CUDA_SUCCESS, rate);
  } else {
    fprintf(stderr, "unknown route %s\n", route);
    return 2;
  }
  return 0;
}

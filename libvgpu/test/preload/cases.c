/*
 * cases.c — libvgpu behaviour under LD_PRELOAD against the fake driver (test/fake/fake_cuda.c).
 * One program, one case per argument: `cases <name>`; exit 0 = pass. test/run_preload.sh sets the
 * environment (limit, cache file, fake devices) per case and runs each with and without checks of
 * its stderr. Every case asserts on what the application sees AND on the region bytes that other
 * readers (HAMi's monitor, our exporter) see. This program: memory limits, contexts, launches,
 * devices, NVML and the environment contract; the other topics are cases_procs.c and
 * cases_symbols.c (cases.h).
 */
#include "cases.h"

extern CUdeviceptr vgpu_ctor_ptr; /* libctor.so */
extern int vgpu_ctor_rc;

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
  CUmemoryPool pool = make_pool();
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

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      {"limit", case_limit},
      {"double_free", case_double_free},
      {"pitch_managed", case_pitch_managed},
      {"vmm", case_vmm},
      {"arrays", case_arrays},
      {"pools", case_pools},
      {"contexts", case_contexts},
      {"launch", case_launch},
      {"no_gpu_use", case_no_gpu_use},
      {"cvd_reorder", case_cvd_reorder},
      {"cvd_uuid", case_cvd_uuid},
      {"nvml", case_nvml},
      {"nvml_only", case_nvml_only},
      {"unlimited", case_unlimited},
      {"oom_log", case_oom_log},
      {"disabled", case_disabled},
      {"context_floor", case_context_floor},
      {"failsafe", case_failsafe},
      {"runtime_limit", case_runtime_limit},
      {"ctor", case_ctor},
  };
  return run_case(argc, argv, cases, sizeof cases / sizeof cases[0]);
}

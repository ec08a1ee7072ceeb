/*
 * mem_driver.c — driver-API memory checks under libvgpu on a real GPU (run by run_memory_tests.sh).
 *
 *   mem_driver oom <chunk_mib> [hold_s]  allocate chunks until OOM, print how far it got, hold
 *   mem_driver kinds                     every counted allocation kind, tracked vs NVML each step
 *   mem_driver info                      cuMemGetInfo / cuDeviceTotalMem as the app sees them
 * Output: "RESULT key=value ..." lines the script parses.
 */
#include "gpu_common.h"

static CUcontext setup(CUdevice *dev) {
  CK(cuInit(0));
  CK(cuDeviceGet(dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, *dev));
  CK(cuCtxSetCurrent(ctx));
  return ctx;
}

/* VGPU_TEST_BARRIER=<prefix>: announce "<prefix>.<pid>" once the context exists, then wait for
 * "<prefix>.go" so several processes start allocating together. */
static void barrier(void) {
  const char *b = getenv("VGPU_TEST_BARRIER");
  if (!b) return;
  char path[4096];
  snprintf(path, sizeof path, "%s.%d", b, (int)getpid());
  FILE *f = fopen(path, "w");
  if (f) fclose(f);
  snprintf(path, sizeof path, "%s.go", b);
  for (int i = 0; i < 6000 && access(path, F_OK) != 0; i++) usleep(10000);
}

static int do_oom(size_t chunk, int hold) {
  CUdevice dev;
  setup(&dev);
  long long ctx_nvml = nvml_self_used(dev);
  barrier();
  size_t n = 0;
  CUdeviceptr p;
  CUresult rc;
  while ((rc = cuMemAlloc(&p, chunk)) == CUDA_SUCCESS) n++;
  size_t f = 0, t = 0;
  CK(cuMemGetInfo(&f, &t));
  printf("RESULT mode=oom chunk=%zu allocated=%zu last_rc=%d tracked_self=%llu tracked_all=%llu "
         "nvml_self=%lld ctx_nvml=%lld meminfo_total=%zu meminfo_free=%zu\n",
         chunk, n * chunk, (int)rc, tracked_self(0), tracked_all(0), nvml_self_used(dev), ctx_nvml, t, f);
  fflush(stdout);
  if (hold > 0) sleep((unsigned)hold);
  return 0;
}

static void step(const char *what, CUdevice dev) {
  CK(cuCtxSynchronize());
  printf("RESULT mode=kinds step=%s tracked_self=%llu nvml_self=%lld\n", what, tracked_self(0),
         nvml_self_used(dev));
  fflush(stdout);
}

static int do_kinds(void) {
  CUdevice dev;
  CUcontext primary = setup(&dev);
  step("context", dev);
  CUdeviceptr a;
  CK(cuMemAlloc(&a, 256 * MiB));
  step("cuMemAlloc_256MiB", dev);
  CUdeviceptr pp;
  size_t pitch;
  CK(cuMemAllocPitch(&pp, &pitch, 10000, 4096, 4));
  step("cuMemAllocPitch_10000x4096", dev);
  CUdeviceptr m;
  CK(cuMemAllocManaged(&m, 128 * MiB, CU_MEM_ATTACH_GLOBAL));
  CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
  cuMemPrefetchAsync(m, 128 * MiB, loc, 0, 0); /* make it resident so NVML sees it */
  step("cuMemAllocManaged_128MiB", dev);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemGenericAllocationHandle h;
  CK(cuMemCreate(&h, 64 * gran, &prop, 0));
  step("cuMemCreate_64_granules", dev);
  CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = 2048, .Height = 2048, .Depth = 8, .Format = CU_AD_FORMAT_FLOAT,
                                .NumChannels = 4};
  CUarray arr;
  CK(cuArray3DCreate(&arr, &d3));
  step("cuArray3DCreate_2048x2048x8_float4", dev);
  CUmipmappedArray mip;
  CUDA_ARRAY3D_DESCRIPTOR dm = {.Width = 4096, .Height = 4096, .Format = CU_AD_FORMAT_UNSIGNED_INT8,
                                .NumChannels = 4};
  CK(cuMipmappedArrayCreate(&mip, &dm, 6));
  step("cuMipmappedArrayCreate_4096_6levels", dev);
  CUmemoryPool pool;
  CK(cuDeviceGetMemPool(&pool, dev));
  CUdeviceptr ap;
  CK(cuMemAllocFromPoolAsync(&ap, 192 * MiB, pool, 0));
  step("cuMemAllocFromPoolAsync_192MiB", dev);
  CUdeviceptr aa;
  CK(cuMemAllocAsync(&aa, 64 * MiB, 0));
  step("cuMemAllocAsync_64MiB", dev);
  CUcontext second;
  CK(cuCtxCreate(&second, NULL, 0, dev));
  CUdeviceptr b;
  CK(cuMemAlloc(&b, 96 * MiB));
  step("second_context_plus_96MiB", dev);
  CK(cuMemFree(b));
  CK(cuCtxDestroy(second));
  CK(cuCtxSetCurrent(primary));
  step("second_context_destroyed", dev);
  CK(cuMemFree(a));
  CK(cuMemFree(pp));
  CK(cuMemFree(m));
  CK(cuMemRelease(h));
  CK(cuArrayDestroy(arr));
  CK(cuMipmappedArrayDestroy(mip));
  CK(cuMemFreeAsync(ap, 0));
  CK(cuMemFreeAsync(aa, 0));
  CK(cuStreamSynchronize(0));
  CK(cuMemPoolTrimTo(pool, 0));
  step("all_freed", dev);
  return 0;
}

static int do_info(void) {
  CUdevice dev;
  setup(&dev);
  size_t f = 0, t = 0, tm = 0;
  CK(cuMemGetInfo(&f, &t));
  CK(cuDeviceTotalMem(&tm, dev));
  printf("RESULT mode=info meminfo_total=%zu meminfo_free=%zu device_total=%zu\n", t, f, tm);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "oom") == 0)
    return do_oom((size_t)atoll(argv[2]) * MiB, argc >= 4 ? atoi(argv[3]) : 0);
  if (argc == 2 && strcmp(argv[1], "kinds") == 0) return do_kinds();
  if (argc == 2 && strcmp(argv[1], "info") == 0) return do_info();
  fprintf(stderr, "usage: %s oom <chunk_mib> [hold_s] | kinds | info\n", argv[0]);
  return 2;
}

/*
 * pool_probe.c — how a stream-ordered pool really grows, on a real GPU (run by
 * run_memory_tests.sh; also usable alone, with or without libvgpu preloaded).
 *
 *   pool_probe steps       for the device's default pool and an explicit pool: the growth of
 *                          CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT caused by one request of each size
 *                          from an empty pool, a growing sequence in one pool, what a free keeps
 *                          before/after a synchronize, what cuMemPoolTrimTo releases without and
 *                          with a synchronize, the release threshold's effect, NVML alongside
 *   pool_probe oom <chunk_mib> default|explicit [threshold_max]
 *                          stream-ordered allocation until OOM; prints the container's tracked
 *                          bytes at the end and the largest value seen after any step
 *   pool_probe undo        (under libvgpu) fills the limit to 40 MiB below it, then makes the pool
 *                          grow where its free space looked usable: a block freed on a stream that
 *                          is still busy (a host function sleeps on it) is not reusable from another
 *                          stream, so a request libvgpu expects to fit grows the pool by a step
 *                          that does not fit the limit; libvgpu must undo it and refuse
 * Output: "RESULT key=value ..." lines.
 */
#include <stdint.h>

#include "gpu_common.h"

static uint64_t attr(CUmemoryPool p, CUmemPool_attribute a) {
  cuuint64_t v = 0;
  CK(cuMemPoolGetAttribute(p, a, &v));
  return (uint64_t)v;
}
static uint64_t reserved(CUmemoryPool p) { return attr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT); }

static CUmemoryPool make_pool(CUdevice dev) {
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = dev;
  CUmemoryPool p;
  CK(cuMemPoolCreate(&p, &props));
  return p;
}

static void empty(CUmemoryPool p) {
  CK(cuStreamSynchronize(0));
  CK(cuMemPoolTrimTo(p, 0));
}

static int do_steps(void) {
  CUdevice dev;
  CUcontext ctx;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  printf("RESULT probe=start tracked_self=%llu nvml_self=%lld\n", tracked_self(0), nvml_self_used(dev));
  CUmemoryPool def, mine = make_pool(dev);
  CK(cuDeviceGetMemPool(&def, dev));
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gmin = 0, grec = 0;
  CK(cuMemGetAllocationGranularity(&gmin, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CK(cuMemGetAllocationGranularity(&grec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  printf("RESULT probe=granularity min=%zu recommended=%zu default_threshold=%llu explicit_threshold=%llu\n",
         gmin, grec, (unsigned long long)attr(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD),
         (unsigned long long)attr(mine, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD));
  static const size_t sizes[] = {1,          4096,        512 << 10,      2 << 20,   (2 << 20) + 1,
                                 3 << 20,    16 << 20,    31 << 20,       32 << 20,  (32 << 20) + 1,
                                 33 << 20,   63 << 20,    64 << 20,       65 << 20,  100 << 20,
                                 256 << 20,  (256 << 20) + 1, 1000ull << 20, 1ull << 30};
  CUmemoryPool pools[2] = {def, mine};
  const char *names[2] = {"default", "explicit"};
  for (int k = 0; k < 2; k++) {
    CUmemoryPool p = pools[k];
    /* One request from an empty pool. */
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      empty(p);
      uint64_t r0 = reserved(p);
      long long n0 = nvml_self_used(dev);
      CUdeviceptr d;
      CK(cuMemAllocFromPoolAsync(&d, sizes[i], p, 0));
      CK(cuStreamSynchronize(0));
      uint64_t r1 = reserved(p);
      long long n1 = nvml_self_used(dev);
      printf("RESULT probe=single pool=%s request=%zu growth=%llu nvml_growth=%lld tracked_self=%llu\n",
             names[k], sizes[i], (unsigned long long)(r1 - r0), n1 - n0, tracked_self(0));
      CK(cuMemFreeAsync(d, 0));
    }
    /* A sequence in one pool (headroom reuse, fragmentation). */
    empty(p);
    static const size_t seq[] = {1 << 20, 1 << 20, 3 << 20, 30 << 20, 10 << 20, 64 << 20, 1 << 20, 100 << 20};
    CUdeviceptr held[8];
    for (size_t i = 0; i < 8; i++) {
      uint64_t r0 = reserved(p);
      CK(cuMemAllocFromPoolAsync(&held[i], seq[i], p, 0));
      uint64_t r1 = reserved(p);
      printf("RESULT probe=seq pool=%s i=%zu request=%zu growth=%llu reserved=%llu used=%llu tracked_self=%llu\n",
             names[k], i, seq[i], (unsigned long long)(r1 - r0), (unsigned long long)r1,
             (unsigned long long)attr(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), tracked_self(0));
    }
    for (int i = 0; i < 8; i++) CK(cuMemFreeAsync(held[i], 0));
    uint64_t after_free = reserved(p);
    CK(cuMemPoolTrimTo(p, 0));
    uint64_t trim_nosync = reserved(p);
    CK(cuStreamSynchronize(0));
    uint64_t after_sync = reserved(p);
    CK(cuMemPoolTrimTo(p, 0));
    printf("RESULT probe=release pool=%s after_free=%llu trim_before_sync=%llu after_sync=%llu "
           "after_sync_trim=%llu tracked_self=%llu\n",
           names[k], (unsigned long long)after_free, (unsigned long long)trim_nosync,
           (unsigned long long)after_sync, (unsigned long long)reserved(p), tracked_self(0));
    /* Release threshold: the pool keeps up to it across synchronizations. */
    cuuint64_t thr = 256ull << 20;
    CK(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
    CUdeviceptr a, b;
    CK(cuMemAllocFromPoolAsync(&a, 200 << 20, p, 0));
    CK(cuMemAllocFromPoolAsync(&b, 200 << 20, p, 0));
    CK(cuMemFreeAsync(a, 0));
    CK(cuMemFreeAsync(b, 0));
    CK(cuStreamSynchronize(0));
    uint64_t kept = reserved(p);
    long long nv = nvml_self_used(dev);
    CK(cuMemPoolTrimTo(p, 0));
    printf("RESULT probe=threshold pool=%s threshold=%llu kept_after_sync=%llu after_trim=%llu nvml_self=%lld "
           "tracked_self=%llu\n",
           names[k], (unsigned long long)thr, (unsigned long long)kept, (unsigned long long)reserved(p), nv,
           tracked_self(0));
    thr = 0;
    CK(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
  }
  CK(cuMemPoolDestroy(mine));
  return 0;
}

/* Allocate until OOM; the container's count is sampled after every step, so an overshoot that a
 * later settle would hide is seen too. */
static int do_oom(size_t chunk, int explicit_pool, int threshold_max) {
  CUdevice dev;
  CUcontext ctx;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUmemoryPool p;
  if (explicit_pool) p = make_pool(dev);
  else CK(cuDeviceGetMemPool(&p, dev));
  if (threshold_max) {
    cuuint64_t thr = UINT64_MAX;
    CK(cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
  }
  unsigned long long max_tracked = tracked_all(0);
  size_t n = 0;
  CUresult rc;
  CUdeviceptr d;
  for (;;) {
    rc = explicit_pool ? cuMemAllocFromPoolAsync(&d, chunk, p, 0) : cuMemAllocAsync(&d, chunk, 0);
    unsigned long long t = tracked_all(0);
    if (t > max_tracked) max_tracked = t;
    if (rc != CUDA_SUCCESS) break;
    n++;
  }
  CK(cuStreamSynchronize(0));
  long long nv = nvml_self_used(dev);
  size_t f = 0, tot = 0;
  CK(cuMemGetInfo(&f, &tot));
  printf("RESULT mode=pool_oom pool=%s chunk=%zu allocated=%zu last_rc=%d tracked_all=%llu max_tracked=%llu "
         "pool_reserved=%llu nvml_self=%lld meminfo_total=%zu\n",
         explicit_pool ? "explicit" : "default", chunk, n * chunk, (int)rc, tracked_all(0), max_tracked,
         (unsigned long long)reserved(p), nv, tot);
  return 0;
}

static void CUDA_CB sleeper(void *arg) {
  (void)arg;
  usleep(500000);
}

static int do_undo(void) {
  CUdevice dev;
  CUcontext ctx;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUmemoryPool p;
  CK(cuDeviceGetMemPool(&p, dev));
  CUstream s1, s2;
  CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  size_t f = 0, t = 0;
  CK(cuMemGetInfo(&f, &t));
  CUdeviceptr filler, a, b = 0;
  CK(cuMemAlloc(&filler, f - 40 * MiB)); /* 40 MiB left: one 32 MiB step fits, two do not */
  CK(cuMemAllocAsync(&a, 20 * MiB, s1));
  CK(cuStreamSynchronize(s1));
  uint64_t r0 = reserved(p);
  CK(cuLaunchHostFunc(s1, sleeper, NULL)); /* s1 busy: a's free completes only after 0.5 s */
  CK(cuMemFreeAsync(a, s1));
  CUresult rc = cuMemAllocAsync(&b, 24 * MiB, s2);
  unsigned long long right_after = tracked_all(0);
  uint64_t r1 = reserved(p);
  CK(cuCtxSynchronize());
  long long nv = nvml_self_used(dev);
  printf("RESULT mode=pool_undo rc=%d reserved_before=%llu reserved_after=%llu tracked_right_after=%llu "
         "tracked_all=%llu nvml_self=%lld limit=%zu b=%llu\n",
         (int)rc, (unsigned long long)r0, (unsigned long long)r1, right_after, tracked_all(0), nv, t,
         (unsigned long long)b);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "undo") == 0) return do_undo();
  if (argc == 2 && strcmp(argv[1], "steps") == 0) return do_steps();
  if (argc >= 4 && strcmp(argv[1], "oom") == 0)
    return do_oom((size_t)atoll(argv[2]) * MiB, strcmp(argv[3], "explicit") == 0, argc >= 5 && atoi(argv[4]));
  fprintf(stderr, "usage: %s steps | oom <chunk_mib> default|explicit [threshold_max] | undo\n", argv[0]);
  return 2;
}

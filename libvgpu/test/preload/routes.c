/*
 * routes.c — the routes around the limits of issue 35 (libvgpu/README.md "Routes around the
 * limits"), each under LD_PRELOAD against the fake driver, which models the driver rule the route
 * relies on (test/fake/fake_cuda_routes.inc). `routes <case>`; exit 0 = pass. Every case failed
 * on the library before its fix.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>

#include "check.h"

size_t fakeCudaDeviceUsed(int ordinal);

/* The count equals what the fake device physically holds. */
#define CHECK_EXACT(bytes)                                                                         \
  do {                                                                                             \
    CHECK_EQ_U(test_used(0), (bytes));                                                             \
    CHECK_EQ_U(fakeCudaDeviceUsed(0), (bytes));                                                    \
  } while (0)
#define CHECK_COUNTED() CHECK_EQ_U(test_used(0), fakeCudaDeviceUsed(0))

static CUcontext setup(void) {
  CHECK(cuInit(0) == CUDA_SUCCESS);
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
  return ctx;
}

static CUmemoryPool make_pool(void) {
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool;
  CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
  return pool;
}

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

static const struct {
  const char *name;
  int (*fn)(void);
} cases[] = {
    {"pools_many", case_pools_many},
    {"async_no_ctx", case_async_no_ctx},
};

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (strcmp(cases[i].name, argv[1]) == 0) return cases[i].fn();
  fprintf(stderr, "unknown case %s\n", argv[1]);
  return 2;
}

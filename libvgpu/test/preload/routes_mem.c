/*
 * routes_mem.c — more routes around the memory limit of issue 35 (libvgpu/README.md "Routes
 * around the limits"), each under LD_PRELOAD against the fake driver, which models the driver rule
 * the route relies on (test/fake/fake_cuda_routes.inc). `routes_mem <case>`; exit 0 = pass. Every
 * case failed on the library before its fix.
 */
#include <cuda.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>

#include "cases.h"

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Rewrites the fake NVML's view: `others` unrelated processes of the node listed first (NVML lists
 * the whole device), then `pid` with `used` bytes, then `extra_pid` (when > 0) with `extra`. */
static void nvml_write(int others, int pid, unsigned long long used, int extra_pid, unsigned long long extra) {
  const char *path = getenv("FAKE_NVML_CONFIG");
  CHECK(path != NULL);
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  CHECK(f != NULL);
  fprintf(f, "device 0 uuid=GPU-00000000-0000-0000-0000-000000000000 name=Fake total=85899345920 used=0\n");
  for (int i = 0; i < others; i++) fprintf(f, "process 0 pid=%d used=1048576\n", 3000000 + i);
  fprintf(f, "process 0 pid=%d used=%llu\n", pid, used);
  if (extra_pid > 0) fprintf(f, "process 0 pid=%d used=%llu\n", extra_pid, extra);
  CHECK(fclose(f) == 0);
  CHECK(rename(tmp, path) == 0);
}

/* Index of this process's slot in the region. */
static int my_slot(void) {
  const vgpu_region_t *r = test_region();
  CHECK(r != NULL);
  for (int i = 0; i < r->proc_num && i < VGPU_MAX_PROCS; i++)
    if (r->procs[i].pid == getpid() && r->procs[i].status != 0) return i;
  CHECK(!"no slot");
  return -1;
}

/* What the node exporter (or HAMi's monitor) does for a process in a pid namespace: writes the
 * host pid into its slot. */
static void write_slot_hostpid(int32_t hostpid) {
  int fd = open(getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE"), O_WRONLY);
  CHECK(fd >= 0);
  off_t off = (off_t)offsetof(vgpu_region_t, procs) + (off_t)my_slot() * (off_t)sizeof(vgpu_proc_slot_t) +
              (off_t)offsetof(vgpu_proc_slot_t, hostpid);
  CHECK(pwrite(fd, &hostpid, sizeof hostpid, off) == (ssize_t)sizeof hostpid);
  CHECK(close(fd) == 0);
}

/* Item 9 (the rest) and the reconciliation: memory taken around every hook (a raw libcuda symbol)
 * shows in NVML; once reconciled, further allocations and module loads are REFUSED while the
 * container is over its limit, and allowed again when NVML shows the memory gone. `others`
 * processes of the node are listed before ours; `hostpid`: NVML lists us by the host pid the node
 * exporter wrote into our slot (a pid namespace), not by our own. Limit 64 MiB. (Before: with more
 * than 64 processes on the device, or in a pid namespace, nothing was reconciled and every
 * allocation went through.) */
static int reconcile(int others, int hostpid) {
  int listed = hostpid ? 4100000 : (int)getpid();
  nvml_write(others, listed, 0, 0, 0);
  setup();
  CUdeviceptr a, b;
  CHECK(cuMemAlloc(&a, 8 * MiB) == CUDA_SUCCESS);
  if (hostpid) write_slot_hostpid(listed);
  nvml_write(others, listed, 8 * MiB + 70 * MiB, 0, 0); /* 70 MiB through raw symbols */
  sleep_ms(1100);                                        /* the periodic reconciliation */
  CHECK(cuMemAlloc(&b, 1 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ_U(test_used(0), 78 * MiB);
  CUmodule m;
  CHECK(cuModuleLoadData(&m, "image") == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(cuMemAlloc(&b, 1 * MiB) == CUDA_ERROR_OUT_OF_MEMORY); /* still over: still refused */
  nvml_write(others, listed, 8 * MiB, 0, 0);                   /* the raw memory freed */
  size_t fr, tot;
  CHECK(cuMemGetInfo(&fr, &tot) == CUDA_SUCCESS); /* reconciles now */
  CHECK_EQ_U(test_used(0), 8 * MiB);
  CHECK(cuMemAlloc(&b, 40 * MiB) == CUDA_SUCCESS);
  CHECK(cuMemFree(b) == CUDA_SUCCESS);
  CHECK(cuMemFree(a) == CUDA_SUCCESS);
  return 0;
}
static int case_reconcile_refuses(void) { return reconcile(0, 0); }
static int case_reconcile_many_procs(void) { return reconcile(100, 0); }
/* The boundary of the old fixed buffer (64 entries): 64 processes listed, then 65. */
static int case_reconcile_64_procs(void) { return reconcile(63, 0); }
static int case_reconcile_65_procs(void) { return reconcile(64, 0); }
static int case_reconcile_hostpid(void) { return reconcile(3, 1); }

/* Item 6: a managed pool (CUDA 13: CU_MEM_ALLOCATION_TYPE_MANAGED, no preferred location) takes
 * device memory once its allocations are touched or prefetched there, which no hook sees: charged
 * at allocation to the stream's device, like cuMemAllocManaged. Limit 64 MiB, the fake pool grows
 * in 2 MiB granules. (Before: treated as a host pool, 100 MiB held, nothing counted.) */
static int case_managed_pool(void) {
  setup();
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_MANAGED;
  props.location.type = CU_MEM_LOCATION_TYPE_NONE;
  CUmemoryPool pool;
  CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
  CUdeviceptr a, b;
  CHECK(cuMemAllocFromPoolAsync(&a, 100 * MiB, pool, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ_U(fakeCudaDeviceUsed(0), 0);
  CHECK(cuMemAllocFromPoolAsync(&a, 40 * MiB, pool, NULL) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 40 * MiB);
  CHECK_EQ_U(fakeCudaDeviceUsed(0), 40 * MiB);
  CHECK(cuMemAllocFromPoolAsync(&b, 30 * MiB, pool, NULL) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ_U(test_used(0), fakeCudaDeviceUsed(0));
  CHECK(test_used(0) <= 64 * MiB);
  CHECK(cuMemFreeAsync(a, NULL) == CUDA_SUCCESS);
  CHECK(cuCtxSynchronize() == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), fakeCudaDeviceUsed(0));
  CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 0);
  /* A pinned host pool still uses no device memory and is not charged. */
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_HOST;
  CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
  CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 0);
  return 0;
}

/* Item 5: arrays laid out in whole pages (FAKE_CUDA_ARRAY_PAGE; block-linear on the real driver),
 * whose requirement the driver reports only for a deferred-mapping array. Small layered arrays
 * (16 x 16 float, 4 layers: 4 KiB of texels) until OOM. Limit 64 MiB. */
static int small_arrays_until_oom(int cap) {
  CUDA_ARRAY3D_DESCRIPTOR d;
  memset(&d, 0, sizeof d);
  d.Width = 16;
  d.Height = 16;
  d.Depth = 4;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 1;
  d.Flags = CUDA_ARRAY3D_LAYERED;
  static CUarray arr[4096];
  int n = 0;
  while (n < cap && cuArray3DCreate(&arr[n], &d) == CUDA_SUCCESS) n++;
  return n;
}

/* The driver's layout through a deferred-mapping twin: 128 KiB pages, 512 arrays fit, the count
 * equal to what the device holds. (Before: charged 4 KiB each, 4096 arrays, 512 MiB held.) */
static int case_arrays_pages(void) {
  setup();
  CHECK_EQ_U(small_arrays_until_oom(4096), 512);
  CHECK_EQ_U(test_used(0), 64 * MiB);
  CHECK_EQ_U(fakeCudaDeviceUsed(0), 64 * MiB);
  /* A deferred-mapping array holds nothing itself (VMM handles mapped into it are charged). */
  CUDA_ARRAY3D_DESCRIPTOR d;
  memset(&d, 0, sizeof d);
  d.Width = 1024;
  d.Height = 1024;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 4;
  d.Flags = CUDA_ARRAY3D_DEFERRED_MAPPING;
  CUarray def;
  CHECK(cuArray3DCreate(&def, &d) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 64 * MiB);
  CHECK(cuArrayDestroy(def) == CUDA_SUCCESS);
  return 0;
}

/* No deferred mapping on this device: the texels rounded up to the allocation granularity (2 MiB),
 * 32 arrays; never less than the device holds. (Before: 4096 arrays, 512 MiB held.) */
static int case_arrays_no_deferred(void) {
  setup();
  CHECK_EQ_U(small_arrays_until_oom(4096), 32);
  CHECK_EQ_U(test_used(0), 64 * MiB);
  CHECK_EQ_U(fakeCudaDeviceUsed(0), 32 * 128 * 1024);
  return 0;
}

/* A driver that holds more than it reports (the requirement counts the texels, the array holds
 * 192 KiB pages, seen in NVML): the reconciliation after each array charges the rest, and the
 * array that takes the container over is destroyed and refused. Context 8 MiB, limit 64 MiB:
 * 298 arrays (8 + 298 x 0.1875 = 63.875 MiB). (Before: 4096 arrays, 768 MiB held.) */
static int case_arrays_nvml(void) {
  setup();
  CHECK_EQ_U(small_arrays_until_oom(4096), 298);
  CHECK_EQ_U(fakeCudaDeviceUsed(0), 298 * 196608ull);
  CHECK_EQ_U(test_used(0), 8 * MiB + 298 * 196608ull);
  return 0;
}

/* Item 13: a child forked after initialisation that execs a program without LD_PRELOAD holds GPU
 * memory no hook sees; NVML lists it under its pid. The parent's reconciliation charges a
 * descendant with no slot, refuses further allocations while the container is over, and lets go
 * when the child is gone. Limit 64 MiB. (Before: the child's 70 MiB were never counted.) */
static int case_child_no_preload(void) {
  nvml_write(0, (int)getpid(), 0, 0, 0);
  setup();
  CUdeviceptr a, b;
  CHECK(cuMemAlloc(&a, 8 * MiB) == CUDA_SUCCESS);
  fflush(NULL);
  pid_t child = fork();
  if (child == 0) {
    char *args[] = {"sleep", "30", NULL}, *env[] = {"PATH=/usr/bin:/bin", NULL}; /* no LD_PRELOAD */
    execve("/bin/sleep", args, env);
    _exit(127);
  }
  CHECK(child > 0);
  nvml_write(0, (int)getpid(), 8 * MiB, (int)child, 70 * MiB); /* the child's own CUDA memory */
  sleep_ms(1100);
  CHECK(cuMemAlloc(&b, 1 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ_U(test_used(0), 78 * MiB);
  CHECK(kill(child, SIGKILL) == 0);
  int st;
  CHECK(waitpid(child, &st, 0) == child);
  nvml_write(0, (int)getpid(), 8 * MiB, 0, 0);
  size_t fr, tot;
  CHECK(cuMemGetInfo(&fr, &tot) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 8 * MiB);
  CHECK(cuMemAlloc(&b, 40 * MiB) == CUDA_SUCCESS);
  /* An unrelated process of the node (not a descendant) is not charged here. */
  nvml_write(0, (int)getpid(), 48 * MiB, (int)getppid(), 70 * MiB);
  CHECK(cuMemGetInfo(&fr, &tot) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 48 * MiB);
  return 0;
}

static const test_case_t cases[] = {
    {"reconcile_refuses", case_reconcile_refuses},
    {"reconcile_many_procs", case_reconcile_many_procs},
    {"reconcile_64_procs", case_reconcile_64_procs},
    {"reconcile_65_procs", case_reconcile_65_procs},
    {"reconcile_hostpid", case_reconcile_hostpid},
    {"managed_pool", case_managed_pool},
    {"child_no_preload", case_child_no_preload},
    {"arrays_pages", case_arrays_pages},
    {"arrays_no_deferred", case_arrays_no_deferred},
    {"arrays_nvml", case_arrays_nvml},
};

int main(int argc, char **argv) {
  return run_case(argc, argv, cases, sizeof cases / sizeof cases[0]);
}

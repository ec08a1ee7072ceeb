/*
 * fake_cuda.c — a stand-in for libcuda.so.1 for CPU-only tests of libvgpu: the driver-API subset
 * libvgpu hooks or calls, on fake devices whose memory is bookkeeping only (device pointers are
 * unique addresses that must not be dereferenced).
 *
 * Configuration (environment, read at cuInit):
 *   FAKE_CUDA_DEVICES=<n>           physical devices (default 1, max 16)
 *   FAKE_CUDA_TOTAL_MEM=<bytes>     memory per device (default 16 GiB)
 *   FAKE_CUDA_UUIDS=<u0>,<u1>,...   "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" per physical device;
 *                                   default GPU-00000000-0000-0000-0000-0000000000<i> (hex i)
 *   FAKE_CUDA_POOL_GRANULE=<bytes>  stream-ordered pools grow in these steps (default 2 MiB; the
 *                                   real driver's step is 32 MiB, see libvgpu/README.md)
 *   FAKE_CUDA_GRAPH_GRANULE=<bytes> the graph memory pool grows in these steps (default 2 MiB; the
 *                                   real driver's step is 32 MiB, libvgpu/README.md)
 *   FAKE_CUDA_TRAMPOLINES=1         cuGetProcAddress returns private trampolines instead of the
 *                                   exported functions (tests libvgpu's version-table fallback)
 *   CUDA_VISIBLE_DEVICES            honoured like the real driver: indices or uuids
 *   FAKE_CUDA_KERNEL_US=<us>        every launch is a kernel running that long (default 0: done at
 *                                   once) on the device's SMs; FAKE_CUDA_SWITCH_US=<us>: contexts
 *                                   time-share the GPU and a switch costs that long;
 *                                   CUDA_DEVICE_MAX_CONNECTIONS: hardware queues (default 8). The
 *                                   rules (SMs, hardware queues, events, switches):
 *                                   fake_cuda_engine.inc. cuEventQuery, cuEventSynchronize,
 *                                   cuStreamSynchronize, cuCtxSynchronize and cuEventElapsedTime
 *                                   obey those times (CLOCK_MONOTONIC).
 *   FAKE_CUDA_CONTEXT_BYTES=<bytes> with FAKE_NVML_CONFIG=<file>: as on the real driver, a context
 *                                   shows in NVML's per-process usage: each context creation
 *                                   (first primary retain, cuCtxCreate) rewrites that file as its
 *                                   first content plus "process <dev> pid=<self> used=<n x bytes>"
 * Extra entry points for tests: fakeCudaLaunchCount(), fakeCudaDeviceUsed(int ordinal) (the
 * physical bytes in use: plain allocations, what every pool and the graph pool reserve, live VMM
 * allocations, context limits), fakeCudaKernelsDone() (kernels whose end time has passed),
 * fakeCudaBusyNs(int ordinal) (time some kernel ran on a device so far), fakeCudaSmBusyNs(int
 * ordinal) (SM-time run so far / SMs), fakeCudaQueueHeld(int ordinal, long long *ns) (kernels
 * held behind a barrier of their hardware queue, and for how long) and
 * fakeCudaSwitchNs(int ordinal) (context-switch time spent so far on a device).
 * Memory lifetimes modelled on the real driver: VMM handles, mappings and exported descriptors
 * (fake_cuda_vmm.inc); graph allocation nodes served from the graph pool at launch/upload, stream
 * capture (fake_cuda_graphs.inc); cuCtxSetLimit heap/printf/stack (below).
 *
 * Pools (fake_cuda_memory.inc) behave like the driver's (measured on H100/H200): a request that
 * does not fit the free space at the pool's end grows the pool by roundup(request - that space,
 * granule); a stream-ordered free lowers USED at once, but the block is reusable (and releasable) only after the host
 * synchronizes (cuStreamSynchronize/cuCtxSynchronize/cuEventSynchronize), which also releases what
 * the pool holds above its release threshold; cuMemPoolTrimTo releases unused memory down to its
 * argument, never blocks whose free was not yet seen complete.
 *
 * More driver rules, for the routes around the limits (issue 35): test/fake/fake_cuda_routes.inc,
 * included at the end (streams' and events' contexts, FAKE_CUDA_ALLOC_GRANULE, FAKE_CUDA_MODULE_BYTES,
 * local-memory growth, the pre-4.0 launch API, memsets, IPC/dmabuf exports).
 *
 * Thread safety: one mutex around all state.
 */
#include <cuda.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#undef cuGetProcAddress
#undef cuDeviceGetUuid
#undef cuEventElapsedTime

#define FAKE_EXPORT __attribute__((visibility("default")))
struct proc { const char *name; void *fn; };
#define P(n) {#n, (void *)n}
#define MAXDEV 16

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int inited;
static int nvis;                 /* visible devices */
static int vis[MAXDEV];          /* visible ordinal -> physical index */
static size_t total_mem = 16ull << 30;
static size_t used_mem[MAXDEV];  /* by physical index */
static unsigned char uuids[MAXDEV][16];
static size_t pool_granule = 2u << 20;
static unsigned long long next_addr = 0x7f0000000000ull;
static unsigned long launches;
static int trampolines;

struct ctx {
  int dev; /* visible ordinal */
  int primary;
};
static struct ctx primary_ctx[MAXDEV];
static int primary_refs[MAXDEV];
static __thread struct ctx *cur;
static __thread struct ctx *stack[16];
static __thread int depth;
/* fake_cuda_routes.inc (issue 35): streams' contexts. */
static void fr_stream_created(CUstream s, int idx);
static struct ctx *fr_stream_ctx(CUstream s);
static struct ctx *fr_enter_stream_ctx(CUstream s);
static void fr_leave_stream_ctx(struct ctx *saved);
static void *fr_lookup(const char *name);
static int fr_event_fits_stream(CUevent e, CUstream s);
static size_t fr_alloc_footprint(size_t size);
static unsigned long long fr_nvml_extra(int phys);
static CUresult fr_module_loaded(void *module);
static void fr_module_unloaded(void *module);
static CUresult fr_lmem_before_kernel(CUfunction f);
static int fr_kept_alive_locked(unsigned long long addr);

#define MAXALLOC 65536
struct alloc {
  unsigned long long addr;
  size_t size;
  int dev;
  struct ctx *ctx;
  void *pool; /* non-NULL: from a pool */
  int kind;   /* 1 ptr, 2 vmm, 3 array, 4 mipmap */
};
static struct alloc allocs[MAXALLOC];

struct pool {
  int dev;
  size_t used, reserved, threshold;
  size_t pending; /* freed stream-ordered, not yet reusable (no synchronize since) */
  int live;
};
static struct pool default_pool[MAXDEV];
#define MAXPOOLS 1024 /* the driver has no small cap either (issue 35: past 256 pools) */
static struct pool *explicit_pools[MAXPOOLS]; /* created with cuMemPoolCreate, for synchronize */

static int parse_uuid(const char *s, unsigned char out[16]) {
  if (strncmp(s, "GPU-", 4) != 0) return -1;
  s += 4;
  int n = 0;
  while (*s && n < 16) {
    if (*s == '-') { s++; continue; }
    unsigned v;
    if (sscanf(s, "%2x", &v) != 1) return -1;
    out[n++] = (unsigned char)v;
    s += 2;
  }
  return n == 16 ? 0 : -1;
}

static void init_locked(void) {
  if (inited) return;
  int nphys = 1;
  const char *e = getenv("FAKE_CUDA_DEVICES");
  if (e) nphys = atoi(e);
  if (nphys < 0) nphys = 0;
  if (nphys > MAXDEV) nphys = MAXDEV;
  if ((e = getenv("FAKE_CUDA_TOTAL_MEM"))) total_mem = strtoull(e, NULL, 10);
  if ((e = getenv("FAKE_CUDA_POOL_GRANULE"))) pool_granule = strtoull(e, NULL, 10);
  trampolines = getenv("FAKE_CUDA_TRAMPOLINES") != NULL;
  for (int i = 0; i < nphys; i++) {
    memset(uuids[i], 0, 16);
    uuids[i][15] = (unsigned char)i;
  }
  if ((e = getenv("FAKE_CUDA_UUIDS"))) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", e);
    int i = 0;
    for (char *tok = strtok(buf, ","); tok && i < nphys; tok = strtok(NULL, ","), i++)
      parse_uuid(tok, uuids[i]);
  }
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  nvis = 0;
  if (!cvd) {
    for (int i = 0; i < nphys; i++) vis[nvis++] = i;
  } else {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", cvd);
    for (char *tok = strtok(buf, ","); tok && nvis < MAXDEV; tok = strtok(NULL, ",")) {
      int phys = -1;
      unsigned char u[16];
      if (tok[0] >= '0' && tok[0] <= '9') {
        phys = atoi(tok);
        if (phys >= nphys) break; /* the driver stops at the first invalid entry */
      } else if (parse_uuid(tok, u) == 0) {
        for (int i = 0; i < nphys; i++)
          if (memcmp(u, uuids[i], 16) == 0) phys = i;
        if (phys < 0) break;
      } else {
        break;
      }
      vis[nvis++] = phys;
    }
  }
  for (int i = 0; i < MAXDEV; i++) {
    primary_ctx[i].dev = i;
    primary_ctx[i].primary = 1;
    default_pool[i].dev = i;
    default_pool[i].live = 1;
  }
  inited = 1;
}

#define LOCK() pthread_mutex_lock(&mu)
#define UNLOCK() pthread_mutex_unlock(&mu)
#define NEED_INIT()                                                                               \
  do {                                                                                             \
    if (!inited) return CUDA_ERROR_NOT_INITIALIZED;                                                \
  } while (0)

static int phys_of(int ordinal) { return vis[ordinal]; }

/* ---- init, devices */

FAKE_EXPORT CUresult cuInit(unsigned int flags) {
  (void)flags;
  LOCK();
  init_locked();
  UNLOCK();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDriverGetVersion(int *v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetCount(int *count) {
  NEED_INIT();
  *count = nvis;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  NEED_INIT();
  if (ordinal < 0 || ordinal >= nvis) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
  NEED_INIT();
  if (dev < 0 || dev >= nvis) return CUDA_ERROR_INVALID_DEVICE;
  memcpy(uuid->bytes, uuids[phys_of(dev)], 16);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }
FAKE_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  NEED_INIT();
  if (dev < 0 || dev >= nvis) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = total_mem;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  snprintf(name, (size_t)len, "Fake GPU %d", dev);
  return CUDA_SUCCESS;
}

/* ---- contexts */

static int contexts_on[MAXDEV]; /* by physical index, for FAKE_CUDA_CONTEXT_BYTES */
static char *nvml_first_content;

/* Caller holds mu. Publishes this process's context memory to the fake NVML (atomic rename). */
static void publish_context_memory_locked(int dev, int delta) {
  const char *bytes = getenv("FAKE_CUDA_CONTEXT_BYTES"), *path = getenv("FAKE_NVML_CONFIG");
  if (!bytes || !path) return;
  int phys = phys_of(dev);
  contexts_on[phys] += delta;
  if (!nvml_first_content) {
    FILE *in = fopen(path, "r");
    nvml_first_content = calloc(1, 65536);
    if (in && nvml_first_content) {
      size_t n = fread(nvml_first_content, 1, 65535, in);
      nvml_first_content[n] = 0;
    }
    if (in) fclose(in);
    if (!nvml_first_content) return;
  }
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
  FILE *out = fopen(tmp, "w");
  if (!out) return;
  fputs(nvml_first_content, out);
  for (int d = 0; d < MAXDEV; d++)
    if (contexts_on[d] > 0)
      fprintf(out, "\nprocess %d pid=%d used=%llu\n", d, (int)getpid(),
              (unsigned long long)contexts_on[d] * strtoull(bytes, NULL, 10) + fr_nvml_extra(d));
  fclose(out);
  rename(tmp, path);
}


FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  NEED_INIT();
  if (dev < 0 || dev >= nvis) return CUDA_ERROR_INVALID_DEVICE;
  LOCK();
  if (primary_refs[dev]++ == 0) publish_context_memory_locked(dev, 1);
  UNLOCK();
  *pctx = (CUcontext)&primary_ctx[dev];
  return CUDA_SUCCESS;
}

static void ctx_limits_drop_locked(const struct ctx *c);
static void fr_ctx_dropped_locked(const struct ctx *c);
static void free_ctx_allocs_locked(struct ctx *c) {
  ctx_limits_drop_locked(c);
  fr_ctx_dropped_locked(c); /* its local memory (routes.inc) */
  for (int i = 0; i < MAXALLOC; i++)
    if (allocs[i].addr && allocs[i].ctx == c) {
      used_mem[phys_of(allocs[i].dev)] -= allocs[i].size;
      memset(&allocs[i], 0, sizeof allocs[i]);
    }
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  NEED_INIT();
  if (dev < 0 || dev >= nvis) return CUDA_ERROR_INVALID_DEVICE;
  LOCK();
  if (primary_refs[dev] > 0 && --primary_refs[dev] == 0) {
    free_ctx_allocs_locked(&primary_ctx[dev]);
    publish_context_memory_locked(dev, -1);
  }
  UNLOCK();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  NEED_INIT();
  if (dev < 0 || dev >= nvis) return CUDA_ERROR_INVALID_DEVICE;
  LOCK();
  free_ctx_allocs_locked(&primary_ctx[dev]);
  UNLOCK();
  return CUDA_SUCCESS;
}
static CUresult ctx_create(CUcontext *pctx, CUdevice dev) {
  NEED_INIT();
  if (dev < 0 || dev >= nvis) return CUDA_ERROR_INVALID_DEVICE;
  struct ctx *c = calloc(1, sizeof *c);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  c->dev = dev;
  LOCK();
  publish_context_memory_locked(dev, 1);
  UNLOCK();
  *pctx = (CUcontext)c;
  if (depth < 16) stack[depth++] = cur;
  cur = c;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  (void)flags;
  return ctx_create(pctx, dev);
}
FAKE_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *p, int n, unsigned int flags,
                                    CUdevice dev) {
  (void)p; (void)n; (void)flags;
  return ctx_create(pctx, dev);
}
FAKE_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *p, unsigned int flags, CUdevice dev) {
  (void)p; (void)flags;
  return ctx_create(pctx, dev);
}
FAKE_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  struct ctx *c = (struct ctx *)ctx;
  if (!c || c->primary) return CUDA_ERROR_INVALID_CONTEXT;
  LOCK();
  free_ctx_allocs_locked(c);
  UNLOCK();
  if (cur == c) cur = depth > 0 ? stack[--depth] : NULL;
  free(c);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  cur = (struct ctx *)ctx;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx) {
  *pctx = (CUcontext)cur;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxGetDevice(CUdevice *device) {
  if (!cur) return CUDA_ERROR_INVALID_CONTEXT;
  *device = cur->dev;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  if (depth >= 16) return CUDA_ERROR_INVALID_VALUE;
  stack[depth++] = cur;
  cur = (struct ctx *)ctx;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
  if (pctx) *pctx = (CUcontext)cur;
  cur = depth > 0 ? stack[--depth] : NULL;
  return CUDA_SUCCESS;
}

static void sync_pools_locked(void);
static void wait_until_ns(long long t);
static long long device_tail_ns(void);
static int graph_mem_free(unsigned long long dptr);
FAKE_EXPORT CUresult cuCtxSynchronize(void) {
  wait_until_ns(device_tail_ns()); /* every kernel of the device has run */
  LOCK();
  sync_pools_locked();
  UNLOCK();
  return CUDA_SUCCESS;
}

#include "fake_cuda_memory.inc" /* plain allocations, stream-ordered pools, streams */
#include "fake_cuda_vmm.inc"    /* cuMemCreate/cuMemMap and their lifetimes */
#include "fake_cuda_graphs.inc" /* graph memory, stream capture */

/* ---- context limits: the heap and printf FIFO take their whole size in device memory once the
 * application sets them (the real driver maps them at the first kernel that needs them; charged at
 * the set here), the stack its size above the default for every thread the device holds at once
 * (132 SMs x 2048 threads, like an H100); released with the context. Defaults: stack 1 KiB,
 * printf 1 MiB, heap 8 MiB (not charged until set: part of the context). */

#define FAKE_SMS 132
#define FAKE_THREADS_PER_SM 2048
struct ctx_limits {
  const struct ctx *ctx;
  size_t value[3]; /* CU_LIMIT_STACK_SIZE, PRINTF_FIFO_SIZE, MALLOC_HEAP_SIZE */
  int set[3];      /* set by the application */
  size_t bytes;    /* device memory held above the defaults */
};
static struct ctx_limits ctx_limits[64];
static const size_t limit_default[3] = {1024, 1u << 20, 8u << 20};

static struct ctx_limits *ctx_limits_of_locked(const struct ctx *c, int create) {
  for (int i = 0; i < 64; i++)
    if (ctx_limits[i].ctx == c) return &ctx_limits[i];
  if (!create) return NULL;
  for (int i = 0; i < 64; i++)
    if (!ctx_limits[i].ctx) {
      ctx_limits[i] = (struct ctx_limits){.ctx = c, .value = {limit_default[0], limit_default[1], limit_default[2]}};
      return &ctx_limits[i];
    }
  return NULL;
}
static size_t limits_bytes(const size_t v[3], const int set[3]) {
  size_t b = 0;
  if (v[0] > limit_default[0]) b += (v[0] - limit_default[0]) * FAKE_SMS * FAKE_THREADS_PER_SM;
  for (int l = 1; l < 3; l++)
    if (set[l]) b += v[l];
  return b;
}
/* The context goes away: so does what its limits held. */
static void ctx_limits_drop_locked(const struct ctx *c) {
  struct ctx_limits *l = ctx_limits_of_locked(c, 0);
  if (!l) return;
  used_mem[phys_of(c->dev)] -= l->bytes;
  memset(l, 0, sizeof *l);
}
FAKE_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  if (!cur) return CUDA_ERROR_INVALID_CONTEXT;
  if ((int)limit > CU_LIMIT_MALLOC_HEAP_SIZE) return CUDA_SUCCESS;
  LOCK();
  struct ctx_limits *l = ctx_limits_of_locked(cur, 1);
  CUresult rc = l ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  if (l) {
    size_t v[3] = {l->value[0], l->value[1], l->value[2]};
    int set[3] = {l->set[0], l->set[1], l->set[2]};
    v[limit] = value;
    set[limit] = 1;
    size_t b = limits_bytes(v, set);
    int phys = phys_of(cur->dev);
    if (b > l->bytes && used_mem[phys] + (b - l->bytes) > total_mem) {
      rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      used_mem[phys] = used_mem[phys] - l->bytes + b;
      l->bytes = b;
      l->value[limit] = value;
      l->set[limit] = 1;
    }
  }
  UNLOCK();
  return rc;
}
FAKE_EXPORT CUresult cuCtxGetLimit(size_t *value, CUlimit limit) {
  if (!cur) return CUDA_ERROR_INVALID_CONTEXT;
  if ((int)limit > CU_LIMIT_MALLOC_HEAP_SIZE) return CUDA_ERROR_UNSUPPORTED_LIMIT;
  LOCK();
  struct ctx_limits *l = ctx_limits_of_locked(cur, 0);
  *value = l ? l->value[limit] : limit_default[limit];
  UNLOCK();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  if (dev < 0 || dev >= nvis) return CUDA_ERROR_INVALID_DEVICE;
  *pi = attrib == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? FAKE_SMS
        : attrib == CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR ? FAKE_THREADS_PER_SM
                                                                        : 0;
  return CUDA_SUCCESS;
}

/* ---- modules: loading takes no memory here; tests script what NVML reports instead. */
FAKE_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  (void)image;
  static char modules[64];
  static int n;
  *module = (CUmodule)&modules[__atomic_fetch_add(&n, 1, __ATOMIC_RELAXED) % 64];
  return fr_module_loaded(*module); /* its globals (routes.inc) */
}
FAKE_EXPORT CUresult cuModuleUnload(CUmodule module) {
  fr_module_unloaded(module);
  return CUDA_SUCCESS;
}

static const struct proc mem_procs[] = {
    P(cuModuleLoadData), P(cuModuleUnload), P(cuStreamEndCapture), {"cuStreamBeginCapture_v2", (void *)cuStreamBeginCapture},
    P(cuMemAddressReserve), P(cuMemAddressFree), P(cuMemMap), P(cuMemUnmap), P(cuMemSetAccess),
    P(cuMemRetainAllocationHandle), P(cuMemExportToShareableHandle), P(cuMemImportFromShareableHandle),
    P(cuMemGetAllocationPropertiesFromHandle), P(cuGraphCreate), P(cuGraphDestroy), P(cuGraphAddMemAllocNode),
    P(cuGraphAddMemFreeNode), P(cuGraphAddEmptyNode), P(cuGraphGetNodes), P(cuGraphNodeGetType),
    P(cuGraphMemAllocNodeGetParams), P(cuGraphInstantiateWithFlags), P(cuGraphInstantiateWithParams),
    P(cuGraphExecDestroy), P(cuGraphUpload), P(cuGraphUpload_ptsz), P(cuDeviceGraphMemTrim),
    P(cuDeviceGetGraphMemAttribute), P(cuCtxSetLimit), P(cuCtxGetLimit), P(cuDeviceGetAttribute),
};

#include "fake_cuda_engine.inc" /* launches, events, the engine and its hardware queues */

FAKE_EXPORT unsigned long fakeCudaLaunchCount(void) { return __atomic_load_n(&launches, __ATOMIC_RELAXED); }
FAKE_EXPORT size_t fakeCudaDeviceUsed(int ordinal) {
  LOCK();
  size_t v = (ordinal >= 0 && ordinal < nvis) ? used_mem[phys_of(ordinal)] : 0;
  UNLOCK();
  return v;
}

#include "fake_cuda_procaddr.inc"

/* ---- a few more entry points so the GPU test programs (libvgpu/gpu) also run on the fake */

FAKE_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr) {
  *pStr = error == CUDA_SUCCESS ? "no error" : error == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : "fake error";
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                                   CUmemAllocationGranularity_flags option) {
  (void)prop; (void)option;
  *g = 2u << 20;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int flags,
                                           CUstream s) {
  (void)p; (void)n; (void)loc; (void)flags; (void)s;
  return CUDA_SUCCESS;
}

#include "fake_cuda_handles.inc" /* IPC import, dmabuf of VMM memory */
#include "fake_cuda_routes.inc"
#include "fake_cuda_arrays.inc"

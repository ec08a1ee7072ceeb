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
 * Memory lifetimes modelled on the real driver (sections below): VMM handles, mappings and
 * exported descriptors; graph allocation nodes served from the graph pool at launch/upload;
 * stream capture; cuCtxSetLimit heap/printf/stack.
 *
 * Pools behave like the driver's (measured on H100/H200): a request that does not fit the free
 * space at the pool's end grows the pool by roundup(request - that space, granule); a stream-ordered
 * free lowers USED at once, but the block is reusable (and releasable) only after the host
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

/* ---- memory */

static CUresult alloc_locked(unsigned long long *addr, size_t size, int kind, void *pool) {
  if (!cur) return CUDA_ERROR_INVALID_CONTEXT;
  int phys = phys_of(cur->dev);
  if (!pool && kind == 1) size = fr_alloc_footprint(size); /* whole pages (routes.inc) */
  if (!pool && used_mem[phys] + size > total_mem) return CUDA_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < MAXALLOC; i++) {
    if (allocs[i].addr) continue;
    allocs[i].addr = next_addr;
    allocs[i].size = size;
    allocs[i].dev = cur->dev;
    allocs[i].ctx = cur;
    allocs[i].pool = pool;
    allocs[i].kind = kind;
    next_addr += (size + 0xffff) & ~0xffffull;
    if (!pool) used_mem[phys] += size;
    *addr = allocs[i].addr;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

static struct alloc *find_locked(unsigned long long addr, int kind) {
  for (int i = 0; i < MAXALLOC; i++)
    if (allocs[i].addr == addr && allocs[i].kind == kind) return &allocs[i];
  return NULL;
}

static void release_locked(struct alloc *a) {
  if (a->pool) { /* cuMemFree of a pool block: synchronous, reusable at once */
    struct pool *p = a->pool;
    p->used -= a->size;
  } else {
    used_mem[phys_of(a->dev)] -= a->size;
  }
  memset(a, 0, sizeof *a);
}

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  if (bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  LOCK();
  unsigned long long a = 0;
  CUresult rc = alloc_locked(&a, bytesize, 1, NULL);
  UNLOCK();
  if (rc == CUDA_SUCCESS) *dptr = (CUdeviceptr)a;
  return rc;
}
FAKE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  (void)flags;
  return cuMemAlloc_v2(dptr, bytesize);
}
FAKE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t w, size_t h, unsigned int e) {
  (void)e;
  size_t p = (w + 511) / 512 * 512;
  CUresult rc = cuMemAlloc_v2(dptr, p * h);
  if (rc == CUDA_SUCCESS) *pitch = p;
  return rc;
}
FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  if (!dptr) return CUDA_SUCCESS;
  LOCK();
  struct alloc *a = find_locked((unsigned long long)dptr, 1);
  if (a && fr_kept_alive_locked(a->addr)) memset(a, 0, sizeof *a); /* an importer holds it (routes.inc) */
  else if (a) release_locked(a);
  int graph = !a && graph_mem_free((unsigned long long)dptr);
  UNLOCK();
  return a || graph ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total) {
  if (!cur) return CUDA_ERROR_INVALID_CONTEXT;
  LOCK();
  int phys = phys_of(cur->dev);
  size_t used = used_mem[phys];
  UNLOCK();
  *total = total_mem;
  *free_b = total_mem > used ? total_mem - used : 0;
  return CUDA_SUCCESS;
}

/* ---- pools */

static size_t round_up(size_t v, size_t g) { return g ? (v + g - 1) / g * g : v; }

/* Releases whole granules of a pool down to `target` (never below what is outstanding). */
static void shrink_locked(struct pool *p, size_t target) {
  size_t floor = round_up(p->used + p->pending, pool_granule);
  if (target < floor) target = floor;
  if (p->reserved > target) {
    used_mem[phys_of(p->dev)] -= p->reserved - target;
    p->reserved = target;
  }
}

/* The host synchronized: pending frees complete, memory above the release threshold goes back. */
static void sync_pool_locked(struct pool *p) {
  p->pending = 0;
  if (p->reserved > p->threshold) shrink_locked(p, p->threshold / pool_granule * pool_granule);
}
static void sync_pools_locked(void) {
  for (int i = 0; i < MAXDEV; i++) sync_pool_locked(&default_pool[i]);
  for (int i = 0; i < MAXPOOLS; i++)
    if (explicit_pools[i]) sync_pool_locked(explicit_pools[i]);
}

static void capture_unsafe_call(void);
static int capture_status(CUstream s);
static int capture_alloc(CUstream s, size_t size, CUdeviceptr *dptr);
FAKE_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
  NEED_INIT();
  capture_unsafe_call();
  if (dev < 0 || dev >= nvis) return CUDA_ERROR_INVALID_DEVICE;
  *pool = (CUmemoryPool)&default_pool[dev];
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
  struct pool *p = calloc(1, sizeof *p);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  p->dev = props ? props->location.id : 0;
  /* A managed pool with no preferred device (CUDA 13): its memory becomes resident where it is
   * touched; modelled as the device of its first allocation's context, at that allocation. */
  if (props && props->allocType == CU_MEM_ALLOCATION_TYPE_MANAGED && props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    p->dev = -1;
  p->live = 1;
  LOCK();
  int slot = -1;
  for (int i = 0; i < MAXPOOLS && slot < 0; i++)
    if (!explicit_pools[i]) slot = i;
  if (slot >= 0) explicit_pools[slot] = p;
  UNLOCK();
  if (slot < 0) {
    free(p);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *pool = (CUmemoryPool)p;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  struct pool *p = (struct pool *)pool;
  LOCK();
  if (p->dev >= 0) used_mem[phys_of(p->dev)] -= p->reserved;
  p->reserved = p->used = p->pending = 0;
  for (int i = 0; i < MAXALLOC; i++)
    if (allocs[i].pool == p) memset(&allocs[i], 0, sizeof allocs[i]);
  for (int i = 0; i < MAXPOOLS; i++)
    if (explicit_pools[i] == p) explicit_pools[i] = NULL;
  UNLOCK();
  int is_default = p >= default_pool && p < default_pool + MAXDEV;
  if (!is_default) free(p);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  struct pool *p = (struct pool *)pool;
  capture_unsafe_call();
  LOCK();
  cuuint64_t v = 0;
  switch (attr) {
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = p->reserved; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v = p->used; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = p->threshold; break;
    default: break;
  }
  UNLOCK();
  *(cuuint64_t *)value = v;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  struct pool *p = (struct pool *)pool;
  LOCK();
  if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) p->threshold = (size_t) * (cuuint64_t *)value;
  UNLOCK();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  struct pool *p = (struct pool *)pool;
  LOCK();
  shrink_locked(p, round_up(keep, pool_granule));
  UNLOCK();
  return CUDA_SUCCESS;
}
static CUresult pool_alloc(CUdeviceptr *dptr, size_t size, struct pool *p) {
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  LOCK();
  if (!cur) {
    UNLOCK();
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (p->dev < 0) p->dev = cur->dev; /* a managed pool becomes resident here */
  size_t tail = p->reserved - p->used - p->pending; /* free and reusable: at the pool's end */
  if (size > tail) {
    size_t grow = round_up(size - tail, pool_granule);
    int phys = phys_of(p->dev);
    if (used_mem[phys] + grow > total_mem) {
      UNLOCK();
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    used_mem[phys] += grow;
    p->reserved += grow;
  }
  unsigned long long a = 0;
  CUresult rc = alloc_locked(&a, size, 1, p);
  if (rc == CUDA_SUCCESS) {
    p->used += size;
    *dptr = (CUdeviceptr)a;
  }
  UNLOCK();
  return rc;
}
FAKE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s) {
  struct ctx *saved = fr_enter_stream_ctx(s);
  CUresult rc = CUDA_ERROR_INVALID_CONTEXT;
  if (!cur) rc = CUDA_ERROR_INVALID_CONTEXT;
  else if (s && capture_alloc(s, size, dptr)) rc = CUDA_SUCCESS;
  else rc = pool_alloc(dptr, size, &default_pool[cur->dev]);
  fr_leave_stream_ctx(saved);
  return rc;
}
FAKE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s) {
  return cuMemAllocAsync(dptr, size, s);
}
FAKE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s) {
  struct ctx *saved = fr_enter_stream_ctx(s);
  CUresult rc = pool_alloc(dptr, size, (struct pool *)pool);
  fr_leave_stream_ctx(saved);
  return rc;
}
FAKE_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
                                                  CUstream s) {
  return cuMemAllocFromPoolAsync(dptr, size, pool, s);
}
FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
  (void)s;
  LOCK();
  struct alloc *a = find_locked((unsigned long long)dptr, 1);
  if (a && a->pool) { /* stream-ordered: USED drops now, the block is reusable after a sync */
    struct pool *p = a->pool;
    p->used -= a->size;
    p->pending += a->size;
    memset(a, 0, sizeof *a);
  } else if (a) {
    release_locked(a);
  }
  int graph = !a && graph_mem_free((unsigned long long)dptr);
  UNLOCK();
  return a || graph ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
FAKE_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) { return cuMemFreeAsync(dptr, s); }
static long long stream_tail_ns(CUstream s);
static void fe_stream_created(CUstream s);
FAKE_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  wait_until_ns(stream_tail_ns(s));
  return cuCtxSynchronize();
}
FAKE_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s) { return cuStreamSynchronize(s); }
FAKE_EXPORT CUresult cuStreamCreate(CUstream *s, unsigned int flags) {
  (void)flags;
  static char streams[1024];
  static int n;
  int idx = __atomic_fetch_add(&n, 1, __ATOMIC_RELAXED) % 1024;
  *s = (CUstream)&streams[idx];
  fr_stream_created(*s, idx);
  fe_stream_created(*s); /* takes its hardware queue now, as on the real driver */
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data) { /* runs at once */
  (void)s;
  fn(data);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  (void)s;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx) {
  *pctx = (CUcontext)fr_stream_ctx(s);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st) {
  *st = s && capture_status(s) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  *mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  return CUDA_SUCCESS;
}

/* ---- VMM: physical allocations live while any handle, mapping or exported descriptor holds them
 *
 * As on the real driver (measured on H100/H200, driver 580): cuMemRelease of a mapped handle keeps
 * the memory until the last cuMemUnmap; cuMemRetainAllocationHandle returns the handle value that
 * was mapped and takes one more reference on it; an exported POSIX descriptor keeps the allocation
 * alive until it is closed; cuMemImportFromShareableHandle gives a new handle of the same memory.
 * cuMemUnmap must cover whole mappings, starting at one. */

#define VMM_MAX 4096
struct vmm_phys {
  size_t size;
  int dev; /* visible ordinal */
  int handles, maps, exports; /* what keeps it alive */
  int live;
};
struct vmm_handle {
  unsigned long long value;
  int phys, refs;
};
struct vmm_map {
  unsigned long long va;
  size_t size;
  unsigned long long handle; /* the handle value mapped (cuMemRetainAllocationHandle returns it) */
  int phys;
};
struct vmm_export {
  int fd;
  unsigned long long ino;
  int phys;
};
static struct vmm_phys vmm_phys[VMM_MAX];
static struct vmm_handle vmm_handles[VMM_MAX];
static struct vmm_map vmm_maps[VMM_MAX];
static struct vmm_export vmm_exports[VMM_MAX];
static unsigned long long next_vmm_handle = 0x5000;

static void vmm_phys_check_locked(int p) {
  struct vmm_phys *ph = &vmm_phys[p];
  if (ph->live && ph->handles == 0 && ph->maps == 0 && ph->exports == 0) {
    used_mem[phys_of(ph->dev)] -= ph->size;
    memset(ph, 0, sizeof *ph);
  }
}

/* Exported descriptors closed by the application no longer hold their allocation. */
static void vmm_exports_gc_locked(void) {
  for (int i = 0; i < VMM_MAX; i++) {
    struct vmm_export *e = &vmm_exports[i];
    if (!e->fd) continue;
    struct stat st;
    if (fstat(e->fd, &st) != 0 || (unsigned long long)st.st_ino != e->ino) {
      int p = e->phys;
      memset(e, 0, sizeof *e);
      vmm_phys[p].exports--;
      vmm_phys_check_locked(p);
    }
  }
}

static int vmm_handle_find_locked(unsigned long long value) {
  for (int i = 0; i < VMM_MAX; i++)
    if (vmm_handles[i].refs && vmm_handles[i].value == value) return i;
  return -1;
}

static int vmm_handle_new_locked(int p) {
  for (int i = 0; i < VMM_MAX; i++)
    if (!vmm_handles[i].refs) {
      vmm_handles[i].value = next_vmm_handle++;
      vmm_handles[i].phys = p;
      vmm_handles[i].refs = 1;
      vmm_phys[p].handles++;
      return i;
    }
  return -1;
}

FAKE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags) {
  (void)flags;
  if (!prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
      prop->location.id >= nvis)
    return CUDA_ERROR_INVALID_DEVICE;
  if (size == 0 || size % (2u << 20)) return CUDA_ERROR_INVALID_VALUE; /* granularity 2 MiB */
  LOCK();
  vmm_exports_gc_locked();
  int dev = prop->location.id, p = -1;
  CUresult rc = CUDA_SUCCESS;
  if (used_mem[phys_of(dev)] + size > total_mem) rc = CUDA_ERROR_OUT_OF_MEMORY;
  for (int i = 0; rc == CUDA_SUCCESS && i < VMM_MAX && p < 0; i++)
    if (!vmm_phys[i].live) p = i;
  if (rc == CUDA_SUCCESS && p < 0) rc = CUDA_ERROR_OUT_OF_MEMORY;
  if (rc == CUDA_SUCCESS) {
    vmm_phys[p] = (struct vmm_phys){.size = size, .dev = dev, .live = 1};
    used_mem[phys_of(dev)] += size;
    int h = vmm_handle_new_locked(p);
    *handle = (CUmemGenericAllocationHandle)vmm_handles[h].value;
  }
  UNLOCK();
  return rc;
}
FAKE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  LOCK();
  int h = vmm_handle_find_locked((unsigned long long)handle);
  if (h >= 0) {
    int p = vmm_handles[h].phys;
    vmm_handles[h].refs--;
    vmm_phys[p].handles--;
    vmm_phys_check_locked(p);
  }
  UNLOCK();
  return h >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
FAKE_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                         unsigned long long flags) {
  (void)alignment; (void)addr; (void)flags;
  LOCK();
  *ptr = (CUdeviceptr)next_addr;
  next_addr += (size + 0x1fffff) & ~0x1fffffull;
  UNLOCK();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  (void)ptr; (void)size;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                              unsigned long long flags) {
  (void)flags;
  LOCK();
  int h = vmm_handle_find_locked((unsigned long long)handle), slot = -1;
  CUresult rc = h < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  if (rc == CUDA_SUCCESS && offset + size > vmm_phys[vmm_handles[h].phys].size) rc = CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; rc == CUDA_SUCCESS && i < VMM_MAX; i++) {
    if (vmm_maps[i].size && ptr < vmm_maps[i].va + vmm_maps[i].size && vmm_maps[i].va < ptr + size)
      rc = CUDA_ERROR_INVALID_VALUE; /* overlaps a live mapping */
    if (!vmm_maps[i].size && slot < 0) slot = i;
  }
  if (rc == CUDA_SUCCESS && slot < 0) rc = CUDA_ERROR_OUT_OF_MEMORY;
  if (rc == CUDA_SUCCESS) {
    vmm_maps[slot] = (struct vmm_map){.va = ptr, .size = size, .handle = vmm_handles[h].value,
                                      .phys = vmm_handles[h].phys};
    vmm_phys[vmm_handles[h].phys].maps++;
  }
  UNLOCK();
  return rc;
}
FAKE_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  LOCK();
  int starts = 0;
  for (int i = 0; i < VMM_MAX; i++)
    if (vmm_maps[i].size && vmm_maps[i].va == ptr) starts = 1;
  if (starts) {
    for (int i = 0; i < VMM_MAX; i++) {
      struct vmm_map *m = &vmm_maps[i];
      if (!m->size || m->va < ptr || m->va + m->size > ptr + size) continue;
      int p = m->phys;
      memset(m, 0, sizeof *m);
      vmm_phys[p].maps--;
      vmm_phys_check_locked(p);
    }
  }
  UNLOCK();
  return starts ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
FAKE_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
  (void)ptr; (void)size; (void)desc; (void)count;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
  LOCK();
  unsigned long long a = (unsigned long long)(uintptr_t)addr;
  int m = -1;
  for (int i = 0; i < VMM_MAX && m < 0; i++)
    if (vmm_maps[i].size && a >= vmm_maps[i].va && a < vmm_maps[i].va + vmm_maps[i].size) m = i;
  if (m >= 0) { /* the same handle value, revived when every reference to it was released */
    int h = vmm_handle_find_locked(vmm_maps[m].handle);
    if (h >= 0) {
      vmm_handles[h].refs++;
      vmm_phys[vmm_handles[h].phys].handles++;
    } else if ((h = vmm_handle_new_locked(vmm_maps[m].phys)) >= 0) {
      vmm_handles[h].value = vmm_maps[m].handle;
    }
    *handle = (CUmemGenericAllocationHandle)vmm_maps[m].handle;
  }
  UNLOCK();
  return m >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
FAKE_EXPORT CUresult cuMemExportToShareableHandle(void *shareable, CUmemGenericAllocationHandle handle,
                                                  CUmemAllocationHandleType type, unsigned long long flags) {
  (void)flags;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  LOCK();
  int h = vmm_handle_find_locked((unsigned long long)handle), slot = -1;
  for (int i = 0; i < VMM_MAX && slot < 0; i++)
    if (!vmm_exports[i].fd) slot = i;
  int fd = -1, pfd[2];
  if (h >= 0 && slot >= 0 && pipe(pfd) == 0) { /* a descriptor with an inode of its own */
    close(pfd[1]);
    fd = pfd[0];
  }
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0) {
    vmm_exports[slot] = (struct vmm_export){.fd = fd, .ino = (unsigned long long)st.st_ino, .phys = vmm_handles[h].phys};
    vmm_phys[vmm_handles[h].phys].exports++;
    *(int *)shareable = fd;
  }
  UNLOCK();
  return fd >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
FAKE_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                    CUmemAllocationHandleType type) {
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  int fd = (int)(intptr_t)osHandle;
  struct stat st;
  LOCK();
  int h = -1;
  for (int i = 0; i < VMM_MAX && h < 0; i++)
    if (vmm_exports[i].fd == fd && fstat(fd, &st) == 0 && (unsigned long long)st.st_ino == vmm_exports[i].ino)
      h = vmm_handle_new_locked(vmm_exports[i].phys); /* a new handle of the same memory */
  if (h >= 0) *handle = (CUmemGenericAllocationHandle)vmm_handles[h].value;
  UNLOCK();
  return h >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
FAKE_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle) {
  LOCK();
  int h = vmm_handle_find_locked((unsigned long long)handle);
  if (h >= 0) {
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = vmm_phys[vmm_handles[h].phys].dev;
  }
  UNLOCK();
  return h >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- graph memory: allocation nodes are served from the device's graph pool when the graph is
 * launched or uploaded (the pool grows by roundup(need - its unused part, FAKE_CUDA_GRAPH_GRANULE));
 * an allocation stays live until a free node of the graph runs, cuMemFree/cuMemFreeAsync, or the
 * next launch of a graph instantiated with AUTO_FREE_ON_LAUNCH; the pool keeps freed memory until
 * cuDeviceGraphMemTrim (also after the graph is destroyed). Graphs run at once when launched. */

#define GRAPH_MAX 64
#define GNODE_MAX 32
struct gnode {
  CUgraphNodeType type;
  size_t bytes;
  int dev;
  unsigned long long dptr; /* alloc: its address; free: the address freed */
};
struct fgraph {
  int used;
  int n;
  struct gnode nodes[GNODE_MAX];
};
struct fexec {
  int used;
  struct fgraph *g;
  unsigned long long flags;
  int uploaded;
};
struct gpool {
  size_t reserved, used;
};
struct galloc {
  unsigned long long dptr;
  size_t size;
  int dev, live;
};
static struct fgraph fgraphs[GRAPH_MAX];
static struct fexec fexecs[GRAPH_MAX];
static struct gpool gpools[MAXDEV];
static struct galloc gallocs[GRAPH_MAX * GNODE_MAX];
static size_t graph_granule = 2u << 20;

FAKE_EXPORT CUresult cuGraphCreate(CUgraph *g, unsigned int flags) {
  (void)flags;
  LOCK();
  const char *e = getenv("FAKE_CUDA_GRAPH_GRANULE");
  if (e) graph_granule = strtoull(e, NULL, 10);
  struct fgraph *f = NULL;
  for (int i = 0; i < GRAPH_MAX && !f; i++)
    if (!fgraphs[i].used) f = &fgraphs[i];
  if (f) {
    memset(f, 0, sizeof *f);
    f->used = 1;
    *g = (CUgraph)f;
  }
  UNLOCK();
  return f ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
FAKE_EXPORT CUresult cuGraphDestroy(CUgraph g) {
  LOCK();
  ((struct fgraph *)g)->used = 0;
  UNLOCK();
  return CUDA_SUCCESS;
}
static struct gnode *gnode_add_locked(CUgraph g, CUgraphNode *out) {
  struct fgraph *f = (struct fgraph *)g;
  if (f->n >= GNODE_MAX) return NULL;
  struct gnode *n = &f->nodes[f->n++];
  memset(n, 0, sizeof *n);
  *out = (CUgraphNode)n;
  return n;
}
FAKE_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                            CUDA_MEM_ALLOC_NODE_PARAMS *p) {
  (void)deps; (void)ndeps;
  if (!p || p->bytesize == 0 || p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  LOCK();
  struct gnode *n = gnode_add_locked(g, node);
  if (n) {
    n->type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    n->bytes = p->bytesize;
    n->dev = p->poolProps.location.id;
    n->dptr = next_addr;
    next_addr += (p->bytesize + 0x1fffff) & ~0x1fffffull;
    p->dptr = (CUdeviceptr)n->dptr;
  }
  UNLOCK();
  return n ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
FAKE_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                           CUdeviceptr dptr) {
  (void)deps; (void)ndeps;
  LOCK();
  struct gnode *n = gnode_add_locked(g, node);
  if (n) {
    n->type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    n->dptr = (unsigned long long)dptr;
  }
  UNLOCK();
  return n ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
FAKE_EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t ndeps) {
  (void)deps; (void)ndeps;
  LOCK();
  struct gnode *n = gnode_add_locked(g, node);
  if (n) n->type = CU_GRAPH_NODE_TYPE_EMPTY;
  UNLOCK();
  return n ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
FAKE_EXPORT CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *num) {
  struct fgraph *f = (struct fgraph *)g;
  LOCK();
  if (nodes)
    for (int i = 0; i < f->n && (size_t)i < *num; i++) nodes[i] = (CUgraphNode)&f->nodes[i];
  *num = (size_t)f->n;
  UNLOCK();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type) {
  *type = ((struct gnode *)node)->type;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS *p) {
  struct gnode *n = (struct gnode *)node;
  if (n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return CUDA_ERROR_INVALID_VALUE;
  memset(p, 0, sizeof *p);
  p->bytesize = n->bytes;
  p->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p->poolProps.location.id = n->dev;
  p->dptr = (CUdeviceptr)n->dptr;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g, unsigned long long flags) {
  LOCK();
  struct fexec *x = NULL;
  for (int i = 0; i < GRAPH_MAX && !x; i++)
    if (!fexecs[i].used) x = &fexecs[i];
  if (x) {
    *x = (struct fexec){.used = 1, .g = (struct fgraph *)g, .flags = flags};
    *exec = (CUgraphExec)x;
  }
  UNLOCK();
  return x ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
FAKE_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *exec, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  CUresult rc = cuGraphInstantiateWithFlags(exec, g, p ? p->flags : 0);
  if (p) p->result_out = rc == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  return rc;
}
FAKE_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  LOCK();
  ((struct fexec *)exec)->used = 0; /* live allocations and the pool's memory stay */
  UNLOCK();
  return CUDA_SUCCESS;
}
static struct galloc *galloc_find_locked(unsigned long long dptr) {
  for (int i = 0; i < GRAPH_MAX * GNODE_MAX; i++)
    if (gallocs[i].live && gallocs[i].dptr == dptr) return &gallocs[i];
  return NULL;
}
static void galloc_free_locked(struct galloc *a) {
  gpools[a->dev].used -= a->size;
  a->live = 0;
}
/* Maps what the exec's allocation nodes need (pool growth), then runs the graph. */
static CUresult graph_mem_launch_locked(struct fexec *x) {
  struct fgraph *f = x->g;
  if (x->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
    for (int i = 0; i < f->n; i++) {
      struct galloc *a = f->nodes[i].type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ? galloc_find_locked(f->nodes[i].dptr) : NULL;
      if (a) galloc_free_locked(a);
    }
  size_t need[MAXDEV] = {0};
  for (int i = 0; i < f->n; i++) {
    if (f->nodes[i].type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) continue;
    if (galloc_find_locked(f->nodes[i].dptr)) return CUDA_ERROR_INVALID_VALUE; /* still live */
    need[f->nodes[i].dev] += f->nodes[i].bytes;
  }
  for (int d = 0; d < MAXDEV; d++) {
    struct gpool *gp = &gpools[d];
    size_t unused = gp->reserved - gp->used;
    if (need[d] > unused) {
      size_t grow = round_up(need[d] - unused, graph_granule);
      if (used_mem[phys_of(d)] + grow > total_mem) return CUDA_ERROR_OUT_OF_MEMORY;
      used_mem[phys_of(d)] += grow;
      gp->reserved += grow;
    }
  }
  for (int i = 0; i < f->n; i++) {
    struct gnode *n = &f->nodes[i];
    if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
      for (int k = 0; k < GRAPH_MAX * GNODE_MAX; k++)
        if (!gallocs[k].live) {
          gallocs[k] = (struct galloc){.dptr = n->dptr, .size = n->bytes, .dev = n->dev, .live = 1};
          gpools[n->dev].used += n->bytes;
          break;
        }
    } else if (n->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
      struct galloc *a = galloc_find_locked(n->dptr);
      if (a) galloc_free_locked(a);
    }
  }
  return CUDA_SUCCESS;
}
static CUresult graph_mem_on_launch(CUgraphExec exec) {
  LOCK();
  CUresult rc = graph_mem_launch_locked((struct fexec *)exec);
  UNLOCK();
  return rc;
}
FAKE_EXPORT CUresult cuGraphUpload(CUgraphExec exec, CUstream s) {
  (void)s;
  LOCK();
  struct fexec *x = (struct fexec *)exec;
  struct fgraph *f = x->g;
  size_t need[MAXDEV] = {0};
  for (int i = 0; i < f->n; i++)
    if (f->nodes[i].type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) need[f->nodes[i].dev] += f->nodes[i].bytes;
  CUresult rc = CUDA_SUCCESS;
  for (int d = 0; d < MAXDEV; d++) {
    struct gpool *gp = &gpools[d];
    size_t unused = gp->reserved - gp->used;
    if (need[d] <= unused) continue;
    size_t grow = round_up(need[d] - unused, graph_granule);
    if (used_mem[phys_of(d)] + grow > total_mem) {
      rc = CUDA_ERROR_OUT_OF_MEMORY;
      break;
    }
    used_mem[phys_of(d)] += grow;
    gp->reserved += grow;
  }
  UNLOCK();
  return rc;
}
FAKE_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream s) { return cuGraphUpload(exec, s); }
/* cuMemFree / cuMemFreeAsync of a graph allocation outside its graph: 1 when it was one. */
static int graph_mem_free(unsigned long long dptr) {
  struct galloc *a = galloc_find_locked(dptr);
  if (a) galloc_free_locked(a);
  return a != NULL;
}
FAKE_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev) {
  if (dev < 0 || dev >= nvis) return CUDA_ERROR_INVALID_DEVICE;
  LOCK();
  struct gpool *gp = &gpools[dev];
  size_t keep = round_up(gp->used, graph_granule);
  if (gp->reserved > keep) {
    used_mem[phys_of(dev)] -= gp->reserved - keep;
    gp->reserved = keep;
  }
  UNLOCK();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void *value) {
  if (dev < 0 || dev >= nvis) return CUDA_ERROR_INVALID_DEVICE;
  LOCK();
  cuuint64_t v = attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT ? gpools[dev].reserved
                 : attr == CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT   ? gpools[dev].used
                                                                : 0;
  UNLOCK();
  *(cuuint64_t *)value = v;
  return CUDA_SUCCESS;
}

/* ---- stream capture: stream-ordered allocations on a capturing stream become allocation nodes of
 * the captured graph (no pool is touched). A capture in global or thread-local mode is invalidated
 * when its thread queries a memory pool meanwhile (cuDeviceGetMemPool, cuMemPoolGetAttribute), and
 * cuStreamEndCapture then fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: modelled on what was
 * measured on H100 (driver 580) with a library that queried the pool inside cudaMallocAsync. */

struct fcapture {
  CUstream s;
  struct fgraph *g;
  CUstreamCaptureMode mode;
  pthread_t thread;
  int used, invalid;
};
static struct fcapture fcaptures[16];

static struct fcapture *capture_of_locked(CUstream s) {
  for (int i = 0; i < 16; i++)
    if (fcaptures[i].used && fcaptures[i].s == s) return &fcaptures[i];
  return NULL;
}
static void capture_unsafe_call(void) {
  LOCK();
  for (int i = 0; i < 16; i++)
    if (fcaptures[i].used && fcaptures[i].mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
        pthread_equal(fcaptures[i].thread, pthread_self()))
      fcaptures[i].invalid = 1;
  UNLOCK();
}
static int capture_status(CUstream s) {
  LOCK();
  int on = capture_of_locked(s) != NULL;
  UNLOCK();
  return on;
}
FAKE_EXPORT CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode) {
  CUgraph g;
  if (cuGraphCreate(&g, 0) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
  LOCK();
  struct fcapture *c = NULL;
  for (int i = 0; i < 16 && !c; i++)
    if (!fcaptures[i].used) c = &fcaptures[i];
  if (c) *c = (struct fcapture){.s = s, .g = (struct fgraph *)g, .mode = mode, .thread = pthread_self(), .used = 1};
  UNLOCK();
  return c ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
FAKE_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *g) {
  LOCK();
  struct fcapture *c = capture_of_locked(s);
  CUresult rc = !c ? CUDA_ERROR_ILLEGAL_STATE : c->invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
  if (c) {
    if (rc == CUDA_SUCCESS) *g = (CUgraph)c->g;
    else c->g->used = 0;
    c->used = 0;
  }
  UNLOCK();
  return rc;
}
/* cuMemAllocAsync on a capturing stream: an allocation node, 1 when the stream captures. */
static int capture_alloc(CUstream s, size_t size, CUdeviceptr *dptr) {
  LOCK();
  struct fcapture *c = capture_of_locked(s);
  CUgraphNode node;
  struct gnode *n = c && cur ? gnode_add_locked((CUgraph)c->g, &node) : NULL;
  if (n) {
    n->type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    n->bytes = size;
    n->dev = cur->dev;
    n->dptr = next_addr;
    next_addr += (size + 0x1fffff) & ~0x1fffffull;
    *dptr = (CUdeviceptr)n->dptr;
  }
  UNLOCK();
  return c != NULL;
}

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

/* ---- cuGetProcAddress: base name + cudaVersion + flags -> variant, like the driver */

static const struct proc procs[] = {
    P(cuInit), P(cuDriverGetVersion), P(cuDeviceGetCount), P(cuDeviceGet), P(cuDeviceGetUuid),
    P(cuDeviceGetUuid_v2), P(cuDeviceTotalMem_v2), P(cuDevicePrimaryCtxRetain),
    P(cuDevicePrimaryCtxRelease_v2), P(cuDevicePrimaryCtxReset_v2), P(cuCtxCreate_v2), P(cuCtxCreate_v3),
    P(cuCtxCreate_v4), P(cuCtxDestroy_v2), P(cuCtxSetCurrent), P(cuCtxGetCurrent), P(cuCtxGetDevice),
    P(cuCtxSynchronize), P(cuMemAlloc_v2), P(cuMemAllocManaged), P(cuMemAllocPitch_v2), P(cuMemFree_v2),
    P(cuMemGetInfo_v2), P(cuDeviceGetMemPool), P(cuMemPoolCreate), P(cuMemPoolDestroy),
    P(cuMemPoolGetAttribute), P(cuMemPoolSetAttribute), P(cuMemPoolTrimTo), P(cuMemAllocAsync), P(cuMemAllocAsync_ptsz),
    P(cuMemAllocFromPoolAsync), P(cuMemAllocFromPoolAsync_ptsz), P(cuMemFreeAsync), P(cuMemFreeAsync_ptsz),
    P(cuStreamSynchronize), P(cuStreamSynchronize_ptsz), P(cuEventSynchronize), P(cuMemCreate), P(cuMemRelease), P(cuArrayCreate_v2), P(cuArray3DCreate_v2),
    P(cuArrayDestroy), P(cuMipmappedArrayCreate), P(cuMipmappedArrayDestroy), P(cuLaunchKernel),
    P(cuLaunchKernel_ptsz), P(cuLaunchKernelEx), P(cuLaunchKernelEx_ptsz), P(cuLaunchCooperativeKernel),
    P(cuLaunchCooperativeKernel_ptsz), P(cuGraphLaunch), P(cuGraphLaunch_ptsz), P(cuEventCreate),
    P(cuEventRecord), P(cuEventElapsedTime_v2),
};
/* Versioned variants: base -> (name, first cudaVersion). Highest applicable wins. */
static const struct { const char *base, *name; int since; } variants[] = {
    {"cuMemAlloc", "cuMemAlloc_v2", 3020},         {"cuMemFree", "cuMemFree_v2", 3020},
    {"cuMemAllocPitch", "cuMemAllocPitch_v2", 3020}, {"cuMemGetInfo", "cuMemGetInfo_v2", 3020},
    {"cuDeviceTotalMem", "cuDeviceTotalMem_v2", 3020}, {"cuCtxCreate", "cuCtxCreate_v2", 3020},
    {"cuCtxCreate", "cuCtxCreate_v3", 11040},       {"cuCtxCreate", "cuCtxCreate_v4", 12050},
    {"cuCtxDestroy", "cuCtxDestroy_v2", 4000},      {"cuArrayCreate", "cuArrayCreate_v2", 3020},
    {"cuArray3DCreate", "cuArray3DCreate_v2", 3020},
    {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 11000},
    {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2", 11000},
    {"cuDeviceGetUuid", "cuDeviceGetUuid_v2", 11040}, {"cuEventElapsedTime", "cuEventElapsedTime_v2", 12080},
    {"cuGraphInstantiate", "cuGraphInstantiate_v2", 11000},
    {"cuGraphInstantiate", "cuGraphInstantiateWithFlags", 12000},
};

static CUresult tramp_cuMemAlloc_v2(CUdeviceptr *d, size_t n) { return cuMemAlloc_v2(d, n); }
static CUresult tramp_cuMemFree_v2(CUdeviceptr d) { return cuMemFree_v2(d); }

static void *lookup(const char *name) {
  for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++)
    if (strcmp(procs[i].name, name) == 0) return procs[i].fn;
  for (size_t i = 0; i < sizeof mem_procs / sizeof mem_procs[0]; i++)
    if (strcmp(mem_procs[i].name, name) == 0) return mem_procs[i].fn;
  return fr_lookup(name);
}

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int ver, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *status);
static void *resolve(const char *symbol, int ver, cuuint64_t flags) {
  const char *name = symbol;
  int best = -1;
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
    if (strcmp(variants[i].base, symbol) == 0 && variants[i].since <= ver && variants[i].since > best) {
      best = variants[i].since;
      name = variants[i].name;
    }
  if (strcmp(symbol, "cuGetProcAddress") == 0) return ver >= 12000 ? (void *)cuGetProcAddress_v2 : NULL;
  void *fn = NULL;
  if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s_ptsz", name);
    fn = lookup(buf);
  }
  if (!fn) fn = lookup(name);
  if (fn && trampolines) {
    if (fn == (void *)cuMemAlloc_v2) fn = (void *)tramp_cuMemAlloc_v2;
    else if (fn == (void *)cuMemFree_v2) fn = (void *)tramp_cuMemFree_v2;
  }
  return fn;
}

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int ver, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *status) {
  void *fn = resolve(symbol, ver, flags);
  if (status) *status = fn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  *pfn = fn;
  return fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
FAKE_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int ver, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, ver, flags, NULL);
}

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

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
 *   FAKE_CUDA_TRAMPOLINES=1         cuGetProcAddress returns private trampolines instead of the
 *                                   exported functions (tests libvgpu's version-table fallback)
 *   CUDA_VISIBLE_DEVICES            honoured like the real driver: indices or uuids
 *   FAKE_CUDA_KERNEL_US=<us>        every launch is a kernel running that long (default 0: done at
 *                                   once). Kernels run one at a time per device in launch order,
 *                                   like a GPU whose kernels fill every SM: a kernel starts at
 *                                   max(launch time, end of the device's previous kernel). An event
 *                                   completes at the end of the last kernel launched before it on
 *                                   its stream (at once on an idle stream); cuEventQuery,
 *                                   cuEventSynchronize, cuStreamSynchronize, cuCtxSynchronize and
 *                                   cuEventElapsedTime obey those times (CLOCK_MONOTONIC).
 * Extra entry points for tests: fakeCudaLaunchCount(), fakeCudaDeviceUsed(int ordinal) (the
 * physical bytes in use: plain allocations plus what every pool reserves), fakeCudaKernelsDone()
 * (kernels whose end time has passed) and fakeCudaBusyNs(int ordinal) (kernel time executed so
 * far on a device).
 *
 * Pools behave like the driver's (measured on H100/H200): a request that does not fit the free
 * space at the pool's end grows the pool by roundup(request - that space, granule); a stream-ordered
 * free lowers USED at once, but the block is reusable (and releasable) only after the host
 * synchronizes (cuStreamSynchronize/cuCtxSynchronize/cuEventSynchronize), which also releases what
 * the pool holds above its release threshold; cuMemPoolTrimTo releases unused memory down to its
 * argument, never blocks whose free was not yet seen complete.
 *
 * Thread safety: one mutex around all state.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#undef cuGetProcAddress
#undef cuDeviceGetUuid
#undef cuEventElapsedTime

#define FAKE_EXPORT __attribute__((visibility("default")))
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
#define MAXPOOLS 64
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

FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  NEED_INIT();
  if (dev < 0 || dev >= nvis) return CUDA_ERROR_INVALID_DEVICE;
  LOCK();
  primary_refs[dev]++;
  UNLOCK();
  *pctx = (CUcontext)&primary_ctx[dev];
  return CUDA_SUCCESS;
}

static void free_ctx_allocs_locked(struct ctx *c) {
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
  if (primary_refs[dev] > 0 && --primary_refs[dev] == 0) free_ctx_allocs_locked(&primary_ctx[dev]);
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
  if (a) release_locked(a);
  UNLOCK();
  return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
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

FAKE_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
  NEED_INIT();
  if (dev < 0 || dev >= nvis) return CUDA_ERROR_INVALID_DEVICE;
  *pool = (CUmemoryPool)&default_pool[dev];
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
  struct pool *p = calloc(1, sizeof *p);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  p->dev = props ? props->location.id : 0;
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
  used_mem[phys_of(p->dev)] -= p->reserved;
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
  (void)s;
  if (!cur) return CUDA_ERROR_INVALID_CONTEXT;
  return pool_alloc(dptr, size, &default_pool[cur->dev]);
}
FAKE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s) {
  return cuMemAllocAsync(dptr, size, s);
}
FAKE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s) {
  (void)s;
  return pool_alloc(dptr, size, (struct pool *)pool);
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
  UNLOCK();
  return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
FAKE_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) { return cuMemFreeAsync(dptr, s); }
static long long stream_tail_ns(CUstream s);
FAKE_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  wait_until_ns(stream_tail_ns(s));
  return cuCtxSynchronize();
}
FAKE_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s) { return cuStreamSynchronize(s); }
FAKE_EXPORT CUresult cuStreamCreate(CUstream *s, unsigned int flags) {
  (void)flags;
  static char streams[1024];
  static int n;
  *s = (CUstream)&streams[__atomic_fetch_add(&n, 1, __ATOMIC_RELAXED) % 1024];
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
  (void)s;
  *pctx = (CUcontext)cur;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st) {
  (void)s;
  *st = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  *mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  return CUDA_SUCCESS;
}

/* ---- VMM */

FAKE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags) {
  (void)flags;
  if (!prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
      prop->location.id >= nvis)
    return CUDA_ERROR_INVALID_DEVICE;
  LOCK();
  struct ctx *saved = cur;
  struct ctx tmp = {.dev = prop->location.id};
  cur = &tmp;
  unsigned long long a = 0;
  CUresult rc = alloc_locked(&a, size, 2, NULL);
  if (rc == CUDA_SUCCESS) find_locked(a, 2)->ctx = NULL;
  cur = saved;
  UNLOCK();
  if (rc == CUDA_SUCCESS) *handle = (CUmemGenericAllocationHandle)a;
  return rc;
}
FAKE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  LOCK();
  struct alloc *a = find_locked((unsigned long long)handle, 2);
  if (a) release_locked(a);
  UNLOCK();
  return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- arrays: the "driver" rounds every array up to 64 KiB */

static size_t texel(CUarray_format f) {
  switch ((int)f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    default: return 4;
  }
}
static size_t arr_size(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch) {
  size_t s = texel(f) * (ch ? ch : 1) * (w ? w : 1) * (h ? h : 1) * (d ? d : 1);
  return round_up(s, 65536);
}
static CUresult arr_alloc(CUarray *h, size_t size, int kind) {
  LOCK();
  unsigned long long a = 0;
  CUresult rc = alloc_locked(&a, size, kind, NULL);
  UNLOCK();
  if (rc == CUDA_SUCCESS) *h = (CUarray)(uintptr_t)a;
  return rc;
}
FAKE_EXPORT CUresult cuArrayCreate_v2(CUarray *h, const CUDA_ARRAY_DESCRIPTOR *d) {
  return arr_alloc(h, arr_size(d->Width, d->Height, 1, d->Format, d->NumChannels), 3);
}
FAKE_EXPORT CUresult cuArray3DCreate_v2(CUarray *h, const CUDA_ARRAY3D_DESCRIPTOR *d) {
  return arr_alloc(h, arr_size(d->Width, d->Height, d->Depth, d->Format, d->NumChannels), 3);
}
static CUresult arr_free(uintptr_t h, int kind) {
  LOCK();
  struct alloc *a = find_locked((unsigned long long)h, kind);
  if (a) release_locked(a);
  UNLOCK();
  return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
FAKE_EXPORT CUresult cuArrayDestroy(CUarray h) { return arr_free((uintptr_t)h, 3); }
static CUresult arr_req(CUDA_ARRAY_MEMORY_REQUIREMENTS *req, uintptr_t h, int kind) {
  LOCK();
  struct alloc *a = find_locked((unsigned long long)h, kind);
  if (a) {
    memset(req, 0, sizeof *req);
    req->size = a->size;
    req->alignment = 65536;
  }
  UNLOCK();
  return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
FAKE_EXPORT CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *req, CUarray a, CUdevice d) {
  (void)d;
  return arr_req(req, (uintptr_t)a, 3);
}
FAKE_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *h, const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels) {
  size_t s = 0;
  for (unsigned l = 0; l < (levels ? levels : 1); l++) {
    size_t w = d->Width >> l, hh = d->Height >> l, dd = d->Depth >> l;
    s += arr_size(w ? w : 1, d->Height ? (hh ? hh : 1) : 0, d->Depth ? (dd ? dd : 1) : 0, d->Format,
                  d->NumChannels);
  }
  return arr_alloc((CUarray *)h, s, 4);
}
FAKE_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray h) { return arr_free((uintptr_t)h, 4); }
FAKE_EXPORT CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *req,
                                                           CUmipmappedArray m, CUdevice d) {
  (void)d;
  return arr_req(req, (uintptr_t)m, 4);
}

/* ---- launches and events: a serial engine per device (FAKE_CUDA_KERNEL_US), events complete at
 * the end of their stream's last kernel */

static long long kernel_ns = -1; /* -1: not read yet */
static long long engine_free_ns[MAXDEV]; /* end of the device's last kernel, by physical index */
static long long busy_ns[MAXDEV];
#define MAXSTREAMQ 256
static struct {
  CUstream s;
  int phys;
  long long tail_ns;
} stream_q[MAXSTREAMQ];
static int stream_qn;
#define MAXENDS 65536
static long long kernel_ends[MAXENDS]; /* ring of recent kernel end times, for fakeCudaKernelsDone */
static unsigned long kernels_launched, kernels_counted;

static long long mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
static void wait_until_ns(long long t) {
  for (long long now = mono_ns(); now < t; now = mono_ns()) {
    long long d = t - now;
    struct timespec ts = {(time_t)(d / 1000000000LL), (long)(d % 1000000000LL)};
    nanosleep(&ts, NULL);
  }
}
static long long kernel_duration_ns(void) {
  if (__atomic_load_n(&kernel_ns, __ATOMIC_ACQUIRE) < 0) {
    const char *e = getenv("FAKE_CUDA_KERNEL_US");
    long long v = e ? strtoll(e, NULL, 10) * 1000 : 0;
    __atomic_store_n(&kernel_ns, v > 0 ? v : 0, __ATOMIC_RELEASE);
  }
  return kernel_ns;
}
static int cur_phys(void) { return cur ? phys_of(cur->dev) : 0; }
/* The legacy/per-thread default stream and NULL are one stream per device here. */
static long long *stream_tail_locked(CUstream s, int phys) {
  if (s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) s = NULL;
  for (int i = 0; i < stream_qn; i++)
    if (stream_q[i].s == s && stream_q[i].phys == phys) return &stream_q[i].tail_ns;
  int i = stream_qn < MAXSTREAMQ ? stream_qn++ : (int)(((uintptr_t)s >> 4) % MAXSTREAMQ);
  stream_q[i].s = s;
  stream_q[i].phys = phys;
  stream_q[i].tail_ns = 0;
  return &stream_q[i].tail_ns;
}
static long long stream_tail_ns(CUstream s) {
  LOCK();
  long long t = *stream_tail_locked(s, cur_phys());
  UNLOCK();
  return t;
}
static long long device_tail_ns(void) {
  LOCK();
  long long t = engine_free_ns[cur_phys()];
  UNLOCK();
  return t;
}
/* A kernel on stream s: starts when the device's engine is free (and not before now). */
static void enqueue_kernel(CUstream s) {
  long long d = kernel_duration_ns();
  if (d == 0 || !cur) return;
  LOCK();
  int phys = cur_phys();
  long long now = mono_ns(), start = engine_free_ns[phys] > now ? engine_free_ns[phys] : now;
  long long *tail = stream_tail_locked(s, phys);
  if (*tail > start) start = *tail;
  engine_free_ns[phys] = *tail = start + d;
  busy_ns[phys] += d;
  kernel_ends[kernels_launched++ % MAXENDS] = start + d;
  UNLOCK();
}

static CUresult launched(void) {
  __atomic_fetch_add(&launches, 1, __ATOMIC_RELAXED);
  return cur ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
FAKE_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz, unsigned sm, CUstream s, void **p, void **e) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sm; (void)p; (void)e;
  enqueue_kernel(s);
  return launched();
}
FAKE_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                         unsigned by, unsigned bz, unsigned sm, CUstream s, void **p, void **e) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sm, s, p, e);
}
FAKE_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **p, void **e) {
  (void)f; (void)p; (void)e;
  enqueue_kernel(c ? c->hStream : NULL);
  return launched();
}
FAKE_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **p, void **e) {
  return cuLaunchKernelEx(c, f, p, e);
}
FAKE_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                               unsigned bx, unsigned by, unsigned bz, unsigned sm,
                                               CUstream s, void **p) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sm, s, p, NULL);
}
FAKE_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                                    unsigned bx, unsigned by, unsigned bz, unsigned sm,
                                                    CUstream s, void **p) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sm, s, p, NULL);
}
FAKE_EXPORT CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *l, unsigned n, unsigned fl) {
  (void)fl;
  for (unsigned i = 0; i < n; i++) {
    enqueue_kernel(l ? l[i].hStream : NULL);
    launched();
  }
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGraphLaunch(CUgraphExec g, CUstream s) {
  (void)g;
  enqueue_kernel(s);
  return launched();
}
FAKE_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s) { return cuGraphLaunch(g, s); }

/* An event holds its completion time (CLOCK_MONOTONIC ns); 0 = never recorded (complete). */
FAKE_EXPORT CUresult cuEventCreate(CUevent *e, unsigned int flags) {
  (void)flags;
  *e = (CUevent)calloc(1, sizeof(long long));
  return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
FAKE_EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  free(e);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  LOCK();
  long long now = mono_ns(), tail = *stream_tail_locked(s, cur_phys());
  __atomic_store_n((long long *)e, tail > now ? tail : now, __ATOMIC_RELEASE);
  UNLOCK();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventQuery(CUevent e) {
  return __atomic_load_n((long long *)e, __ATOMIC_ACQUIRE) <= mono_ns() ? CUDA_SUCCESS
                                                                        : CUDA_ERROR_NOT_READY;
}
FAKE_EXPORT CUresult cuEventSynchronize(CUevent e) {
  wait_until_ns(__atomic_load_n((long long *)e, __ATOMIC_ACQUIRE));
  LOCK();
  sync_pools_locked();
  UNLOCK();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
  long long ta = __atomic_load_n((long long *)a, __ATOMIC_ACQUIRE);
  long long tb = __atomic_load_n((long long *)b, __ATOMIC_ACQUIRE);
  long long now = mono_ns();
  if (ta == 0 || tb == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (ta > now || tb > now) return CUDA_ERROR_NOT_READY;
  *ms = (float)((double)(tb - ta) / 1e6);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) { return cuEventElapsedTime_v2(ms, a, b); }

/* Kernels whose end time has passed (FAKE_CUDA_KERNEL_US > 0). */
FAKE_EXPORT unsigned long fakeCudaKernelsDone(void) {
  LOCK();
  long long now = mono_ns();
  unsigned long lo = kernels_launched > MAXENDS ? kernels_launched - MAXENDS : 0;
  if (kernels_counted < lo) kernels_counted = lo;
  while (kernels_counted < kernels_launched && kernel_ends[kernels_counted % MAXENDS] <= now)
    kernels_counted++; /* ends are increasing: the engine is serial */
  unsigned long n = kernels_counted;
  UNLOCK();
  return n;
}
/* Kernel time executed on a device (visible ordinal) up to now. */
FAKE_EXPORT long long fakeCudaBusyNs(int ordinal) {
  LOCK();
  int phys = ordinal >= 0 && ordinal < nvis ? vis[ordinal] : 0;
  long long now = mono_ns(), b = busy_ns[phys];
  if (engine_free_ns[phys] > now) b -= engine_free_ns[phys] - now; /* not run yet */
  UNLOCK();
  return b;
}

FAKE_EXPORT unsigned long fakeCudaLaunchCount(void) { return __atomic_load_n(&launches, __ATOMIC_RELAXED); }
FAKE_EXPORT size_t fakeCudaDeviceUsed(int ordinal) {
  LOCK();
  size_t v = (ordinal >= 0 && ordinal < nvis) ? used_mem[phys_of(ordinal)] : 0;
  UNLOCK();
  return v;
}

/* ---- cuGetProcAddress: base name + cudaVersion + flags -> variant, like the driver */

struct proc { const char *name; void *fn; };
#define P(n) {#n, (void *)n}
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
};

static CUresult tramp_cuMemAlloc_v2(CUdeviceptr *d, size_t n) { return cuMemAlloc_v2(d, n); }
static CUresult tramp_cuMemFree_v2(CUdeviceptr d) { return cuMemFree_v2(d); }

static void *lookup(const char *name) {
  for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++)
    if (strcmp(procs[i].name, name) == 0) return procs[i].fn;
  return NULL;
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

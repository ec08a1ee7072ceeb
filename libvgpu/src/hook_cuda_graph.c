/*
 * hook_cuda_graph.c — graph memory: allocation nodes (cuGraphAddMemAllocNode, and stream-ordered
 * allocations captured into a graph) are served from the device's graph memory pool, which the
 * driver grows when a graph is uploaded or launched and shrinks only on cuDeviceGraphMemTrim (it
 * keeps freed blocks for the next launch). Like the stream-ordered pools (hook_cuda_mem.c), it is
 * counted as what it reserves (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, per device, this process):
 *
 *   instantiate  the graph's allocation nodes are summed per device (child graphs included) and
 *                remembered for the executable graph; instantiating one whose allocations cannot
 *                fit (beyond what the pool already holds unused) fails with OUT_OF_MEMORY;
 *   launch/upload  the growth the launch can cause (its allocations minus the pool's unused part,
 *                rounded up to the growth step) is reserved first, refused with OUT_OF_MEMORY when
 *                it does not fit; the launch is not made;
 *   re-read      the count moves to what the pool reserves at the next launch or upload of a graph
 *                with allocations, after cuGraphExecDestroy, cuDeviceGraphMemTrim, frees, every
 *                synchronize hook and cuMemGetInfo. Growth beyond the reservation is counted as it
 *                is (it exists) and logged.
 *
 * Threading: g_graph_mu orders reservations and re-reads (lock order: g_graph_mu -> the region's
 * locks -> the tracking table's mutex).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hook.h"

#define VGPU_GRAPH_DEVICES 64
#define VGPU_GRAPH_WALK_DEPTH 8
/* Executable graphs are tracked in the table: one summary record (key = the exec, bytes = all its
 * allocations, aux = mask of devices), and one per device (key = exec << 6 | device, high bit set). */
#define EXEC_DEV_KEY(exec, dev) ((((uint64_t)(uintptr_t)(exec)) << 6 | (uint64_t)(dev)) | (1ull << 63))

static pthread_mutex_t g_graph_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_acc[VGPU_GRAPH_DEVICES];     /* counted bytes of each device's graph pool */
static uint64_t g_pending[VGPU_GRAPH_DEVICES]; /* reserved ahead of launches, not yet re-read */
static uint64_t g_active_mask;                 /* devices whose graph pool we count (relaxed reads) */
/* Growth step for the reservation ahead: the pools' measured 32 MiB, following the driver down
 * (greatest common divisor of every growth seen). Under g_graph_mu. */
static uint64_t g_graph_step = 32ull << 20;

static void graph_atfork_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g_graph_mu = fresh;
  memset(g_acc, 0, sizeof g_acc);
  memset(g_pending, 0, sizeof g_pending);
  __atomic_store_n(&g_active_mask, 0, __ATOMIC_RELAXED);
}
__attribute__((constructor)) static void graph_ctor(void) { pthread_atfork(NULL, NULL, graph_atfork_child); }

static uint64_t graph_attr(int dev, CUgraphMem_attribute attr) {
  cuuint64_t v = 0;
  if (!vgpu_cuda.cuDeviceGetGraphMemAttribute ||
      VGPU_CALL_REAL(cuDeviceGetGraphMemAttribute, ((CUdevice)dev, attr, &v)) != CUDA_SUCCESS)
    return 0;
  return (uint64_t)v;
}

/* Caller holds g_graph_mu. Moves device `dev`'s count to what its graph pool reserves now. */
static void graph_settle(int dev) {
  int ridx = vgpu_ridx((CUdevice)dev);
  uint64_t now = graph_attr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
  uint64_t have = g_acc[dev] + g_pending[dev];
  if (now > g_acc[dev]) g_graph_step = vgpu_gcd_u64(g_graph_step, now - g_acc[dev]);
  if (now > have) {
    if (vgpu_mem_reserve(ridx, now - have, VGPU_MEM_DATA) != 0) {
      /* It exists already: count the truth, never hide memory. */
      VGPU_LOG_ERROR("graph memory pool of device %d grew %llu bytes beyond what was reserved",
                     dev, (unsigned long long)(now - have));
      vgpu_mem_add(ridx, now - have, VGPU_MEM_DATA);
    }
  } else if (now < have) {
    vgpu_mem_release(ridx, have - now, VGPU_MEM_DATA);
  }
  g_acc[dev] = now;
  g_pending[dev] = 0;
}

static void graph_settle_mask(uint64_t mask) {
  for (int d = 0; d < VGPU_GRAPH_DEVICES; d++)
    if (mask & (1ull << d)) graph_settle(d);
}

void vgpu_graph_mem_refresh(void) {
  uint64_t mask = __atomic_load_n(&g_active_mask, __ATOMIC_RELAXED);
  if (!mask) return;
  pthread_mutex_lock(&g_graph_mu);
  graph_settle_mask(mask);
  pthread_mutex_unlock(&g_graph_mu);
}

/* Caller holds g_graph_mu. Reserves the growth `need` more bytes of allocations can cause on
 * `dev`'s graph pool, after re-reading it. Returns false (OOM logged) when it does not fit. */
static bool graph_reserve_ahead(int dev, uint64_t need) {
  graph_settle(dev);
  uint64_t used = graph_attr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
  uint64_t headroom = g_acc[dev] > used ? g_acc[dev] - used : 0;
  if (need <= headroom) return true;
  uint64_t grow = need - headroom, step = g_graph_step;
  if (step && grow % step) grow += step - grow % step;
  if (vgpu_mem_reserve(vgpu_ridx((CUdevice)dev), grow, VGPU_MEM_DATA) != 0) return false;
  g_pending[dev] += grow;
  return true;
}

/* ---- what a graph allocates */

struct graph_need {
  uint64_t bytes[VGPU_GRAPH_DEVICES];
  uint64_t mask;
};

static void walk_graph(CUgraph g, struct graph_need *need, int depth) {
  if (!g || depth > VGPU_GRAPH_WALK_DEPTH || !vgpu_cuda.cuGraphGetNodes || !vgpu_cuda.cuGraphNodeGetType)
    return;
  size_t n = 0;
  if (VGPU_CALL_REAL(cuGraphGetNodes, (g, NULL, &n)) != CUDA_SUCCESS || n == 0) return;
  CUgraphNode *nodes = calloc(n, sizeof *nodes);
  if (!nodes) return;
  if (VGPU_CALL_REAL(cuGraphGetNodes, (g, nodes, &n)) == CUDA_SUCCESS) {
    for (size_t i = 0; i < n; i++) {
      CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
      if (VGPU_CALL_REAL(cuGraphNodeGetType, (nodes[i], &type)) != CUDA_SUCCESS) continue;
      if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && vgpu_cuda.cuGraphMemAllocNodeGetParams) {
        CUDA_MEM_ALLOC_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        if (VGPU_CALL_REAL(cuGraphMemAllocNodeGetParams, (nodes[i], &p)) != CUDA_SUCCESS) continue;
        int dev = p.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? p.poolProps.location.id : -1;
        if (dev < 0 || dev >= VGPU_GRAPH_DEVICES) continue;
        need->bytes[dev] += p.bytesize;
        need->mask |= 1ull << dev;
      } else if (type == CU_GRAPH_NODE_TYPE_GRAPH && vgpu_cuda.cuGraphChildGraphNodeGetGraph) {
        CUgraph child = NULL;
        if (VGPU_CALL_REAL(cuGraphChildGraphNodeGetGraph, (nodes[i], &child)) == CUDA_SUCCESS)
          walk_graph(child, need, depth + 1);
      }
    }
  }
  free(nodes);
}

/* Before instantiating: what the graph allocates, and whether it can ever fit. */
static bool instantiate_pre(CUgraph graph, struct graph_need *need) {
  memset(need, 0, sizeof *need);
  walk_graph(graph, need, 0);
  if (!need->mask) return true;
  pthread_mutex_lock(&g_graph_mu);
  __atomic_fetch_or(&g_active_mask, need->mask, __ATOMIC_RELAXED);
  bool ok = true;
  for (int d = 0; d < VGPU_GRAPH_DEVICES && ok; d++)
    if (need->mask & (1ull << d)) ok = graph_reserve_ahead(d, need->bytes[d]);
  if (!ok) graph_settle_mask(need->mask); /* give back what was reserved for the other devices */
  pthread_mutex_unlock(&g_graph_mu);
  return ok;
}

/* After: remember the exec's allocations; the count follows the pool again (the reservation made
 * before instantiating was a check, the launch reserves for real). */
static void instantiate_post(const struct graph_need *need, CUresult rc, CUgraphExec exec) {
  if (!need->mask) return;
  if (rc == CUDA_SUCCESS && exec) {
    uint64_t total = 0;
    for (int d = 0; d < VGPU_GRAPH_DEVICES; d++) {
      if (!(need->mask & (1ull << d))) continue;
      total += need->bytes[d];
      struct vgpu_track_rec r = {.key = EXEC_DEV_KEY(exec, d), .bytes = need->bytes[d], .aux = (uint64_t)d,
                                 .kind = VGPU_TRACK_GRAPH_EXEC, .ridx = -1};
      vgpu_track_put(&r);
    }
    struct vgpu_track_rec s = {.key = (uint64_t)(uintptr_t)exec, .bytes = total, .aux = need->mask,
                               .kind = VGPU_TRACK_GRAPH_EXEC, .ridx = -1};
    if (!vgpu_track_put(&s)) VGPU_LOG_ERROR("out of host memory tracking a graph");
  }
  pthread_mutex_lock(&g_graph_mu);
  graph_settle_mask(need->mask);
  pthread_mutex_unlock(&g_graph_mu);
}

bool vgpu_graph_mem_before_launch(CUgraphExec exec) {
  if (!__atomic_load_n(&g_active_mask, __ATOMIC_RELAXED)) return true;
  struct vgpu_track_rec s;
  if (!vgpu_track_get(VGPU_TRACK_GRAPH_EXEC, (uint64_t)(uintptr_t)exec, &s)) return true;
  pthread_mutex_lock(&g_graph_mu);
  bool ok = true;
  for (int d = 0; d < VGPU_GRAPH_DEVICES && ok; d++) {
    struct vgpu_track_rec r;
    if ((s.aux & (1ull << d)) && vgpu_track_get(VGPU_TRACK_GRAPH_EXEC, EXEC_DEV_KEY(exec, d), &r))
      ok = graph_reserve_ahead(d, r.bytes);
  }
  if (!ok) graph_settle_mask(s.aux);
  pthread_mutex_unlock(&g_graph_mu);
  return ok;
}

/* The body every instantiate entry point shares (they differ only in their arguments): reserve
 * what the graph will allocate, call the driver, keep or return the reservation. */
#define INSTANTIATE_CHARGED(name, args)                                            \
  struct graph_need need;                                                          \
  if (!instantiate_pre(hGraph, &need)) return CUDA_ERROR_OUT_OF_MEMORY;            \
  CUresult rc = VGPU_CALL_REAL(name, args);                                        \
  instantiate_post(&need, rc, phGraphExec ? *phGraphExec : NULL);                  \
  return rc

VGPU_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                 unsigned long long flags) {
  VGPU_HOOK_BEGIN(cuGraphInstantiateWithFlags, (phGraphExec, hGraph, flags));
  INSTANTIATE_CHARGED(cuGraphInstantiateWithFlags, (phGraphExec, hGraph, flags));
}

VGPU_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                           char *logBuffer, size_t bufferSize) {
  VGPU_HOOK_BEGIN(cuGraphInstantiate_v2, (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
  INSTANTIATE_CHARGED(cuGraphInstantiate_v2, (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
}

/* The CUDA 10 entry point (same ABI as _v2), still exported by the driver and reachable through
 * dlsym or cuGetProcAddress with an old cudaVersion. */
VGPU_EXPORT CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                        char *logBuffer, size_t bufferSize) {
  VGPU_HOOK_BEGIN(cuGraphInstantiate, (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
  INSTANTIATE_CHARGED(cuGraphInstantiate, (phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
}

static CUresult instantiate_params(bool ptsz, CUgraphExec *phGraphExec, CUgraph hGraph,
                                   CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
  struct graph_need need;
  if (!instantiate_pre(hGraph, &need)) {
    if (params) params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult rc = ptsz ? VGPU_CALL_REAL(cuGraphInstantiateWithParams_ptsz, (phGraphExec, hGraph, params))
                     : VGPU_CALL_REAL(cuGraphInstantiateWithParams, (phGraphExec, hGraph, params));
  instantiate_post(&need, rc, phGraphExec ? *phGraphExec : NULL);
  return rc;
}

VGPU_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                  CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {
  VGPU_HOOK_BEGIN(cuGraphInstantiateWithParams, (phGraphExec, hGraph, instantiateParams));
  return instantiate_params(false, phGraphExec, hGraph, instantiateParams);
}

VGPU_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                       CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {
  VGPU_HOOK_BEGIN(cuGraphInstantiateWithParams_ptsz, (phGraphExec, hGraph, instantiateParams));
  return instantiate_params(true, phGraphExec, hGraph, instantiateParams);
}

VGPU_EXPORT CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuGraphUpload, (hGraphExec, hStream));
  if (!vgpu_graph_mem_before_launch(hGraphExec)) return CUDA_ERROR_OUT_OF_MEMORY;
  return VGPU_CALL_REAL(cuGraphUpload, (hGraphExec, hStream));
}

VGPU_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  VGPU_HOOK_BEGIN(cuGraphUpload_ptsz, (hGraphExec, hStream));
  if (!vgpu_graph_mem_before_launch(hGraphExec)) return CUDA_ERROR_OUT_OF_MEMORY;
  return VGPU_CALL_REAL(cuGraphUpload_ptsz, (hGraphExec, hStream));
}

VGPU_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  VGPU_HOOK_BEGIN(cuGraphExecDestroy, (hGraphExec));
  CUresult rc = VGPU_CALL_REAL(cuGraphExecDestroy, (hGraphExec));
  struct vgpu_track_rec s;
  if (rc == CUDA_SUCCESS && vgpu_track_take(VGPU_TRACK_GRAPH_EXEC, (uint64_t)(uintptr_t)hGraphExec, &s)) {
    for (int d = 0; d < VGPU_GRAPH_DEVICES; d++)
      if (s.aux & (1ull << d)) vgpu_track_take(VGPU_TRACK_GRAPH_EXEC, EXEC_DEV_KEY(hGraphExec, d), NULL);
  }
  vgpu_graph_mem_refresh();
  return rc;
}

VGPU_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device) {
  VGPU_HOOK_BEGIN(cuDeviceGraphMemTrim, (device));
  CUresult rc = VGPU_CALL_REAL(cuDeviceGraphMemTrim, (device));
  vgpu_graph_mem_refresh();
  return rc;
}

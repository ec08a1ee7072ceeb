/*
 * nvml_procs.c — what NVML says this process (and its children that run without libvgpu) holds
 * on a device: the input of the reconciliation (hook_cuda_module.c) and of the context
 * measurement (hook_cuda_ctx.c).
 *
 * The whole process list is read, however long: NVML lists every process of the device, node
 * wide, and a fixed buffer would silently stop reconciling once a node runs more (a tenant could
 * start them). Which entry is this process: the one with our pid (no pid namespace, or a driver
 * that lists the container's pids), else the one with our slot's host pid (written by the node
 * exporter or HAMi's monitor where the process cannot learn it). A wrong host pid in the slot (the
 * region is tenant-writable) can only make NVML's figure someone else's: charging more, or finding
 * nothing (no reconciliation, as without it).
 *
 * Children that run without libvgpu (issue 35, route 13: forked after initialisation, then exec'd
 * without LD_PRELOAD) are invisible to every hook, and their memory is the container's. Where
 * NVML's pids are this namespace's (it listed us by our own pid), a listed process that descends
 * from this one (parent chain in /proc) and has no slot in the region is charged to this process
 * as untracked memory, until NVML no longer lists it. In a pid namespace NVML names host pids,
 * which /proc here cannot resolve: there the node exporter's unslotted-process report is the
 * answer.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices.h"
#include "real.h"
#include "state.h"
#include "vgpu.h"

#define NVML_PROCS_STACK 64
#define NVML_PROCS_MAX 65536 /* far beyond any device's process limit */

bool vgpu_nvml_each_process(int ridx, vgpu_nvml_proc_fn fn, void *arg) {
  if (ridx < 0 || !vgpu_nvml_load() || !vgpu_nvml.nvmlDeviceGetHandleByIndex_v2 ||
      !vgpu_nvml.nvmlDeviceGetComputeRunningProcesses_v2)
    return false;
  nvmlDevice_t h = NULL;
  if (vgpu_nvml.nvmlDeviceGetHandleByIndex_v2((unsigned)ridx, &h) != VGPU_NVML_SUCCESS) return false;
  nvmlProcessInfo_v2_t stack[NVML_PROCS_STACK], *infos = stack;
  unsigned int cap = NVML_PROCS_STACK, count = cap;
  nvmlReturn_t rc;
  /* NVML's sizing protocol: too small a buffer answers INSUFFICIENT_SIZE and the count needed;
   * the list can grow between the two calls, so try a few times with room to spare. */
  for (int tries = 0;; tries++) {
    count = cap;
    rc = vgpu_nvml.nvmlDeviceGetComputeRunningProcesses_v2(h, &count, infos);
    if (rc != VGPU_NVML_ERROR_INSUFFICIENT_SIZE || tries == 4 || count >= NVML_PROCS_MAX) break;
    unsigned int want = count + count / 4 + 16;
    nvmlProcessInfo_v2_t *n = malloc((size_t)want * sizeof *n);
    if (!n) break;
    if (infos != stack) free(infos);
    infos = n;
    cap = want;
  }
  bool ok = rc == VGPU_NVML_SUCCESS;
  for (unsigned int i = 0; ok && i < count && i < cap; i++) fn(infos[i].pid, infos[i].usedGpuMemory, arg);
  if (infos != stack) free(infos);
  return ok;
}

/* The host pid recorded in our slot (0: unknown, or not registered yet: never registers here, so
 * a reconciliation cannot wait for a region lock). */
static unsigned int slot_hostpid(void) {
  int32_t h = vgpu_state_slot_hostpid();
  return h > 0 ? (unsigned int)h : 0;
}

struct self_find {
  unsigned int pid, hostpid;
  bool by_pid, by_host;
  uint64_t pid_bytes, host_bytes;
};

static void find_self(unsigned int pid, uint64_t used, void *arg) {
  struct self_find *s = arg;
  if (pid == s->pid) {
    s->by_pid = true;
    s->pid_bytes = used;
  } else if (s->hostpid && pid == s->hostpid) {
    s->by_host = true;
    s->host_bytes = used;
  }
}

bool vgpu_nvml_process_used_ex(int ridx, uint64_t *bytes, bool *same_namespace) {
  struct self_find s = {.pid = (unsigned int)getpid()};
  s.hostpid = slot_hostpid();
  if (!vgpu_nvml_each_process(ridx, find_self, &s)) return false;
  if (same_namespace) *same_namespace = s.by_pid;
  if (s.by_pid) *bytes = s.pid_bytes;
  else if (s.by_host) *bytes = s.host_bytes;
  return s.by_pid || s.by_host;
}

bool vgpu_nvml_process_used(int ridx, uint64_t *bytes) { return vgpu_nvml_process_used_ex(ridx, bytes, NULL); }

#define DESCENT_MAX 64 /* parent links followed at most */

/* Parent pid from /proc/<pid>/stat (the field after the command name's closing parenthesis). */
static int parent_of(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "re");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *close = strrchr(buf, ')');
  int ppid = -1;
  char state = 0;
  if (!close || sscanf(close + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

static bool descends_from_me(int pid) {
  int me = (int)getpid();
  for (int i = 0; i < DESCENT_MAX && pid > 1; i++) {
    int pp = parent_of(pid);
    if (pp == me) return true;
    pid = pp;
  }
  return false;
}

/* Whether `pid` has a live slot in our region (it counts its own memory). */
static bool has_slot(int pid) {
  struct vgpu_region_map *m = vgpu_state_region(false);
  if (!m) return false;
  int n = __atomic_load_n(&m->r->proc_num, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n && i < VGPU_MAX_PROCS; i++)
    if (__atomic_load_n(&m->r->procs[i].status, __ATOMIC_ACQUIRE) != 0 &&
        __atomic_load_n(&m->r->procs[i].pid, __ATOMIC_ACQUIRE) == pid)
      return true;
  return false;
}

struct usage_scan {
  struct self_find self;
  unsigned int n, cap;
  unsigned int *pids;
  uint64_t *used;
  bool oom;
};

static void scan_one(unsigned int pid, uint64_t used, void *arg) {
  struct usage_scan *u = arg;
  find_self(pid, used, &u->self);
  if (pid == u->self.pid || pid == 0) return;
  if (u->n == u->cap) {
    unsigned int ncap = u->cap ? u->cap * 2 : 16;
    unsigned int *np = realloc(u->pids, ncap * sizeof *np);
    if (np) u->pids = np;
    uint64_t *nu = np ? realloc(u->used, ncap * sizeof *nu) : NULL;
    if (nu) u->used = nu;
    if (!np || !nu) {
      u->oom = true;
      return;
    }
    u->cap = ncap;
  }
  u->pids[u->n] = pid;
  u->used[u->n++] = used;
}

bool vgpu_nvml_usage(int ridx, uint64_t *self, uint64_t *children) {
  struct usage_scan u;
  memset(&u, 0, sizeof u);
  u.self.pid = (unsigned int)getpid();
  u.self.hostpid = slot_hostpid();
  bool ok = vgpu_nvml_each_process(ridx, scan_one, &u);
  *children = 0;
  if (ok && (u.self.by_pid || u.self.by_host)) {
    *self = u.self.by_pid ? u.self.pid_bytes : u.self.host_bytes;
    for (unsigned int i = 0; u.self.by_pid && i < u.n; i++)
      if (u.pids[i] <= (unsigned int)INT32_MAX && descends_from_me((int)u.pids[i]) && !has_slot((int)u.pids[i]))
        *children += u.used[i];
  } else {
    ok = false;
  }
  if (u.oom) VGPU_LOG_WARN("out of host memory reading NVML's process list: children not all counted");
  free(u.pids);
  free(u.used);
  return ok;
}

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

/* The host pid recorded in our slot (0: unknown, or not registered yet). */
static unsigned int slot_hostpid(void) {
  struct vgpu_region_map *m = vgpu_state_region(false);
  int slot = m ? vgpu_state_slot() : -1;
  if (slot < 0) return 0;
  int32_t h = __atomic_load_n(&m->r->procs[slot].hostpid, __ATOMIC_ACQUIRE);
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

/* proof_region.c — see proof_region.h. Layout from libvgpu/include/vgpu/vgpu_region.h. */
#define _GNU_SOURCE
#include "proof_region.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/vgpu_region.h"

static vgpu_region_t *g_region;
static int g_slot = -1;

int proof_region_open(const char *path, const char *device_uuid, uint64_t memory_limit) {
  umask(0);
  int fd = open(path, O_RDWR | O_CREAT, 0666);
  if (fd < 0) {
    perror("proof_region: open");
    return -1;
  }
  /* HAMi-core: the file is sizeof(shared_region_t) + 1 bytes. */
  if (lseek(fd, (off_t)sizeof(vgpu_region_t), SEEK_SET) < 0 || write(fd, "", 1) != 1) {
    perror("proof_region: size");
    close(fd);
    return -1;
  }
  void *p = mmap(NULL, sizeof(vgpu_region_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    perror("proof_region: mmap");
    return -1;
  }
  g_region = p;
  if (__atomic_load_n(&g_region->initialized_flag, __ATOMIC_ACQUIRE) != VGPU_REGION_MAGIC) {
    g_region->major_version = VGPU_REGION_MAJOR;
    g_region->minor_version = VGPU_REGION_MINOR;
    g_region->device_num = 1;
    snprintf(g_region->uuids[0], VGPU_UUID_LEN, "%s", device_uuid);
    g_region->limit[0] = memory_limit;
    g_region->sm_limit[0] = 0;
    __atomic_store_n(&g_region->utilization_switch, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&g_region->recent_kernel, 2, __ATOMIC_RELAXED);
    g_region->priority = 1;
    __atomic_store_n(&g_region->proc_num, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_region->last_kernel_time, (uint64_t)time(NULL), __ATOMIC_RELAXED);
    __atomic_store_n(&g_region->initialized_flag, VGPU_REGION_MAGIC, __ATOMIC_RELEASE);
  }
  return 0;
}

int proof_region_register(void) {
  int n = __atomic_load_n(&g_region->proc_num, __ATOMIC_ACQUIRE);
  if (n < 0 || n >= VGPU_MAX_PROCS) return -1;
  vgpu_proc_slot_t *s = &g_region->procs[n];
  memset(s, 0, sizeof *s);
  __atomic_store_n(&s->pid, (int32_t)getpid(), __ATOMIC_RELAXED);
  __atomic_store_n(&s->hostpid, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&s->status, VGPU_SLOT_RUNNING, __ATOMIC_RELEASE);
  __atomic_store_n(&g_region->proc_num, n + 1, __ATOMIC_RELEASE);
  g_slot = n;
  return 0;
}

void proof_region_set_hostpid(int32_t hostpid) {
  __atomic_store_n(&g_region->procs[g_slot].hostpid, hostpid, __ATOMIC_RELEASE);
}

void proof_region_add_memory(uint64_t bytes) {
  vgpu_proc_slot_t *s = &g_region->procs[g_slot];
  __atomic_fetch_add(&s->seqlock, 1, __ATOMIC_RELEASE);
  __atomic_fetch_add(&s->used[0].total, bytes, __ATOMIC_RELAXED);
  __atomic_fetch_add(&s->used[0].data_size, bytes, __ATOMIC_RELAXED);
  __atomic_fetch_add(&s->seqlock, 1, __ATOMIC_RELEASE);
}

void proof_region_kernel_launched(void) {
  uint64_t now = (uint64_t)time(NULL);
  if (__atomic_load_n(&g_region->last_kernel_time, __ATOMIC_RELAXED) != now) {
    __atomic_store_n(&g_region->last_kernel_time, now, __ATOMIC_RELAXED);
  }
  __atomic_store_n(&g_region->recent_kernel, 2, __ATOMIC_RELAXED);
}

void proof_region_unregister(void) {
  if (g_region == NULL || g_slot < 0) return;
  __atomic_store_n(&g_region->procs[g_slot].pid, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&g_region->procs[g_slot].status, VGPU_SLOT_FREE, __ATOMIC_RELEASE);
}

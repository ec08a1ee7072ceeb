/*
 * hami_emu.h — an emulator of HAMi-core's documented shared-region protocol (v1.2 layout), written
 * for the coexistence tests from its public behaviour, not from its code:
 *   - lock: the region's process-shared semaphore `sem` taken with timed waits, then
 *     `owner_pid` = pid; on a timeout an owner that is dead in /proc is cleared (CAS) and the
 *     semaphore posted; unlock stores owner_pid = 0, then posts (HAMi's order, with its window);
 *   - registration under the lock: a slot holding our pid is reset, else slot `proc_num` is
 *     initialized and proc_num incremented; then the dead-slot sweep;
 *   - the sweep ("clear_proc_slot_nolock"): walks [0, proc_num); a slot with pid 0, or (do_clear)
 *     a dead pid, is removed by decrementing proc_num first, then copying the last slot over it
 *     field by field (pid, hostpid, seqlock, status, used[], monitorused[], device_util[]) and
 *     zeroing the last one; the moved slot is examined again. It runs under the lock at
 *     registration and WITHOUT the lock when an allocation would exceed the limit;
 *   - usage: the process finds its slot by pid, then seqlock+1, add to used[d].total and to the
 *     kind's field, seqlock+1 (no writer lock);
 *   - OOM check: lock-free sum of used[d].total over [0, proc_num) plus the request against
 *     limit[d]; over the limit it sweeps without the lock and checks once more;
 *   - exit: clears owner_pid and posts if it holds the semaphore, then sets its slot's pid and
 *     status to 0 (no lock).
 * Lock waits are `hami_wait_s` seconds per try (HAMi: 10) and give up after `hami_tries` tries
 * (HAMi: exit after 30) so tests stay short.
 */
#ifndef VGPU_HAMI_EMU_H
#define VGPU_HAMI_EMU_H

#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/vgpu_region.h"

static int hami_wait_s = 1;
static int hami_tries = 30;

static inline vgpu_region_t *hami_map(const char *path) {
  int fd = open(path, O_RDWR);
  if (fd < 0) return NULL;
  void *p = mmap(NULL, sizeof(vgpu_region_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? NULL : p;
}

/* Creates the file the way HAMi-core does on first use: sizeof(region) + 1 bytes (sparse), header
 * with both semaphores initialized, the magic stored last. */
static inline bool hami_create(const char *path, uint64_t limit_bytes) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0666);
  if (fd < 0) return false;
  bool ok = pwrite(fd, "", 1, (off_t)sizeof(vgpu_region_t)) == 1;
  close(fd);
  vgpu_region_t *r = ok ? hami_map(path) : NULL;
  if (!r) return false;
  r->major_version = VGPU_REGION_MAJOR;
  r->minor_version = VGPU_REGION_MINOR;
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
    r->limit[d] = limit_bytes;
    r->sm_limit[d] = 100;
  }
  sem_init((sem_t *)(void *)r->sem, 1, 1);
  sem_init((sem_t *)(void *)r->sem_postinit, 1, 1);
  r->utilization_switch = 1;
  r->recent_kernel = 2;
  r->priority = 1;
  __atomic_thread_fence(__ATOMIC_RELEASE);
  __atomic_store_n(&r->initialized_flag, VGPU_REGION_MAGIC, __ATOMIC_RELEASE);
  munmap(r, sizeof *r);
  return true;
}

static inline bool hami_pid_dead(int32_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return true;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return true;
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  return p && (p[2] == 'Z' || p[2] == 'X');
}

static inline bool hami_lock(vgpu_region_t *r) {
  sem_t *sem = (sem_t *)(void *)r->sem;
  for (int trial = 0; trial < hami_tries; trial++) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += hami_wait_s;
    if (sem_timedwait(sem, &ts) == 0) {
      __atomic_store_n(&r->owner_pid, (uint64_t)getpid(), __ATOMIC_SEQ_CST);
      return true;
    }
    uint64_t owner = __atomic_load_n(&r->owner_pid, __ATOMIC_ACQUIRE);
    if (owner != 0 && hami_pid_dead((int32_t)owner) &&
        __atomic_compare_exchange_n(&r->owner_pid, &owner, 0, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
      sem_post(sem);
  }
  return false;
}

static inline void hami_unlock(vgpu_region_t *r) {
  __atomic_store_n(&r->owner_pid, 0, __ATOMIC_SEQ_CST);
  sem_post((sem_t *)(void *)r->sem);
}

static inline void hami_copy_slot(vgpu_proc_slot_t *dst, vgpu_proc_slot_t *src) {
#define HAMI_CP(f) __atomic_store_n(&dst->f, __atomic_load_n(&src->f, __ATOMIC_RELAXED), __ATOMIC_RELAXED)
  HAMI_CP(pid);
  HAMI_CP(hostpid);
  HAMI_CP(seqlock);
  HAMI_CP(status);
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
    HAMI_CP(used[d].total);
    HAMI_CP(used[d].context_size);
    HAMI_CP(used[d].module_size);
    HAMI_CP(used[d].data_size);
    HAMI_CP(used[d].offset);
    HAMI_CP(monitorused[d]);
    HAMI_CP(device_util[d].dec_util);
    HAMI_CP(device_util[d].enc_util);
    HAMI_CP(device_util[d].sm_util);
  }
#undef HAMI_CP
}

static inline void hami_zero_slot(vgpu_proc_slot_t *s) {
  __atomic_store_n(&s->seqlock, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&s->pid, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&s->hostpid, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&s->status, 0, __ATOMIC_RELEASE);
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
    memset(&s->used[d], 0, sizeof s->used[d]);
    s->monitorused[d] = 0;
    memset(&s->device_util[d], 0, sizeof s->device_util[d]);
  }
}

/* Swap-remove sweep; returns the number of slots removed. */
static inline int hami_sweep(vgpu_region_t *r, bool do_clear) {
  int removed = 0, dead_checked = 0, slot = 0;
  while (slot < r->proc_num) {
    int32_t pid = __atomic_load_n(&r->procs[slot].pid, __ATOMIC_ACQUIRE);
    bool drop = pid == 0 || (do_clear && dead_checked < 10 && hami_pid_dead(pid));
    if (pid != 0 && do_clear) dead_checked += drop;
    if (!drop) {
      slot++;
      continue;
    }
    r->proc_num--;
    vgpu_proc_slot_t *last = &r->procs[r->proc_num];
    hami_copy_slot(&r->procs[slot], last);
    hami_zero_slot(last);
    __sync_synchronize();
    removed++;
  }
  return removed;
}

static inline int hami_find_slot(vgpu_region_t *r) {
  int32_t me = (int32_t)getpid();
  int n = __atomic_load_n(&r->proc_num, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n && i < VGPU_MAX_PROCS; i++)
    if (__atomic_load_n(&r->procs[i].pid, __ATOMIC_ACQUIRE) == me) return i;
  return -1;
}

static inline bool hami_register(vgpu_region_t *r) {
  if (!hami_lock(r)) return false;
  int32_t me = (int32_t)getpid();
  int i = hami_find_slot(r);
  if (i < 0) {
    i = r->proc_num;
    if (i >= VGPU_MAX_PROCS) {
      hami_unlock(r);
      return false;
    }
    hami_zero_slot(&r->procs[i]);
    __atomic_store_n(&r->procs[i].pid, me, __ATOMIC_RELEASE);
    __atomic_store_n(&r->procs[i].status, 1, __ATOMIC_RELEASE);
    __atomic_fetch_add(&r->proc_num, 1, __ATOMIC_RELEASE);
  } else {
    hami_zero_slot(&r->procs[i]);
    __atomic_store_n(&r->procs[i].pid, me, __ATOMIC_RELEASE);
    __atomic_store_n(&r->procs[i].status, 1, __ATOMIC_RELEASE);
  }
  hami_sweep(r, true);
  hami_unlock(r);
  return true;
}

/* type 0 context, 1 module, 2 data; negative bytes remove. */
static inline bool hami_usage(vgpu_region_t *r, int dev, int64_t bytes, int type) {
  int i = hami_find_slot(r);
  if (i < 0) return false;
  vgpu_proc_slot_t *s = &r->procs[i];
  __atomic_fetch_add(&s->seqlock, 1, __ATOMIC_RELEASE);
  uint64_t *kind = type == 0 ? &s->used[dev].context_size
                   : type == 1 ? &s->used[dev].module_size
                               : &s->used[dev].data_size;
  __atomic_fetch_add(&s->used[dev].total, (uint64_t)bytes, __ATOMIC_RELEASE);
  __atomic_fetch_add(kind, (uint64_t)bytes, __ATOMIC_RELEASE);
  __atomic_fetch_add(&s->seqlock, 1, __ATOMIC_RELEASE);
  return true;
}

static inline uint64_t hami_total(vgpu_region_t *r, int dev) {
  uint64_t sum = 0;
  int n = __atomic_load_n(&r->proc_num, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n && i < VGPU_MAX_PROCS; i++) {
    vgpu_proc_slot_t *s = &r->procs[i];
    for (int tries = 0; tries < 100000; tries++) { /* HAMi spins without a bound */
      uint64_t a = __atomic_load_n(&s->seqlock, __ATOMIC_ACQUIRE);
      if (a & 1) continue;
      uint64_t v = __atomic_load_n(&s->used[dev].total, __ATOMIC_ACQUIRE);
      if (__atomic_load_n(&s->seqlock, __ATOMIC_ACQUIRE) == a) {
        sum += v;
        break;
      }
    }
  }
  return sum;
}

/* HAMi's allocation: OOM check (with the unlocked sweep), then the usage add. */
static inline bool hami_alloc(vgpu_region_t *r, int dev, uint64_t bytes) {
  uint64_t limit = __atomic_load_n(&r->limit[dev], __ATOMIC_ACQUIRE);
  if (limit && hami_total(r, dev) + bytes > limit) {
    hami_sweep(r, true);
    if (hami_total(r, dev) + bytes > limit) return false;
  }
  return hami_usage(r, dev, (int64_t)bytes, 2);
}

static inline void hami_exit(vgpu_region_t *r) {
  uint64_t me = (uint64_t)getpid();
  if (__atomic_compare_exchange_n(&r->owner_pid, &me, 0, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE))
    sem_post((sem_t *)(void *)r->sem);
  int i = hami_find_slot(r);
  if (i >= 0) {
    __atomic_store_n(&r->procs[i].pid, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&r->procs[i].status, 0, __ATOMIC_RELEASE);
  }
}

#endif /* VGPU_HAMI_EMU_H */

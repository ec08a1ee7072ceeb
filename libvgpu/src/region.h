/*
 * region.h — the shared region file: create/open (HAMi v1.2 bytes + our extension block),
 * death-safe locking, slot registration, per-slot seqlock writes and liveness sweeps.
 *
 * Usable without the rest of the library (the unit tests and shrreg-tool link it statically).
 *
 * Locks (all fcntl record locks on the cache file, released by the kernel when a holder dies):
 *   - init lock: bytes [0, sizeof(vgpu_region_t)), as HAMi-core's lockf, held only while a file
 *     is being created, upgraded or validated;
 *   - slot lock: one byte at VGPU_SLOT_LOCK_OFFSET, held while the slot table changes and while an
 *     allocation checks the container-wide limit (reserve-before-allocate).
 * fcntl locks belong to a process, so threads of one process are serialized by an in-process
 * mutex taken first (vgpu_region_lock does both).
 *
 * libvgpu never moves a slot: a freed slot gets status 0 and pid 0 and is reused later.
 * ext->generation is odd while a slot is being claimed or freed. HAMi-core processes sharing the
 * file DO move slots (swap-remove compaction, copying the last slot over a dead one): per-slot
 * extension data is therefore tagged with the pid it belongs to (ext->slots[i].pid) and ignored
 * when the tag does not match procs[i].pid; a libvgpu process finds its slot again by pid.
 */
#ifndef VGPU_REGION_INTERNAL_H
#define VGPU_REGION_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vgpu/vgpu_region.h"

#define VGPU_SLOT_LOCK_OFFSET 0x40000100LL /* beyond HAMi-core's postinit byte at 0x40000000 */
/* A slot whose process looks dead in our /proc is kept while its heartbeat is fresher than this
 * (the process may live in another pid namespace sharing the file). */
#define VGPU_HEARTBEAT_STALE_NS 1000000000ull

enum vgpu_region_err {
  VGPU_REGION_OK = 0,
  VGPU_REGION_E_IO = -1,          /* open/mmap/ftruncate failed */
  VGPU_REGION_E_VERSION = -2,     /* an existing file of another layout or version */
  VGPU_REGION_E_NOT_REGULAR = -3, /* symlink, FIFO, directory ... */
  VGPU_REGION_E_LOCK = -4,       /* record locks unsupported on this filesystem */
  VGPU_REGION_E_NOSPACE = -5,    /* the file's blocks could not be reserved (full disk/quota) */
  VGPU_REGION_E_BUSY = -6,       /* the init lock stayed held past the wait bound */
};

/* Every wait for a lock another process may hold is bounded by this (a holder stopped by SIGSTOP
 * or a debugger must not freeze its neighbours); see README "Bounded waits". Tests may lower it. */
#define VGPU_LOCK_WAIT_NS (3ull * 1000000000ull)
extern uint64_t vgpu_region_wait_ns;

enum vgpu_mem_kind { VGPU_MEM_CONTEXT = 0, VGPU_MEM_MODULE = 1, VGPU_MEM_DATA = 2 };

struct vgpu_region_init {
  uint64_t device_num;
  char uuids[VGPU_MAX_DEVICES][VGPU_UUID_LEN];
  uint64_t limit[VGPU_MAX_DEVICES];
  uint64_t sm_limit[VGPU_MAX_DEVICES];
  int priority;
  const char *pod_uid;
  const char *container_name;
};

struct vgpu_region_map {
  int fd;
  vgpu_region_t *r;
  vgpu_region_ext_t *ext; /* NULL when the file's extension belongs to an unknown major */
  size_t map_size;
  bool created; /* this open initialized the file */
  bool local;   /* process-local region (degraded mode): an anonymous memfd, not the shared file */
  char found[96]; /* on E_VERSION: what was found, for the log line */
};

/* Opens (creating when absent or uninitialized) the region at `path`. On E_VERSION the file is
 * left untouched. */
int vgpu_region_open(struct vgpu_region_map *m, const char *path,
                     const struct vgpu_region_init *init);
/* A process-local region (degraded mode): the same layout in an anonymous memory file shared only
 * with fork() children, so every code path (locks, slots, limiter bucket) works unchanged. */
int vgpu_region_open_local(struct vgpu_region_map *m, const struct vgpu_region_init *init);
/* Opens an existing region without creating or changing it (tools). */
int vgpu_region_open_existing(struct vgpu_region_map *m, const char *path, bool writable);
void vgpu_region_close(struct vgpu_region_map *m);

/* Slot lock: in-process mutex, then the fcntl record lock, then HAMi-core's own lock (the region's
 * semaphore `sem` with `owner_pid`, so HAMi-core processes sharing the file are excluded too).
 * vgpu_region_lock_for gives up after `bound_ns` and returns false, holding nothing; a semaphore
 * whose owner died is recovered as HAMi-core does (owner cleared, posted), and one left at 0 with
 * no owner for a whole bound (a holder killed between its two steps) is posted once.
 * vgpu_region_lock blocks (tools), logging "Lock shrreg timeout" every 10 s waited. */
bool vgpu_region_lock_for(struct vgpu_region_map *m, uint64_t bound_ns);
void vgpu_region_lock(struct vgpu_region_map *m);
void vgpu_region_unlock(struct vgpu_region_map *m);
/* Reservation lock: serializes "sum the container's usage, then add to my slot" across every
 * process of the container. A process-shared robust mutex kept in the extension block (an
 * uncontended lock is a userspace CAS, no syscall; a holder that dies hands EOWNERDEAD to the next
 * locker), or the slot lock when the file has none. Slot-table changes (claim/free/sweep) keep using
 * the slot lock, so shrreg-tool and other readers see the same fcntl-lock semantics as before;
 * freeing a dead slot only lowers the sums a reservation compares, so the two locks need not nest.
 * Lock order: reservation lock -> slot lock. */
/* Returns true when the mutex was taken, false when it fell back to the slot lock (then the
 * caller already holds the slot lock); pass the value back to unlock. */
bool vgpu_region_reserve_lock(struct vgpu_region_map *m);
/* Bounded form: 1 mutex taken, 0 slot lock taken instead, -1 gave up after `bound_ns`. */
int vgpu_region_reserve_lock_for(struct vgpu_region_map *m, uint64_t bound_ns);
void vgpu_region_reserve_unlock(struct vgpu_region_map *m, bool mutex);
#define VGPU_EXT_FLAG_RESERVE_MUTEX 1u /* ext->flags: ext->reserve_mutex holds the reservation mutex */

/* pthread_atfork support: 0 = prepare (take the in-process lock), 1 = parent/child (release). */
void vgpu_region_atfork(int phase);
/* Pid holding the slot lock right now (F_GETLK), 0 if free. */
pid_t vgpu_region_lock_holder(struct vgpu_region_map *m);

struct vgpu_slot_identity {
  int32_t pid;
  int32_t hostpid;
  int32_t hostpid_source;
  uint64_t start_time_ticks;
};
/* Claims a slot for `id` (reusing a stale one with the same pid). Caller holds the slot lock.
 * Returns the slot index or -1 when the table is full. */
int vgpu_region_claim_slot(struct vgpu_region_map *m, const struct vgpu_slot_identity *id);
/* Frees a slot (usage zeroed, status/pid 0). Caller holds the slot lock. */
void vgpu_region_free_slot(struct vgpu_region_map *m, int idx);
/* Frees the slots of dead processes. Caller holds the slot lock. `self` is never freed.
 * *suspects counts slots that look dead but whose heartbeat is still fresh. Returns freed count. */
int vgpu_region_sweep(struct vgpu_region_map *m, int self, int *suspects);
/* Liveness of one slot as the sweep judges it: 1 alive, 0 dead, -1 suspect (fresh heartbeat). */
int vgpu_region_slot_alive(struct vgpu_region_map *m, int idx, uint64_t now_ns);

/* Seqlock-protected usage update of one slot (single writer per slot). delta may be negative;
 * counters clamp at 0 instead of wrapping. */
void vgpu_slot_add(struct vgpu_region_map *m, int idx, int dev, enum vgpu_mem_kind kind,
                   int64_t delta);
/* Publishes one device's absolute counters (context, module, data; total = their sum) into a slot
 * under its seqlock: the process's own record is the truth, the slot a copy that heals itself after
 * HAMi-core's compaction moved or tore it. */
void vgpu_slot_publish(struct vgpu_region_map *m, int idx, int dev, const uint64_t kinds[3]);
/* Consistent read of one slot's used[dev].total (bounded retries, then best effort). */
uint64_t vgpu_slot_total(struct vgpu_region_map *m, int idx, int dev);
/* Sum of used[dev].total over live (status != 0, pid != 0) slots. */
uint64_t vgpu_region_used(struct vgpu_region_map *m, int dev);

/* /proc/<pid>/stat: 1 alive (start time in *start), 0 gone or zombie, -1 unreadable. */
int vgpu_proc_stat(pid_t pid, uint64_t *start_ticks);

#endif /* VGPU_REGION_INTERNAL_H */

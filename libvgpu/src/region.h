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

/* VGPU_SLOT_LOCK_OFFSET, VGPU_HEARTBEAT_STALE_NS and every layout (VGPU_LAYOUTS) come from the
 * ABI header above, the one definition shared with shrreg-tool and region-codec's layout test. */

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
  bool sem_held; /* the slot lock holder took region->sem (false: it is not a usable semaphore) */
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

/* Region semaphore (HAMi-core's region->sem, src/region_sem.c): glibc's 64-bit sem_t protocol
 * without glibc's sem_* calls, which abort on a semaphore whose bytes are garbage (the file is
 * writable by every process of the container). None of these ever aborts, whatever the bytes.
 * vgpu_sem_check: whether the bytes are a process-shared binary semaphore as HAMi-core and libvgpu
 * create it (futex flag 0, value 0 or 1); *value gets the value (-1: out of range), *why (NULL
 * when valid) a short reason. wait: bounded by `wait_ns`, true when taken. post_if_down posts
 * only a semaphore at 0 (one CAS: posting a free one would admit two holders). */
bool vgpu_sem_check(const void *sem, int *value, const char **why);
int vgpu_sem_value(const void *sem);
bool vgpu_sem_trywait(void *sem);
bool vgpu_sem_wait_ns(void *sem, uint64_t wait_ns);
bool vgpu_sem_post(void *sem);
bool vgpu_sem_post_if_down(void *sem);

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

/* What <proc_root>/<pid>/stat says about a recorded process. REUSED: alive, but its start time
 * (field 22) differs from a non-zero `recorded_start`, so the pid names another process now.
 * UNKNOWN (present but unreadable, or a pid namespace we cannot see into) must be treated as
 * alive by anything destructive. *start gets the start time found (0 when none). */
enum vgpu_liveness {
  VGPU_LIVE_ALIVE,
  VGPU_LIVE_GONE,
  VGPU_LIVE_ZOMBIE,
  VGPU_LIVE_REUSED,
  VGPU_LIVE_UNKNOWN,
  VGPU_LIVE_NO_PID,
};
enum vgpu_liveness vgpu_proc_liveness(const char *proc_root, int pid, uint64_t recorded_start,
                                      uint64_t *start);
const char *vgpu_liveness_name(enum vgpu_liveness l);
/* A slot whose process looks dead in this /proc is kept while its extension heartbeat is fresher
 * than VGPU_HEARTBEAT_STALE_NS (or in the future): its owner may live in another pid namespace
 * sharing the file. 0 = no heartbeat recorded. The sweep and shrreg-tool --cleanup both ask this. */
static inline bool vgpu_heartbeat_fresh(uint64_t heartbeat_ns, uint64_t now_ns) {
  return heartbeat_ns != 0 &&
         (now_ns <= heartbeat_ns || now_ns - heartbeat_ns < VGPU_HEARTBEAT_STALE_NS);
}
static inline bool vgpu_liveness_dead(enum vgpu_liveness l) {
  return l == VGPU_LIVE_GONE || l == VGPU_LIVE_ZOMBIE || l == VGPU_LIVE_REUSED;
}

/*
 * ---- Tools (shrreg-tool): any layout HAMi-core ever wrote (VGPU_LAYOUTS), without creating,
 * upgrading or validating anything. Everything here is internal to the library's static archive
 * and to shrreg-tool; libvgpu.so exports none of it (its version script lists the hooks only).
 *
 * A view maps an already opened file (the caller decides how to open it: without following links,
 * checking the inode it judged). Reads bound every count the file supplies (proc_num, device_num)
 * and never follow pointers from it. For the layouts the library itself writes (v1.1 and v1.2:
 * the vgpu_region_t bytes) view->map is a usable vgpu_region_map for the slot-lock and slot-table
 * calls above; for the others map.r is NULL and the view is read-only.
 */
struct vgpu_region_view {
  struct vgpu_region_map map; /* fd always; r only for v1.1/v1.2, ext only when present */
  uint8_t *base;
  size_t size;
  bool writable;
  const vgpu_layout_t *lay;
  bool ext_has_devices; /* the extension is large enough to hold devices[] */
  bool ext_has_slots;   /* ... and slots[] */
};

enum vgpu_view_err {
  VGPU_VIEW_OK = 0,
  VGPU_VIEW_E_IO = -1,          /* fstat failed (errno) */
  VGPU_VIEW_E_NOT_REGULAR = -2, /* not a regular file: nothing mapped */
  VGPU_VIEW_E_TOO_SMALL = -3,   /* view->size says how small */
  VGPU_VIEW_E_TOO_LARGE = -4,   /* beyond VGPU_MAX_REGION_FILE_SIZE */
  VGPU_VIEW_E_MMAP = -5,        /* mmap failed (errno) */
  VGPU_VIEW_E_LAYOUT = -6,      /* mapped, but no known layout: *why says what was found */
};

/* Maps the regular file open at `fd` (read-write when `writable`). The view owns fd from here on,
 * whatever the result: vgpu_region_view_close releases both. */
int vgpu_region_view_map(struct vgpu_region_view *v, int fd, bool writable, const char **why);
void vgpu_region_view_close(struct vgpu_region_view *v);

struct vgpu_view_header {
  int32_t major, minor; /* -1: the layout has no version fields */
  uint64_t owner_pid;
  uint64_t device_num; /* raw, unclamped */
  int32_t proc_num;    /* raw, unclamped */
  int32_t utilization_switch, recent_kernel, priority;
  bool has_last_kernel;
  uint64_t last_kernel_time;
};
void vgpu_region_view_header(const struct vgpu_region_view *v, struct vgpu_view_header *h);
int vgpu_region_view_proc_num(const struct vgpu_region_view *v);   /* clamped to [0, 1024] */
int vgpu_region_view_device_num(const struct vgpu_region_view *v); /* clamped to [0, 16] */
/* Device `dev`'s memory limit (bytes) or, with `sm`, SM limit (percent). */
uint64_t vgpu_region_view_limit(const struct vgpu_region_view *v, bool sm, int dev);
/* Stores a new limit (writable layouts only) and returns the old one. */
uint64_t vgpu_region_view_set_limit(struct vgpu_region_view *v, bool sm, int dev, uint64_t value);
/* The VGPU_UUID_LEN raw bytes of device `dev`'s uuid (not terminated; tenant-written). */
const char *vgpu_region_view_uuid(const struct vgpu_region_view *v, int dev);

struct vgpu_slot_usage {
  uint64_t context, module, data, total, monitor, sm_util;
};
struct vgpu_slot_view {
  int slot;
  int32_t pid, hostpid, status;
  bool torn; /* the slot's seqlock never settled: best-effort values */
  struct vgpu_slot_usage dev[VGPU_MAX_DEVICES];
  bool has_ext; /* the extension entry describes this slot (pid tag matches, or 0 = untagged) */
  uint64_t start_ticks, heartbeat_ns;
  int32_t hostpid_source;
  enum vgpu_liveness live; /* the caller's verdict; the reader leaves VGPU_LIVE_UNKNOWN */
};
/* Reads slot `idx` (0..1023) under its seqlock where the layout has one (bounded retries). */
void vgpu_region_view_read_slot(const struct vgpu_region_view *v, int idx,
                                struct vgpu_slot_view *s);

/* The raw facts about the slot lock, for a caller that judges the holder itself. */
struct vgpu_lock_facts {
  bool has_sem; /* the semaphore could be read */
  int sem_value; /* -1: out of range */
  bool sem_valid; /* vgpu_sem_check: a usable process-shared binary semaphore */
  const char *sem_invalid_why;
  pid_t record_lock_pid; /* holder of the fcntl lock on VGPU_SLOT_LOCK_OFFSET: 0 free, -1 no pid */
  int32_t ext_holder_pid; /* the extension's record of the holder (0: none or no extension) */
  uint64_t ext_holder_since_ns;
  uint64_t owner_pid; /* HAMi-core's semaphore owner */
};
void vgpu_region_view_lock_facts(const struct vgpu_region_view *v, struct vgpu_lock_facts *f);

/* The slot lock's state judged from those facts. libvgpu regions: the kernel's record lock is the
 * truth, the extension's holder record only says who and since when, and a record without the
 * lock is stale (the kernel released it: the holder died). HAMi-core regions: the semaphore with
 * owner_pid, whose liveness is judged from `proc_root`; down with nobody recorded is LOST (a
 * holder between sem_wait and recording itself, or killed between clearing owner_pid and
 * sem_post). */
enum vgpu_lock_state { VGPU_LOCK_FREE, VGPU_LOCK_HELD, VGPU_LOCK_STALE_RECORD, VGPU_LOCK_LOST };
struct vgpu_lock_view {
  enum vgpu_lock_state state;
  bool has_sem;
  int sem_value;
  bool sem_valid;             /* false: the semaphore's bytes are not a usable semaphore */
  const char *sem_invalid_why; /* why not (NULL when valid) */
  int holder_pid;            /* 0: none recorded */
  const char *holder_source; /* "extension", "record-lock" or "owner_pid" */
  enum vgpu_liveness holder_live;
  uint64_t held_ns;    /* 0 when unknown */
  int record_lock_pid; /* fcntl record lock on the file, 0 when none */
};
void vgpu_region_view_lock_state(const struct vgpu_region_view *v, const char *proc_root,
                                 uint64_t now_realtime_ns, struct vgpu_lock_view *lk);

/* The slot lock exactly as vgpu_region_lock_for takes it, except that it never recovers a dead
 * or missing semaphore owner: a tool may judge liveness from another pid namespace, and releasing
 * someone else's lock is an explicit operator decision (vgpu_region_release_stale_lock). On
 * timeout it returns false holding nothing and sets *holder (if given) to what kept it: the
 * record lock's holder, else the semaphore's recorded owner, else 0 (nobody recorded). */
bool vgpu_region_lock_no_recovery_for(struct vgpu_region_map *m, uint64_t bound_ns, pid_t *holder);
/* Releases the slot lock of `holder`, judged dead by the caller: clears the extension's and the
 * semaphore's owner records only where they still name `holder` (0: clear nothing), and posts the
 * semaphore only if it is down (posting a free one would admit two holders). Returns whether it
 * posted. */
bool vgpu_region_release_stale_lock(struct vgpu_region_map *m, int32_t holder);

/* Slot-table edits for a caller that frees many slots in one pass (caller holds the slot lock):
 * one generation period around the whole pass (begin makes ext->generation odd, end even), slots
 * freed in place without a generation bump of their own, trailing free slots trimmed at the end
 * (proc_num clamped to [0, 1024] first; returns the new proc_num). vgpu_region_free_slot is the
 * one-slot form of the same three steps. */
void vgpu_region_generation_begin(struct vgpu_region_map *m);
void vgpu_region_generation_end(struct vgpu_region_map *m);
void vgpu_region_clear_slot(struct vgpu_region_map *m, int idx);
int vgpu_region_trim_slots(struct vgpu_region_map *m);

#endif /* VGPU_REGION_INTERNAL_H */

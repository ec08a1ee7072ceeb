/*
 * state.c — see state.h.
 */
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "devices.h"
#include "quiet_thread.h"
#include "state_degraded.h"
#include "real.h"
#include "track.h"
#include "vgpu.h"

#define HEARTBEAT_PERIOD_NS 250000000L

/* Lock order: g_state_mu -> region slot lock -> g_write_mu (leaf: the one writer of our slot). */
static pthread_mutex_t g_state_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_write_mu = PTHREAD_MUTEX_INITIALIZER;
static struct vgpu_region_map g_map = {.fd = -1};
static int g_attached;       /* 1 mapped (shared or local), -1 nothing can be mapped, 0 not yet */
static int g_slot = -1;      /* our slot, -1 none */
static pid_t g_slot_pid;     /* the pid that owns g_slot (fork detection) */
static int g_hb_running;
static uint64_t g_last_kernel_sec;
/* What this process holds, per device and kind (context, module, data): the truth. Our slot in
 * the region is a published copy (vgpu_slot_publish), rewritten whole after every change, so a
 * slot HAMi-core's compaction moved, tore or freed is healed instead of losing usage. Written
 * under g_write_mu. */
static uint64_t g_used[VGPU_MAX_DEVICES][3];

#define SHUTDOWN_WAIT_NS 500000000ull /* exit does not wait longer than this for the slot lock */

static void build_init(struct vgpu_region_init *init, const struct vgpu_config *cfg) {
  memset(init, 0, sizeof *init);
  vgpu_devices_fill_init(init);
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
    init->limit[d] = cfg->mem_limit[d];
    init->sm_limit[d] = cfg->sm_limit[d];
  }
  init->priority = cfg->priority;
  init->pod_uid = cfg->pod_uid;
  init->container_name = cfg->container_name;
}

static void check_limits(const struct vgpu_config *cfg) {
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
    uint64_t have = __atomic_load_n(&g_map.r->limit[d], __ATOMIC_ACQUIRE);
    uint64_t want = cfg->mem_limit[d];
    bool device_present = (uint64_t)d < g_map.r->device_num;
    if (have != want && (device_present || want))
      VGPU_LOG_WARN("Limit inconsistency on device %d: region has %llu bytes, environment %llu; "
                    "the region wins",
                    d, (unsigned long long)have, (unsigned long long)want);
  }
}

/* Switches this process to a private region holding `init`'s limits. Caller holds g_state_mu.
 * A shared mapping in use is left mapped (other threads may still read it). */
static struct vgpu_region_map *degrade_locked(const struct vgpu_region_init *init) {
  struct vgpu_region_map local;
  if (vgpu_region_open_local(&local, init) != VGPU_REGION_OK) {
    VGPU_LOG_ERROR("cannot create a process-local region either (%s): allocations on devices with "
                   "a memory limit are refused",
                   strerror(errno));
    __atomic_store_n(&g_attached, -1, __ATOMIC_RELEASE);
    return NULL;
  }
  g_map = local;
  __atomic_store_n(&g_attached, 1, __ATOMIC_RELEASE);
  return &g_map;
}

/* Caller holds g_state_mu. */
static struct vgpu_region_map *attach_locked(bool create) {
  if (g_attached == 1) return &g_map;
  if (g_attached < 0) return NULL;
  const struct vgpu_config *cfg = vgpu_config_get();
  if (cfg->disabled) return NULL;
  if (cfg->no_shared_region) { /* a stripped environment and an unusable region: fail safe */
    if (!create) return NULL;
    struct vgpu_region_init init; /* (config_adopt.c logged why) */
    build_init(&init, cfg);
    return degrade_locked(&init);
  }
  if (!create) {
    struct vgpu_region_map m;
    if (vgpu_region_open_existing(&m, cfg->cache_path, true) != VGPU_REGION_OK) return NULL;
    g_map = m;
    __atomic_store_n(&g_attached, 1, __ATOMIC_RELEASE);
    return &g_map;
  }
  struct vgpu_region_init init;
  build_init(&init, cfg);
  int rc = vgpu_region_open(&g_map, cfg->cache_path, &init);
  int first_rc = rc, first_err = errno;
  char alt[4200];
  vgpu_region_alt_path(cfg->cache_path, alt, sizeof alt);
  if (rc == VGPU_REGION_E_VERSION) {
    VGPU_LOG_ERROR("region version mismatch: %s holds %s, libvgpu writes v%d.%d; leaving it "
                   "untouched and using %s",
                   cfg->cache_path, g_map.found, VGPU_REGION_MAJOR, VGPU_REGION_MINOR, alt);
    rc = vgpu_region_open(&g_map, alt, &init);
  } else if (rc != VGPU_REGION_OK && rc != VGPU_REGION_E_BUSY && vgpu_degraded_can_share(rc, first_err)) {
    /* Every process of the container takes the same way here: one shared region, one limit. */
    rc = vgpu_region_open(&g_map, alt, &init);
    if (rc == VGPU_REGION_OK) vgpu_degraded_explain(cfg->cache_path, first_rc, first_err, alt, VGPU_DEGRADED_SHARED);
  }
  if (rc == VGPU_REGION_E_BUSY) {
    /* A creator stopped while holding the init lock: not a reason to give up sharing. This call
     * fails safe; the next one tries again. */
    VGPU_LOG_ERROR("shared region %s: its init lock stayed held for %llu ms (a stopped process?); "
                   "not attached yet",
                   cfg->cache_path, (unsigned long long)(vgpu_region_wait_ns / 1000000));
    return NULL;
  }
  if (rc != VGPU_REGION_OK) {
    /* No region the container's processes share. Where none can exist (the directory is missing)
     * the process counts on its own; anywhere else a process-local region would give every process
     * the whole limit, so memory is refused instead (fail safe). */
    bool can_share = first_rc == VGPU_REGION_E_VERSION || vgpu_degraded_can_share(first_rc, first_err);
    vgpu_degraded_explain(cfg->cache_path, first_rc, first_err, alt,
                          can_share ? VGPU_DEGRADED_REFUSED : VGPU_DEGRADED_LOCAL);
    if (can_share) vgpu_degraded_failsafe(&init);
    return degrade_locked(&init);
  }
  if (g_map.created)
    VGPU_LOG_INFO("created shared region %s (v%d.%d, %llu devices)", cfg->cache_path,
                  VGPU_REGION_MAJOR, VGPU_REGION_MINOR, (unsigned long long)g_map.r->device_num);
  else
    check_limits(cfg);
  /* Fill uuids HAMi's monitor needs if the creator could not (e.g. it had no NVML). */
  for (int d = 0; d < VGPU_MAX_DEVICES; d++)
    if (!g_map.r->uuids[d][0] && init.uuids[d][0])
      memcpy(g_map.r->uuids[d], init.uuids[d], VGPU_UUID_LEN);
  if (init.device_num > g_map.r->device_num) g_map.r->device_num = init.device_num;
  __atomic_store_n(&g_attached, 1, __ATOMIC_RELEASE);
  return &g_map;
}

struct vgpu_region_map *vgpu_state_region(bool create) {
  if (__atomic_load_n(&g_attached, __ATOMIC_ACQUIRE) == 1) return &g_map;
  pthread_mutex_lock(&g_state_mu);
  struct vgpu_region_map *m = attach_locked(create);
  pthread_mutex_unlock(&g_state_mu);
  return m;
}

static void *heartbeat_main(void *arg);

static void start_heartbeat_locked(void) {
  if (g_hb_running) return;
  if (vgpu_start_quiet_thread(heartbeat_main, NULL, "vgpu-heartbeat")) g_hb_running = 1;
}

/* Our slot is still ours: in the table's live part and holding our pid. It stops being ours when
 * HAMi-core's compaction moves it (copies the last slot over a dead one and shrinks proc_num) or
 * when a process judged us dead and freed it (another pid namespace, our heartbeat stalled for
 * over a second: SIGSTOP, a debugger, a frozen cgroup). */
static bool slot_ok(int s) {
  if (s < 0 || s >= VGPU_MAX_PROCS) return false;
  int n = __atomic_load_n(&g_map.r->proc_num, __ATOMIC_ACQUIRE);
  return s < n && __atomic_load_n(&g_map.r->procs[s].pid, __ATOMIC_ACQUIRE) == g_slot_pid &&
         __atomic_load_n(&g_map.r->procs[s].status, __ATOMIC_ACQUIRE) != VGPU_SLOT_FREE;
}

/* Caller holds g_write_mu. */
static void publish_locked(int s, int dev) {
  vgpu_slot_publish(&g_map, s, dev, g_used[dev]);
}

/* Caller holds g_write_mu. */
static void publish_all_locked(int s) {
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) publish_locked(s, d);
}

static void tag_ext_slot(int s, const struct vgpu_slot_identity *id) {
  if (!g_map.ext) return;
  vgpu_ext_slot_t *e = &g_map.ext->slots[s];
  __atomic_store_n(&e->start_time_ticks, id->start_time_ticks, __ATOMIC_RELEASE);
  __atomic_store_n(&e->heartbeat_ns, vgpu_now_realtime_ns(), __ATOMIC_RELEASE);
  __atomic_store_n(&e->hostpid_source, id->hostpid_source, __ATOMIC_RELEASE);
  __atomic_store_n(&e->pid, id->pid, __ATOMIC_RELEASE);
}

static int find_own_slot(int32_t pid) {
  int n = __atomic_load_n(&g_map.r->proc_num, __ATOMIC_ACQUIRE);
  if (n > VGPU_MAX_PROCS) n = VGPU_MAX_PROCS;
  for (int i = 0; i < n; i++)
    if (__atomic_load_n(&g_map.r->procs[i].pid, __ATOMIC_ACQUIRE) == pid &&
        __atomic_load_n(&g_map.r->procs[i].status, __ATOMIC_ACQUIRE) != VGPU_SLOT_FREE)
      return i;
  return -1;
}

static struct vgpu_slot_identity g_identity;

/* Caller holds g_state_mu; g_slot >= 0 and no longer ours. Follows a moved slot, or forgets a freed
 * one (registration follows). Either way nothing we hold is lost: it is published again. */
static void relocate_locked(void) {
  int old = g_slot;
  int i = find_own_slot(g_slot_pid);
  if (i >= 0) {
    tag_ext_slot(i, &g_identity);
    pthread_mutex_lock(&g_write_mu);
    __atomic_store_n(&g_slot, i, __ATOMIC_RELEASE);
    publish_all_locked(i);
    pthread_mutex_unlock(&g_write_mu);
    VGPU_LOG_INFO("slot %d of pid %d was moved to slot %d by another process's compaction "
                  "(HAMi-core); usage published again",
                  old, (int)g_slot_pid, i);
    return;
  }
  __atomic_store_n(&g_slot, -1, __ATOMIC_RELEASE);
  VGPU_LOG_WARN("slot %d was freed by another process while this one (pid %d) lived; registering "
                "again, its usage published again",
                old, (int)g_slot_pid);
}

/* Caller holds g_state_mu and the slot lock of `m`. -1 when the table is full. */
static int claim_locked(struct vgpu_region_map *m) {
  int idx = vgpu_region_claim_slot(m, &g_identity);
  __atomic_store_n(&m->r->last_kernel_time, (uint64_t)time(NULL), __ATOMIC_RELEASE);
  return idx;
}

int32_t vgpu_state_slot_hostpid(void) {
  int s = __atomic_load_n(&g_slot, __ATOMIC_ACQUIRE);
  if (s < 0 || __atomic_load_n(&g_attached, __ATOMIC_ACQUIRE) != 1 || !slot_ok(s)) return 0;
  return __atomic_load_n(&g_map.r->procs[s].hostpid, __ATOMIC_ACQUIRE);
}

int vgpu_state_slot(void) {
  int s = __atomic_load_n(&g_slot, __ATOMIC_ACQUIRE);
  if (s >= 0 && slot_ok(s)) return s;
  pthread_mutex_lock(&g_state_mu);
  if (g_slot >= 0 && !slot_ok(g_slot)) relocate_locked();
  if (g_slot < 0) {
    struct vgpu_region_map *m = attach_locked(true);
    if (m) {
      memset(&g_identity, 0, sizeof g_identity);
      vgpu_hostpid_detect(&g_identity);
      vgpu_proc_stat(g_identity.pid, &g_identity.start_time_ticks);
      int idx = -1;
      bool locked = vgpu_region_lock_for(m, vgpu_region_wait_ns);
      if (locked) {
        idx = claim_locked(m);
        vgpu_region_unlock(m);
      } else {
        VGPU_LOG_ERROR("registration waited %llu ms for the region lock (held by pid %d, "
                       "semaphore owner %llu: stopped or hung?); this call fails safe, the next "
                       "one tries again",
                       (unsigned long long)(vgpu_region_wait_ns / 1000000),
                       (int)vgpu_region_lock_holder(m),
                       (unsigned long long)__atomic_load_n(&m->r->owner_pid, __ATOMIC_ACQUIRE));
      }
      if (locked && idx < 0 && !m->local) {
        char what[96];
        snprintf(what, sizeof what, "all %d slots are held by live processes", VGPU_MAX_PROCS);
        vgpu_degraded_log(vgpu_config_get()->cache_path, "slot-table-full", what,
                          "run fewer GPU processes per container, or free the slots of dead ones "
                          "(shrreg-tool --cleanup)",
                          VGPU_DEGRADED_REFUSED);
        /* The region's limits win over the environment, as for a registered process; memory is
         * refused (a region of its own would give this process the whole limit again). */
        struct vgpu_region_init init;
        build_init(&init, vgpu_config_get());
        memcpy(init.limit, m->r->limit, sizeof init.limit);
        memcpy(init.sm_limit, m->r->sm_limit, sizeof init.sm_limit);
        vgpu_degraded_failsafe(&init);
        m = degrade_locked(&init);
        if (m && vgpu_region_lock_for(m, vgpu_region_wait_ns)) {
          idx = claim_locked(m);
          vgpu_region_unlock(m);
        }
      }
      if (m && idx >= 0) {
        g_slot_pid = g_identity.pid;
        tag_ext_slot(idx, &g_identity);
        pthread_mutex_lock(&g_write_mu);
        __atomic_store_n(&g_slot, idx, __ATOMIC_RELEASE);
        publish_all_locked(idx);
        pthread_mutex_unlock(&g_write_mu);
        VGPU_LOG_INFO("Initialized: slot %d, pid %d, host pid %d%s", idx, g_identity.pid,
                      g_identity.hostpid, m->local ? " (process-local region)" : "");
        start_heartbeat_locked();
      }
    }
  }
  s = g_slot;
  pthread_mutex_unlock(&g_state_mu);
  return s;
}

/* Caller holds the region lock. */
static void sweep_locked(struct vgpu_region_map *m, int self, int *suspects) {
  vgpu_region_sweep(m, self, suspects);
}

static void count_oom(struct vgpu_region_map *m, int ridx, uint64_t bytes) {
  if (!m->ext) return;
  __atomic_fetch_add(&m->ext->devices[ridx].oom_rejections, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&m->ext->devices[ridx].oom_rejected_bytes, bytes, __ATOMIC_RELAXED);
}

/* Adds to what we hold and publishes it. False when the slot turned out not to be ours (moved or
 * freed): the caller then calls vgpu_state_slot(), which publishes everything again. */
static bool account(int ridx, enum vgpu_mem_kind kind, int64_t delta) {
  pthread_mutex_lock(&g_write_mu);
  uint64_t *f = &g_used[ridx][kind];
  *f = delta >= 0 ? *f + (uint64_t)delta : (*f >= (uint64_t)(-delta) ? *f - (uint64_t)(-delta) : 0);
  int s = __atomic_load_n(&g_slot, __ATOMIC_ACQUIRE);
  bool ok = s >= 0 && __atomic_load_n(&g_attached, __ATOMIC_ACQUIRE) == 1 && slot_ok(s);
  if (ok) {
    publish_locked(s, ridx);
    ok = slot_ok(s); /* moved while we wrote: the copy may have missed it */
  }
  pthread_mutex_unlock(&g_write_mu);
  return ok || s < 0;
}

/* No region to count in (lock held past the bound by a stopped process, or no memory for even a
 * local region): a device with a memory limit refuses (fail safe), one without lets it through. */
static int refuse_without_slot(int ridx, uint64_t bytes) {
  uint64_t limit = vgpu_config_get()->mem_limit[ridx];
  if (__atomic_load_n(&g_attached, __ATOMIC_ACQUIRE) == 1)
    limit = __atomic_load_n(&g_map.r->limit[ridx], __ATOMIC_ACQUIRE);
  if (limit == 0) return 0;
  VGPU_LOG_ERROR("Device %d OOM: requested %lluMB refused because the region cannot be reached "
                 "(fail safe: a lock held past %llu ms, see above)",
                 ridx, (unsigned long long)(bytes >> 20),
                 (unsigned long long)(vgpu_region_wait_ns / 1000000));
  return -1;
}

int vgpu_mem_reserve(int ridx, uint64_t bytes, enum vgpu_mem_kind kind) {
  if (ridx < 0 || ridx >= VGPU_MAX_DEVICES) return 0;
  int slot = vgpu_state_slot();
  if (slot < 0) {
    if (refuse_without_slot(ridx, bytes) != 0) return -1;
    account(ridx, kind, (int64_t)bytes);
    return 0;
  }
  struct vgpu_region_map *m = &g_map;
  uint64_t limit = __atomic_load_n(&m->r->limit[ridx], __ATOMIC_ACQUIRE);
  if (limit == 0) {
    if (!account(ridx, kind, (int64_t)bytes)) vgpu_state_slot();
    return 0;
  }
  for (int attempt = 0;; attempt++) {
    int lk = vgpu_region_reserve_lock_for(m, vgpu_region_wait_ns);
    if (lk < 0) {
      VGPU_LOG_ERROR("Device %d OOM: requested %lluMB refused because the reservation lock stayed "
                     "held for %llu ms (a stopped or hung process in this container; fail safe)",
                     ridx, (unsigned long long)(bytes >> 20),
                     (unsigned long long)(vgpu_region_wait_ns / 1000000));
      count_oom(m, ridx, bytes);
      return -1;
    }
    bool mutex = lk == 1;
    limit = __atomic_load_n(&m->r->limit[ridx], __ATOMIC_ACQUIRE); /* may change at run time */
    uint64_t used = vgpu_region_used(m, ridx);
    int suspects = 0;
    if (limit && (used > limit || bytes > limit - used)) {
      /* Dead processes' memory first (slot lock nests inside the reservation lock). */
      if (!mutex) {
        sweep_locked(m, slot, &suspects);
      } else if (vgpu_region_lock_for(m, vgpu_region_wait_ns)) {
        sweep_locked(m, slot, &suspects);
        vgpu_region_unlock(m);
      }
      used = vgpu_region_used(m, ridx);
    }
    if (!limit || (used <= limit && bytes <= limit - used)) {
      bool ok = account(ridx, kind, (int64_t)bytes);
      vgpu_region_reserve_unlock(m, mutex);
      if (!ok) vgpu_state_slot();
      return 0;
    }
    vgpu_region_reserve_unlock(m, mutex);
    /* A slot that looks dead but still has a fresh heartbeat: wait for the verdict once. */
    if (suspects > 0 && attempt == 0) {
      struct timespec ts = {1, 100000000};
      nanosleep(&ts, NULL);
      continue;
    }
    uint64_t avail = used < limit ? limit - used : 0;
    VGPU_LOG_ERROR("Device %d OOM: requested %lluMB but only %lluMB available (requested %llu "
                   "bytes, available %llu bytes, used %llu / limit %llu)",
                   ridx, (unsigned long long)(bytes >> 20), (unsigned long long)(avail >> 20),
                   (unsigned long long)bytes, (unsigned long long)avail,
                   (unsigned long long)used, (unsigned long long)limit);
    count_oom(m, ridx, bytes);
    return -1;
  }
}

void vgpu_mem_add(int ridx, uint64_t bytes, enum vgpu_mem_kind kind) {
  if (ridx < 0 || ridx >= VGPU_MAX_DEVICES || bytes == 0) return;
  vgpu_state_slot();
  if (!account(ridx, kind, (int64_t)bytes)) vgpu_state_slot();
}

void vgpu_mem_release(int ridx, uint64_t bytes, enum vgpu_mem_kind kind) {
  if (ridx < 0 || ridx >= VGPU_MAX_DEVICES || bytes == 0) return;
  if (!account(ridx, kind, -(int64_t)bytes)) vgpu_state_slot();
}

uint64_t vgpu_mem_limit(int ridx) {
  if (ridx < 0 || ridx >= VGPU_MAX_DEVICES) return 0;
  struct vgpu_region_map *m = vgpu_state_region(false);
  if (m) return __atomic_load_n(&m->r->limit[ridx], __ATOMIC_ACQUIRE);
  return vgpu_config_get()->mem_limit[ridx];
}

uint64_t vgpu_mem_used(int ridx) {
  if (ridx < 0 || ridx >= VGPU_MAX_DEVICES) return 0;
  struct vgpu_region_map *m = vgpu_state_region(false);
  return m ? vgpu_region_used(m, ridx) : 0;
}

void vgpu_state_kernel_launched(void) {
  if (__atomic_load_n(&g_attached, __ATOMIC_ACQUIRE) != 1) return;
  uint64_t now = (uint64_t)time(NULL);
  if (__atomic_load_n(&g_last_kernel_sec, __ATOMIC_RELAXED) == now) return;
  __atomic_store_n(&g_last_kernel_sec, now, __ATOMIC_RELAXED);
  __atomic_store_n(&g_map.r->last_kernel_time, now, __ATOMIC_RELEASE);
}

static void *heartbeat_main(void *arg) {
  (void)arg;
  unsigned tick = 0;
  for (;;) {
    struct timespec ts = {0, HEARTBEAT_PERIOD_NS};
    nanosleep(&ts, NULL);
    int slot = __atomic_load_n(&g_slot, __ATOMIC_ACQUIRE);
    if (slot < 0) continue; /* exiting, or registering again */
    if (!slot_ok(slot)) {   /* moved by HAMi-core's compaction, or freed: follow it now */
      slot = vgpu_state_slot();
      if (slot < 0) continue;
    }
    if (g_map.ext && __atomic_load_n(&g_map.ext->slots[slot].pid, __ATOMIC_ACQUIRE) == g_slot_pid)
      __atomic_store_n(&g_map.ext->slots[slot].heartbeat_ns, vgpu_now_realtime_ns(),
                       __ATOMIC_RELEASE);
    if (++tick % 4 == 0 && vgpu_region_lock_for(&g_map, HEARTBEAT_PERIOD_NS)) {
      /* A busy lock (a stopped holder) just skips this sweep: fork() and exit never wait on us. */
      sweep_locked(&g_map, slot, NULL);
      vgpu_region_unlock(&g_map);
      /* No driver calls from this thread: it may run while the driver tears down at exit. */
    }
  }
  return NULL;
}

/* ---- fork and exit */

/* No lock may be held by another thread at fork: the child would inherit it locked forever. */
static void atfork_prepare(void) {
  pthread_mutex_lock(&g_state_mu);
  vgpu_region_atfork(0);
  pthread_mutex_lock(&g_write_mu);
  vgpu_track_atfork(0);
}
static void atfork_parent(void) {
  vgpu_track_atfork(1);
  pthread_mutex_unlock(&g_write_mu);
  vgpu_region_atfork(1);
  pthread_mutex_unlock(&g_state_mu);
}
static void atfork_child(void) {
  vgpu_track_atfork(1);
  pthread_mutex_unlock(&g_write_mu);
  vgpu_region_atfork(1);
  pthread_mutex_unlock(&g_state_mu);
  /* The child shares the mapping but owns neither the slot nor the parent's allocations. */
  g_slot = -1;
  g_hb_running = 0;
  g_slot_pid = 0;
  memset(g_used, 0, sizeof g_used);
  vgpu_track_reset_after_fork();
}

__attribute__((constructor)) static void state_ctor(void) {
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

__attribute__((destructor)) static void state_dtor(void) {
  int slot = __atomic_load_n(&g_slot, __ATOMIC_ACQUIRE);
  if (slot < 0 || g_slot_pid != getpid()) return;
  __atomic_store_n(&g_slot, -1, __ATOMIC_RELEASE);
  if (!slot_ok(slot)) slot = find_own_slot(g_slot_pid);
  if (slot < 0) return;
  if (!vgpu_region_lock_for(&g_map, SHUTDOWN_WAIT_NS)) {
    /* The slot lock is held by a stopped process: empty our own slot (we are its only writer) and
     * leave the slot itself to the next sweep, which frees it once our pid is gone. */
    static const uint64_t zero[3];
    pthread_mutex_lock(&g_write_mu);
    for (int d = 0; d < VGPU_MAX_DEVICES; d++) vgpu_slot_publish(&g_map, slot, d, zero);
    pthread_mutex_unlock(&g_write_mu);
    return;
  }
  pthread_mutex_lock(&g_write_mu);
  if (__atomic_load_n(&g_map.r->procs[slot].pid, __ATOMIC_ACQUIRE) == g_slot_pid)
    vgpu_region_free_slot(&g_map, slot);
  pthread_mutex_unlock(&g_write_mu);
  vgpu_region_unlock(&g_map);
  VGPU_LOG_INFO("Cleanup on exit for PID %d (slot %d)", (int)g_slot_pid, slot);
}

/*
 * state.c — see state.h.
 */
#include "state.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devices.h"
#include "real.h"
#include "track.h"
#include "vgpu.h"

#define HEARTBEAT_PERIOD_NS 250000000L

/* Lock order: g_state_mu -> region slot lock -> g_write_mu (leaf: the one writer of our slot). */
static pthread_mutex_t g_state_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_write_mu = PTHREAD_MUTEX_INITIALIZER;
static struct vgpu_region_map g_map = {.fd = -1};
static int g_attached;       /* 1 mapped, -1 failed for good, 0 not tried */
static int g_slot = -1;      /* our slot, -1 none */
static int g_slot_failed;    /* registration impossible: pass-through */
static pid_t g_slot_pid;     /* the pid that owns g_slot (fork detection) */
static int g_hb_running;
static uint64_t g_last_kernel_sec;

static void alt_path(const char *path, char *out, size_t cap) {
  size_t n = strlen(path);
  if (n > 6 && strcmp(path + n - 6, ".cache") == 0)
    snprintf(out, cap, "%.*s-libvgpu-v%d.%d.cache", (int)(n - 6), path, VGPU_REGION_MAJOR,
             VGPU_REGION_MINOR);
  else
    snprintf(out, cap, "%s-libvgpu-v%d.%d", path, VGPU_REGION_MAJOR, VGPU_REGION_MINOR);
}

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

/* Caller holds g_state_mu. */
static struct vgpu_region_map *attach_locked(bool create) {
  if (g_attached == 1) return &g_map;
  if (g_attached < 0) return NULL;
  const struct vgpu_config *cfg = vgpu_config_get();
  if (cfg->disabled) return NULL;
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
  if (rc == VGPU_REGION_E_VERSION) {
    char alt[4200];
    alt_path(cfg->cache_path, alt, sizeof alt);
    VGPU_LOG_ERROR("region version mismatch: %s holds %s, libvgpu writes v%d.%d; leaving it "
                   "untouched and using %s",
                   cfg->cache_path, g_map.found, VGPU_REGION_MAJOR, VGPU_REGION_MINOR, alt);
    rc = vgpu_region_open(&g_map, alt, &init);
  }
  if (rc != VGPU_REGION_OK) {
    VGPU_LOG_ERROR("cannot open shared region %s (error %d, %s): memory limit NOT enforced for "
                   "this process",
                   cfg->cache_path, rc, strerror(errno));
    g_attached = -1;
    return NULL;
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

static void hostpid_detect(struct vgpu_slot_identity *id) {
  id->pid = (int32_t)getpid();
  char link[64] = {0};
  ssize_t n = readlink("/proc/self/ns/pid", link, sizeof link - 1);
  if (n > 0 && strcmp(link, "pid:[4026531836]") == 0) { /* the initial pid namespace */
    id->hostpid = id->pid;
    id->hostpid_source = VGPU_HOSTPID_SAME_NAMESPACE;
    return;
  }
  FILE *f = fopen("/proc/self/status", "re");
  if (f) {
    char line[256];
    while (fgets(line, sizeof line, f)) {
      int outer = 0, inner = 0;
      if (sscanf(line, "NSpid: %d %d", &outer, &inner) == 2 && outer > 0) {
        id->hostpid = outer;
        id->hostpid_source = VGPU_HOSTPID_NSPID;
      }
    }
    fclose(f);
  }
  if (!id->hostpid)
    VGPU_LOG_INFO("host pid is unknown inside this pid namespace (host pid is error is expected "
                  "here); slot hostpid left 0 for the node exporter to fill");
}

static void *heartbeat_main(void *arg);

static void start_heartbeat_locked(void) {
  if (g_hb_running) return;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits: app signals stay with app */
  pthread_t t;
  if (pthread_create(&t, &attr, heartbeat_main, NULL) == 0) {
    g_hb_running = 1;
    pthread_setname_np(t, "vgpu-heartbeat");
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
}

/* Our slot can only be taken from us by a process that judged us dead: one in another pid
 * namespace after our heartbeat stalled for over a second (SIGSTOP, a debugger, a frozen cgroup).
 * Then we must not write into what may now be someone else's slot: register again. */
static bool slot_lost(int s) {
  return __atomic_load_n(&g_map.r->procs[s].pid, __ATOMIC_ACQUIRE) != g_slot_pid;
}

int vgpu_state_slot(void) {
  int s = __atomic_load_n(&g_slot, __ATOMIC_ACQUIRE);
  if (s >= 0 && !slot_lost(s)) return s;
  if (s >= 0 && __atomic_compare_exchange_n(&g_slot, &s, -1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    VGPU_LOG_WARN("slot %d was freed by another process while this one (pid %d) lived; registering "
                  "again, earlier allocations are no longer counted",
                  s, (int)g_slot_pid);
  if (__atomic_load_n(&g_slot_failed, __ATOMIC_ACQUIRE)) return -1;
  pthread_mutex_lock(&g_state_mu);
  if (g_slot < 0 && !g_slot_failed) {
    struct vgpu_region_map *m = attach_locked(true);
    if (!m) {
      g_slot_failed = 1;
    } else {
      struct vgpu_slot_identity id = {0};
      hostpid_detect(&id);
      vgpu_proc_stat(id.pid, &id.start_time_ticks);
      vgpu_region_lock(m);
      int idx = vgpu_region_claim_slot(m, &id);
      __atomic_store_n(&m->r->last_kernel_time, (uint64_t)time(NULL), __ATOMIC_RELEASE);
      vgpu_region_unlock(m);
      if (idx < 0) {
        VGPU_LOG_ERROR("shared region slot table full (%d processes): memory limit NOT enforced "
                       "for this process",
                       VGPU_MAX_PROCS);
        g_slot_failed = 1;
      } else {
        g_slot_pid = id.pid;
        __atomic_store_n(&g_slot, idx, __ATOMIC_RELEASE);
        VGPU_LOG_INFO("Initialized: slot %d, pid %d, host pid %d", idx, id.pid, id.hostpid);
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

int vgpu_mem_reserve(int ridx, uint64_t bytes, enum vgpu_mem_kind kind) {
  if (ridx < 0 || ridx >= VGPU_MAX_DEVICES) return 0;
  int slot = vgpu_state_slot();
  if (slot < 0) return 0;
  struct vgpu_region_map *m = &g_map;
  uint64_t limit = __atomic_load_n(&m->r->limit[ridx], __ATOMIC_ACQUIRE);
  if (limit == 0) {
    pthread_mutex_lock(&g_write_mu);
    vgpu_slot_add(m, slot, ridx, kind, (int64_t)bytes);
    pthread_mutex_unlock(&g_write_mu);
    return 0;
  }
  for (int attempt = 0;; attempt++) {
    bool mutex = vgpu_region_reserve_lock(m);
    limit = __atomic_load_n(&m->r->limit[ridx], __ATOMIC_ACQUIRE); /* may change at run time */
    uint64_t used = vgpu_region_used(m, ridx);
    int suspects = 0;
    if (limit && (used > limit || bytes > limit - used)) {
      /* Dead processes' memory first (slot lock nests inside the reservation lock). */
      if (mutex) vgpu_region_lock(m);
      sweep_locked(m, slot, &suspects);
      if (mutex) vgpu_region_unlock(m);
      used = vgpu_region_used(m, ridx);
    }
    if (!limit || (used <= limit && bytes <= limit - used)) {
      pthread_mutex_lock(&g_write_mu);
      vgpu_slot_add(m, slot, ridx, kind, (int64_t)bytes);
      pthread_mutex_unlock(&g_write_mu);
      vgpu_region_reserve_unlock(m, mutex);
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
  int slot = vgpu_state_slot();
  if (slot < 0) return;
  pthread_mutex_lock(&g_write_mu); /* one writer per slot */
  vgpu_slot_add(&g_map, slot, ridx, kind, (int64_t)bytes);
  pthread_mutex_unlock(&g_write_mu);
}

void vgpu_mem_release(int ridx, uint64_t bytes, enum vgpu_mem_kind kind) {
  if (ridx < 0 || ridx >= VGPU_MAX_DEVICES || bytes == 0) return;
  int slot = __atomic_load_n(&g_slot, __ATOMIC_ACQUIRE);
  if (slot < 0 || slot_lost(slot)) return;
  pthread_mutex_lock(&g_write_mu);
  vgpu_slot_add(&g_map, slot, ridx, kind, -(int64_t)bytes);
  pthread_mutex_unlock(&g_write_mu);
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
    if (slot < 0 || slot_lost(slot)) continue; /* exiting, or about to register again */
    if (g_map.ext)
      __atomic_store_n(&g_map.ext->slots[slot].heartbeat_ns, vgpu_now_realtime_ns(),
                       __ATOMIC_RELEASE);
    if (++tick % 4 == 0) {
      vgpu_region_lock(&g_map);
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
  g_slot_failed = 0;
  g_hb_running = 0;
  g_slot_pid = 0;
  vgpu_track_reset_after_fork();
}

__attribute__((constructor)) static void state_ctor(void) {
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

__attribute__((destructor)) static void state_dtor(void) {
  int slot = __atomic_load_n(&g_slot, __ATOMIC_ACQUIRE);
  if (slot < 0 || g_slot_pid != getpid()) return;
  __atomic_store_n(&g_slot, -1, __ATOMIC_RELEASE);
  vgpu_region_lock(&g_map);
  pthread_mutex_lock(&g_write_mu);
  if (__atomic_load_n(&g_map.r->procs[slot].pid, __ATOMIC_ACQUIRE) == g_slot_pid)
    vgpu_region_free_slot(&g_map, slot);
  pthread_mutex_unlock(&g_write_mu);
  vgpu_region_unlock(&g_map);
  VGPU_LOG_INFO("Cleanup on exit for PID %d (slot %d)", (int)g_slot_pid, slot);
}

/*
 * shrreg-tool's writers: --set-sm-limit/--set-mem-limit, --cleanup and --force-unlock. Slot-table
 * edits happen under the region's slot lock, taken without the library's dead-owner recovery; the
 * slot-table semaphore is judged before anything locks or posts it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "shrreg_tool.h"

/* ---------------------------------------------------------------------------------------------- */
/* Writers */

static int open_for_write(region_t *r, const options_t *o) {
  int rc = region_open(r, o->file, 1);
  if (rc != EXIT_OK) return rc;
  if (r->v.lay == NULL) return EXIT_BAD_LAYOUT;
  if (!r->v.lay->writable)
    return fail(EXIT_READ_ONLY, "%s: layout %s is read-only for this tool (only v1.1 and v1.2 are written; "
                                "upgrade the library in this container and recreate the region)", o->file, r->v.lay->label);
  return EXIT_OK;
}

static int check_device_arg(const region_t *r, int dev) {
  int n = vgpu_region_view_device_num(&r->v);
  if (n > 0 && dev >= n) return fail(EXIT_USAGE, "device %d: the region has %d device(s)", dev, n);
  return EXIT_OK;
}

int cmd_set_limit(const options_t *o) {
  /* static: the SIGBUS path in shrreg_tool_main reads it (g_mapped, g_held) after siglongjmp
   * has unwound this frame; one command runs per process. */
  static region_t r;
  int rc = open_for_write(&r, o);
  int sm = o->cmd == CMD_SET_SM;
  uint64_t old;
  if (rc == EXIT_OK) rc = check_device_arg(&r, o->set_dev);
  if (rc != EXIT_OK) {
    region_close(&r);
    return rc;
  }
  old = vgpu_region_view_set_limit(&r.v, sm, o->set_dev, o->set_value);
  if (o->json) {
    jw_t w = {stdout, 0, {1}};
    jw_open(&w, NULL, '{');
    jw_str(&w, "field", sm ? "sm_limit" : "limit");
    jw_i64(&w, "device", o->set_dev);
    jw_u64(&w, "old", old);
    jw_u64(&w, "new", o->set_value);
    jw_close(&w, '}');
  } else if (sm) {
    printf("device %d: SM limit %" PRIu64 "%% -> %" PRIu64 "%%%s\n", o->set_dev, old, o->set_value,
           o->set_value == 0 || o->set_value >= 100 ? " (no limit)" : "");
    if (r.v.map.ext == NULL)
      printf("note: HAMi-core reads the SM limit once per process; processes started before this change keep the old one\n");
  } else {
    uint64_t used = vgpu_region_used(&r.v.map, o->set_dev);
    printf("device %d: memory limit %" PRIu64 " -> %" PRIu64 " bytes%s\n", o->set_dev, old, o->set_value, o->set_value == 0 ? " (unlimited)" : "");
    if (o->set_value != 0 && used > o->set_value)
      printf("warning: %" PRIu64 " bytes are already in use; further allocations will fail until usage drops\n", used);
  }
  region_close(&r);
  return EXIT_OK;
}

/* The library's slot lock without its dead-owner recovery: a holder this tool judges gone is left
 * to --force-unlock, an explicit decision. The region stays registered for the SIGBUS path. */
static int lock_acquire(region_t *r, int timeout_ms) {
  if (!vgpu_region_lock_no_recovery_for(&r->v.map, (uint64_t)timeout_ms * 1000000ull, NULL)) return -1;
  g_held = r;
  return 0;
}

void lock_release(region_t *r) {
  g_held = NULL;
  vgpu_region_unlock(&r->v.map);
}

/* The semaphore's bytes are tenant-written: judged before anything locks or posts it. */
static int check_semaphore(const region_t *r, const options_t *o) {
  lock_view_t lk;
  read_lock(r, o, &lk);
  if (lk.sem_valid) return EXIT_OK;
  return fail(EXIT_BAD_SEMAPHORE,
              "%s: the slot-table semaphore is corrupt (%s); refusing to lock or release it, nothing "
              "changed. Fix: once no process of the container uses the region, delete the file "
              "(or restart the container); its processes create a fresh one",
              o->file, lk.sem_invalid_why);
}

/* --cleanup and --force-unlock: the region opened for writing, --device within it and the slot
 * table's semaphore valid, or closed again with the reason's exit code. */
static int open_for_repair(region_t *r, const options_t *o) {
  int rc = open_for_write(r, o);
  if (rc == EXIT_OK && o->device >= 0) rc = check_device_arg(r, o->device);
  if (rc == EXIT_OK) rc = check_semaphore(r, o);
  if (rc != EXIT_OK) region_close(r);
  return rc;
}

typedef struct {
  int slot, pid, hostpid;
  liveness_t why;
  uint64_t bytes;
} dropped_t;

int cmd_cleanup(const options_t *o) {
  /* static: the SIGBUS path in shrreg_tool_main reads it (g_mapped, g_held) after siglongjmp
   * has unwound this frame; one command runs per process. */
  static region_t r;
  dropped_t *dropped;
  int ndropped = 0;
  int kept_unknown = 0;
  int freed_empty = 0;
  int i;
  int n;
  int rc = open_for_repair(&r, o);
  if (rc != EXIT_OK) return rc;
  dropped = calloc(VGPU_MAX_PROCS, sizeof *dropped);
  if (dropped == NULL) {
    region_close(&r);
    return fail(EXIT_IO, "out of memory");
  }
  if (lock_acquire(&r, o->lock_timeout_ms) != 0) {
    lock_view_t lk;
    read_lock(&r, o, &lk);
    free(dropped);
    region_close(&r);
    if (lk.holder_pid != 0)
      return fail(EXIT_LOCK_BUSY, "slot-table lock busy for %d ms: held by pid %d (%s)%s", o->lock_timeout_ms,
                  lk.holder_pid, vgpu_liveness_name(lk.holder_live),
                  vgpu_liveness_dead(lk.holder_live) ? "; the holder is gone: run --force-unlock first" : "; try again later");
    return fail(EXIT_LOCK_BUSY, "slot-table lock busy for %d ms with no holder recorded; if it stays so, run --force-unlock",
                o->lock_timeout_ms);
  }
  if (!r.v.map.sem_held) {
    /* The bytes turned bad between the check and the lock (the library then takes the record
     * lock only, which HAMi-core processes sharing the file do not honour): change nothing. */
    lock_release(&r);
    free(dropped);
    rc = check_semaphore(&r, o);
    region_close(&r);
    return rc != EXIT_OK ? rc : fail(EXIT_BAD_SEMAPHORE, "%s: the slot-table semaphore was not usable when locking; nothing changed", o->file);
  }
  /* One generation period (odd while it runs) around the whole pass, not one per freed slot. */
  vgpu_region_generation_begin(&r.v.map);
  n = vgpu_region_view_proc_num(&r.v);
  for (i = 0; i < n; i++) {
    slot_view_t s;
    int pid;
    int d;
    vgpu_region_view_read_slot(&r.v, i, &s);
    if (s.pid == 0) continue;
    if (o->device >= 0 && !device_in_use(&s, o->device)) continue;
    pid = live_pid_of(o, &s);
    if (o->npids > 0) {
      int k;
      int listed = 0;
      for (k = 0; k < o->npids; k++) {
        if (o->pids[k] != s.pid) continue;
        /* A slot that changed since the caller judged it (re-registered by a new process with the
         * same container pid) is not the one the caller saw: keep it. */
        if (o->pid_hostpids[k] >= 0 && o->pid_hostpids[k] != s.hostpid) continue;
        if (o->pid_starts[k] >= 0 && s.has_ext && (uint64_t)o->pid_starts[k] != s.start_ticks) continue;
        listed = 1;
      }
      if (!listed) continue;
      s.live = VGPU_LIVE_GONE;
    } else {
      s.live = vgpu_proc_liveness(o->proc_root, pid, s.start_ticks, NULL);
      /* A fresh heartbeat means the owner lives in another pid namespace sharing the file. */
      if (vgpu_liveness_dead(s.live) && vgpu_heartbeat_fresh(s.heartbeat_ns, vgpu_now_realtime_ns()))
        s.live = VGPU_LIVE_UNKNOWN;
    }
    if (!vgpu_liveness_dead(s.live)) {
      if (s.live == VGPU_LIVE_UNKNOWN || s.live == VGPU_LIVE_NO_PID) kept_unknown++;
      continue;
    }
    dropped[ndropped].slot = i;
    dropped[ndropped].pid = s.pid;
    dropped[ndropped].hostpid = s.hostpid;
    dropped[ndropped].why = s.live;
    for (d = 0; d < VGPU_MAX_DEVICES; d++) dropped[ndropped].bytes += s.dev[d].total;
    ndropped++;
    vgpu_region_clear_slot(&r.v.map, i); /* in place: slots never move */
  }
  freed_empty = n - vgpu_region_trim_slots(&r.v.map);
  n -= freed_empty;
  vgpu_region_generation_end(&r.v.map);
  lock_release(&r);
  if (o->json) {
    jw_t w = {stdout, 0, {1}};
    jw_open(&w, NULL, '{');
    jw_open(&w, "dropped", '[');
    for (i = 0; i < ndropped; i++) {
      jw_open(&w, NULL, '{');
      jw_i64(&w, "slot", dropped[i].slot);
      jw_i64(&w, "pid", dropped[i].pid);
      jw_i64(&w, "hostpid", dropped[i].hostpid);
      jw_str(&w, "reason", vgpu_liveness_name(dropped[i].why));
      jw_u64(&w, "used_bytes", dropped[i].bytes);
      jw_close(&w, '}');
    }
    jw_close(&w, ']');
    jw_i64(&w, "trailing_slots_trimmed", freed_empty);
    jw_i64(&w, "kept_unjudgeable", kept_unknown);
    jw_i64(&w, "proc_num", n);
    jw_close(&w, '}');
  } else {
    for (i = 0; i < ndropped; i++)
      printf("dropped slot %d: pid %d (host pid %d) %s, held %" PRIu64 " MB\n", dropped[i].slot, dropped[i].pid,
             dropped[i].hostpid, vgpu_liveness_name(dropped[i].why), dropped[i].bytes >> 20);
    if (freed_empty) printf("trimmed %d free slot(s) from the end of the table\n", freed_empty);
    if (kept_unknown) printf("kept %d slot(s) whose process could not be judged (pid not visible or unreadable)\n", kept_unknown);
    printf("cleanup: %d dead process slot(s) freed, slot table now %d entries\n", ndropped, n);
  }
  free(dropped);
  region_close(&r);
  return EXIT_OK;
}

int cmd_force_unlock(const options_t *o) {
  /* static: the SIGBUS path in shrreg_tool_main reads it (g_mapped, g_held) after siglongjmp
   * has unwound this frame; one command runs per process. */
  static region_t r;
  lock_view_t lk;
  int rc = open_for_repair(&r, o);
  const char *action = NULL;
  if (rc != EXIT_OK) return rc;
  read_lock(&r, o, &lk);
  if (o->holder != 0) {
    if (lk.holder_pid != o->holder) {
      region_close(&r);
      if (lk.holder_pid == 0) return fail(EXIT_FAILED, "--holder %d: no holder is recorded now; nothing released", o->holder);
      return fail(EXIT_HOLDER_ALIVE, "--holder %d: the lock is now recorded as held by pid %d; nothing released", o->holder, lk.holder_pid);
    }
    /* The caller saw this holder's namespace; our own /proc cannot, so trust it. */
    lk.state = VGPU_LOCK_STALE_RECORD;
    lk.holder_live = VGPU_LIVE_GONE;
  }
  switch (lk.state) {
    case VGPU_LOCK_FREE:
      action = "nothing to unlock: the slot-table lock is free";
      break;
    case VGPU_LOCK_HELD:
      region_close(&r);
      if (lk.holder_live == VGPU_LIVE_UNKNOWN)
        return fail(EXIT_HOLDER_ALIVE, "refusing: lock holder pid %d cannot be judged from this pid namespace "
                                       "(its /proc entry is unreadable); run where the holder is visible", lk.holder_pid);
      if (lk.held_ns != 0)
        return fail(EXIT_HOLDER_ALIVE, "refusing: lock holder pid %d is alive (held %.1f s); unlocking would let two "
                                       "processes edit the slot table at once. Find out why it is stuck, or stop it first",
                    lk.holder_pid, (double)lk.held_ns / 1e9);
      return fail(EXIT_HOLDER_ALIVE, "refusing: lock holder pid %d is alive; unlocking would let two processes edit the "
                                     "slot table at once. Find out why it is stuck, or stop it first", lk.holder_pid);
    case VGPU_LOCK_STALE_RECORD:
      /* Clears only records that still name this holder; posts only a semaphore that is down. */
      vgpu_region_release_stale_lock(&r.v.map, lk.holder_pid);
      action = "released the lock of a holder that is gone";
      break;
    case VGPU_LOCK_LOST: {
      /* Watch: a live holder publishes itself within microseconds of taking the semaphore, and
       * HAMi holders keep it for milliseconds. Down and unowned for the whole window = lost post. */
      int waited = 0;
      while (waited < o->observe_ms) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
        waited += 10;
        read_lock(&r, o, &lk);
        if (lk.state != VGPU_LOCK_LOST) break;
      }
      if (lk.state == VGPU_LOCK_FREE) {
        action = "nothing to unlock: the lock was released while watching";
        break;
      }
      if (lk.state != VGPU_LOCK_LOST) {
        region_close(&r);
        return fail(EXIT_HOLDER_ALIVE, "refusing: a holder (pid %d) took the lock while watching; it is in use", lk.holder_pid);
      }
      vgpu_region_release_stale_lock(&r.v.map, 0); /* posts only if still down */
      action = "released a semaphore that stayed down with no holder recorded (lost post after a killed holder)";
      break;
    }
  }
  if (o->json) {
    jw_t w = {stdout, 0, {1}};
    jw_open(&w, NULL, '{');
    jw_str(&w, "result", action);
    jw_str(&w, "previous_state", lock_state_key(lk.state));
    if (lk.holder_pid != 0) jw_i64(&w, "previous_holder_pid", lk.holder_pid);
    jw_close(&w, '}');
  } else {
    printf("%s", action);
    if (lk.holder_pid != 0 && lk.state == VGPU_LOCK_STALE_RECORD) printf(" (pid %d, %s)", lk.holder_pid, vgpu_liveness_name(lk.holder_live));
    printf("\n");
    if (o->device >= 0) printf("note: the slot-table lock covers all devices of the region\n");
  }
  region_close(&r);
  return EXIT_OK;
}

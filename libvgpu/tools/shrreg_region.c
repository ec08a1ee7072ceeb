/*
 * shrreg-tool's view of the mapped region: opening it (--expect-inode, the SIGBUS path's
 * bookkeeping), the snapshot --inspect shows and --cleanup decides on, and the lock state. The
 * region bytes, layouts, liveness and lock judgement are the library's (src/region.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shrreg_tool.h"

/* ---------------------------------------------------------------------------------------------- */
/* The mapped region */

sigjmp_buf g_bus_jmp;
volatile sig_atomic_t g_bus_armed;
/* For the SIGBUS path: the region mapped now (to tell "shrank" from "could not get a page"), and
 * the region whose lock this process holds (released there, so a fault never strands the lock). */
region_t *volatile g_mapped;
region_t *volatile g_held;

static int errno_exit(int e) {
  if (e == ENOENT || e == ENOTDIR) return EXIT_NO_FILE;
  if (e == EACCES || e == EPERM || e == EROFS) return EXIT_PERMISSION;
  return EXIT_IO;
}

/* A copy of the options, taken before any command opens the region (for --expect-inode). */
options_t g_expect_opts;
const options_t *g_expect;

int region_open(region_t *r, const char *path, int rw) {
  struct stat st;
  const char *why = NULL;
  int nofollow = (g_expect != NULL && g_expect->expect_inode) ? O_NOFOLLOW : 0;
  int fd;
  int rc;
  memset(r, 0, sizeof *r);
  r->path = path;
  r->v.map.fd = -1;
  /* O_NONBLOCK: a FIFO planted at the path must not hang the tool. O_NOFOLLOW when the node-side
   * caller names the file it judged: a tenant may have swapped the path for a link since. */
  fd = open(path, (rw ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | nofollow);
  if (fd < 0 && nofollow && errno == ELOOP)
    return fail(EXIT_CHANGED, "%s: is now a symbolic link, not the file the caller judged; nothing changed", path);
  if (fd < 0) {
    int e = errno;
    int code = errno_exit(e);
    if (code == EXIT_NO_FILE)
      return fail(code, "%s: no such region file (set --file or CUDA_DEVICE_MEMORY_SHARED_CACHE; the file "
                        "appears after the container's first CUDA/NVML call)", path);
    if (code == EXIT_PERMISSION)
      return fail(code, "%s: permission denied opening %s (%s)", path, rw ? "read-write" : "read-only", strerror(e));
    return fail(code, "%s: %s", path, strerror(e));
  }
  r->v.map.fd = fd;
  if (fstat(fd, &st) != 0) return fail(EXIT_IO, "%s: %s", path, strerror(errno));
  if (nofollow && (!S_ISREG(st.st_mode) || st.st_nlink != 1 || (uint64_t)st.st_dev != g_expect->expect_dev ||
                   (uint64_t)st.st_ino != g_expect->expect_ino))
    return fail(EXIT_CHANGED,
                "%s: not the file the caller judged (expected %llu:%llu, found %llu:%llu, %s, %lu link(s)); "
                "nothing changed",
                path, (unsigned long long)g_expect->expect_dev, (unsigned long long)g_expect->expect_ino,
                (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                S_ISREG(st.st_mode) ? "regular" : "not regular", (unsigned long)st.st_nlink);
  rc = vgpu_region_view_map(&r->v, fd, rw, &why);
  if (r->v.base != NULL) g_mapped = r;
  switch (rc) {
    case VGPU_VIEW_OK: return EXIT_OK;
    case VGPU_VIEW_E_NOT_REGULAR: return fail(EXIT_BAD_LAYOUT, "%s: not a regular file", path);
    case VGPU_VIEW_E_TOO_SMALL:
      return fail(EXIT_BAD_LAYOUT, "%s: %zu bytes is too small to be a region", path, r->v.size);
    case VGPU_VIEW_E_TOO_LARGE:
      return fail(EXIT_BAD_LAYOUT, "%s: %zu bytes is too large to be a region", path, r->v.size);
    case VGPU_VIEW_E_MMAP: {
      int e = errno;
      return fail(errno_exit(e) == EXIT_PERMISSION ? EXIT_PERMISSION : EXIT_IO, "%s: mmap: %s", path, strerror(e));
    }
    case VGPU_VIEW_E_LAYOUT:
      return fail(EXIT_BAD_LAYOUT, "%s: unknown layout: %s (%zu bytes)", path, why, r->v.size);
    default: return fail(EXIT_IO, "%s: %s", path, strerror(errno));
  }
}

void region_close(region_t *r) {
  if (g_mapped == r) g_mapped = NULL;
  vgpu_region_view_close(&r->v);
}

void copy_clean(char *dst, size_t cap, const char *src, size_t max) {
  size_t i;
  size_t o = 0;
  for (i = 0; i < max && src[i] != '\0' && o + 1 < cap; i++) {
    unsigned char c = (unsigned char)src[i];
    dst[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  }
  dst[o] = '\0';
}

/* ---------------------------------------------------------------------------------------------- */
/* Snapshot: what --inspect shows and --cleanup decides on */

int live_pid_of(const options_t *o, const slot_view_t *s) { return o->host_pids ? s->hostpid : s->pid; }

int device_in_use(const slot_view_t *s, int d) {
  return s->dev[d].total != 0 || s->dev[d].monitor != 0 || s->dev[d].sm_util != 0;
}

int take_snapshot(const region_t *r, const options_t *o, snapshot_t *snap) {
  int attempt;
  int d;
  int i;
  memset(snap, 0, sizeof *snap);
  vgpu_region_view_header(&r->v, &snap->h);
  snap->raw_device_num = snap->h.device_num > (uint64_t)INT32_MAX ? INT32_MAX : (int)snap->h.device_num;
  snap->slots = calloc(VGPU_MAX_PROCS, sizeof *snap->slots);
  if (snap->slots == NULL) return fail(EXIT_IO, "out of memory");

  /* Devices: device_num once NVML has run; extra devices only where slots record usage (limits
   * are no evidence: CUDA_DEVICE_MEMORY_LIMIT fills all 16 entries). Before NVML ran, device 0
   * stands in when it has a limit. */
  snap->device_count = vgpu_region_view_device_num(&r->v);
  if (snap->device_count == 0 && (vgpu_region_view_limit(&r->v, false, 0) != 0 || vgpu_region_view_limit(&r->v, true, 0) != 0)) {
    snap->inferred_devices = 1;
    snap->device_count = 1;
  }

  /* Slot pass, redone once when proc_num moved (a compaction raced us). */
  for (attempt = 0; attempt < 2; attempt++) {
    int n = vgpu_region_view_proc_num(&r->v);
    snap->nslots = 0;
    for (i = 0; i < n; i++) {
      slot_view_t *s = &snap->slots[snap->nslots];
      int j;
      int dup = 0;
      vgpu_region_view_read_slot(&r->v, i, s);
      if (s->pid == 0) continue;
      for (j = 0; j < snap->nslots; j++)
        if (snap->slots[j].pid == s->pid) dup = 1;
      if (dup) continue;
      snap->nslots++;
    }
    if (vgpu_region_view_proc_num(&r->v) == n) break;
  }
  for (i = 0; i < snap->nslots; i++) {
    slot_view_t *s = &snap->slots[i];
    s->live = vgpu_proc_liveness(o->proc_root, live_pid_of(o, s), s->start_ticks, NULL);
    if (vgpu_liveness_dead(s->live)) snap->dead++;
    else if (s->status == VGPU_SLOT_SUSPENDED) snap->suspended++;
    else if (s->status == VGPU_SLOT_RUNNING) snap->running++;
    if (s->torn) snap->torn++;
    for (d = 0; d < VGPU_MAX_DEVICES; d++)
      if (device_in_use(s, d) && d >= snap->device_count) {
        snap->device_count = d + 1;
        snap->inferred_devices = 1;
      }
  }
  for (d = 0; d < snap->device_count; d++) {
    dev_view_t *dv = &snap->dev[d];
    dv->index = d;
    copy_clean(dv->uuid, sizeof dv->uuid, vgpu_region_view_uuid(&r->v, d), VGPU_UUID_LEN);
    dv->limit = vgpu_region_view_limit(&r->v, false, d);
    dv->sm_limit = vgpu_region_view_limit(&r->v, true, d);
    for (i = 0; i < snap->nslots; i++) {
      const slot_view_t *s = &snap->slots[i];
      if (!device_in_use(s, d) && snap->device_count > 1) continue;
      dv->tasks++;
      if (vgpu_liveness_dead(s->live)) dv->dead_used += s->dev[d].total;
      else if (s->status != 0) dv->used += s->dev[d].total;
    }
  }
  read_lock(r, o, &snap->lock);
  return EXIT_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* Lock state */

/* Lock state as the library judges it (see vgpu_region_view_lock_state), liveness from --proc-root. */
void read_lock(const region_t *r, const options_t *o, lock_view_t *lk) {
  vgpu_region_view_lock_state(&r->v, o->proc_root, vgpu_now_realtime_ns(), lk);
}

const char *lock_state_name(lock_state_t s) {
  switch (s) {
    case VGPU_LOCK_FREE: return "UNLOCKED";
    case VGPU_LOCK_HELD: return "LOCKED";
    case VGPU_LOCK_STALE_RECORD: return "LOCKED (holder gone)";
    case VGPU_LOCK_LOST: return "LOCKED (no holder recorded)";
  }
  return "UNKNOWN";
}

const char *lock_state_key(lock_state_t s) {
  switch (s) {
    case VGPU_LOCK_FREE: return "unlocked";
    case VGPU_LOCK_HELD: return "locked";
    case VGPU_LOCK_STALE_RECORD: return "holder_gone";
    case VGPU_LOCK_LOST: return "no_holder_recorded";
  }
  return "unknown";
}

/*
 * region_view.c — the tools' read-only multi-layout view of a region file (shrreg-tool); see
 * region.h. Split from region.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "region_internal.h"
#include "vgpu.h"

/* ---- tools: read-only multi-layout view (see region.h) */

#define SEQLOCK_MAX_TRIES 100

static int32_t view_rd32(const struct vgpu_region_view *v, size_t off) {
  return __atomic_load_n((const int32_t *)(const void *)(v->base + off), __ATOMIC_ACQUIRE);
}
static uint64_t view_rd64(const struct vgpu_region_view *v, size_t off) {
  return __atomic_load_n((const uint64_t *)(const void *)(v->base + off), __ATOMIC_ACQUIRE);
}

int vgpu_region_view_map(struct vgpu_region_view *v, int fd, bool writable, const char **why) {
  struct stat st;
  memset(v, 0, sizeof *v);
  v->map.fd = fd;
  v->writable = writable;
  *why = NULL;
  if (fstat(fd, &st) != 0) return VGPU_VIEW_E_IO;
  if (!S_ISREG(st.st_mode)) return VGPU_VIEW_E_NOT_REGULAR;
  v->size = (size_t)st.st_size;
  if (st.st_size < 12) return VGPU_VIEW_E_TOO_SMALL;
  if ((uint64_t)st.st_size > VGPU_MAX_REGION_FILE_SIZE) return VGPU_VIEW_E_TOO_LARGE;
  void *p = mmap(NULL, v->size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return VGPU_VIEW_E_MMAP;
  v->base = p;
  v->lay = vgpu_detect_layout(v->base, v->size, why);
  if (v->lay == NULL) return VGPU_VIEW_E_LAYOUT;
  if (v->lay->id == VGPU_LAYOUT_V1_1 || v->lay->id == VGPU_LAYOUT_V1_2) {
    v->map.r = (vgpu_region_t *)(void *)v->base; /* v1.1 and v1.2 are these bytes */
    v->map.map_size = v->size;
  }
  if (v->lay->id == VGPU_LAYOUT_V1_2 &&
      v->size >= VGPU_EXT_OFFSET + offsetof(vgpu_region_ext_t, devices)) {
    vgpu_region_ext_t *ext = (vgpu_region_ext_t *)(void *)(v->base + VGPU_EXT_OFFSET);
    uint32_t ext_size = LOAD_RELAXED(&ext->size);
    size_t room = v->size - VGPU_EXT_OFFSET;
    if (LOAD(&ext->magic) == VGPU_EXT_MAGIC && ext->major == VGPU_EXT_MAJOR) {
      v->map.ext = ext;
      v->ext_has_devices = ext_size >= offsetof(vgpu_region_ext_t, slots) &&
                           room >= offsetof(vgpu_region_ext_t, slots);
      v->ext_has_slots = ext_size >= sizeof(vgpu_region_ext_t) && room >= sizeof(vgpu_region_ext_t);
    }
  }
  return VGPU_VIEW_OK;
}

void vgpu_region_view_close(struct vgpu_region_view *v) {
  if (v->base) munmap(v->base, v->size);
  if (v->map.fd >= 0) close(v->map.fd);
  v->base = NULL;
  v->map.r = NULL;
  v->map.ext = NULL;
  v->map.fd = -1;
}

void vgpu_region_view_header(const struct vgpu_region_view *v, struct vgpu_view_header *h) {
  const vgpu_layout_t *l = v->lay;
  memset(h, 0, sizeof *h);
  h->major = l->off_major == VGPU_NO_FIELD ? -1 : view_rd32(v, l->off_major);
  h->minor = l->off_minor == VGPU_NO_FIELD ? -1 : view_rd32(v, l->off_minor);
  h->owner_pid = view_rd64(v, l->off_owner_pid);
  h->device_num = view_rd64(v, l->off_device_num);
  h->proc_num = view_rd32(v, l->off_proc_num);
  /* HAMi's layouts keep these three right after proc_num. */
  h->utilization_switch = view_rd32(v, l->off_proc_num + 4);
  h->recent_kernel = view_rd32(v, l->off_proc_num + 8);
  h->priority = view_rd32(v, l->off_proc_num + 12);
  h->has_last_kernel = l->off_last_kernel_time != VGPU_NO_FIELD;
  if (h->has_last_kernel) h->last_kernel_time = view_rd64(v, l->off_last_kernel_time);
}

int vgpu_region_view_proc_num(const struct vgpu_region_view *v) {
  int32_t n = view_rd32(v, v->lay->off_proc_num);
  return n < 0 ? 0 : (n > VGPU_MAX_PROCS ? VGPU_MAX_PROCS : n);
}

int vgpu_region_view_device_num(const struct vgpu_region_view *v) {
  uint64_t n = view_rd64(v, v->lay->off_device_num);
  return n > VGPU_MAX_DEVICES ? VGPU_MAX_DEVICES : (int)n;
}

static size_t limit_offset(const struct vgpu_region_view *v, bool sm, int dev) {
  return (sm ? v->lay->off_sm_limit : v->lay->off_limit) + 8 * (size_t)dev;
}

uint64_t vgpu_region_view_limit(const struct vgpu_region_view *v, bool sm, int dev) {
  if (dev < 0 || dev >= VGPU_MAX_DEVICES) return 0;
  return view_rd64(v, limit_offset(v, sm, dev));
}

uint64_t vgpu_region_view_set_limit(struct vgpu_region_view *v, bool sm, int dev, uint64_t value) {
  if (dev < 0 || dev >= VGPU_MAX_DEVICES || !v->writable || !v->lay->writable) return 0;
  uint64_t *field = (uint64_t *)(void *)(v->base + limit_offset(v, sm, dev));
  return __atomic_exchange_n(field, value, __ATOMIC_ACQ_REL);
}

const char *vgpu_region_view_uuid(const struct vgpu_region_view *v, int dev) {
  return (const char *)(v->base + v->lay->off_uuids + VGPU_UUID_LEN * (size_t)dev);
}

void vgpu_region_view_read_slot(const struct vgpu_region_view *v, int idx,
                                struct vgpu_slot_view *s) {
  const vgpu_layout_t *l = v->lay;
  size_t b = l->off_procs + l->slot_size * (size_t)idx;
  int tries;
  memset(s, 0, sizeof *s);
  s->slot = idx;
  s->live = VGPU_LIVE_UNKNOWN;
  for (tries = 0; tries < SEQLOCK_MAX_TRIES; tries++) {
    uint64_t s1 = 0;
    if (l->seqlock_valid) {
      s1 = view_rd64(v, b + l->slot_seqlock);
      if (s1 & 1) {
        struct timespec ts = {0, 1000};
        nanosleep(&ts, NULL);
        continue;
      }
    }
    s->pid = view_rd32(v, b);
    s->hostpid = view_rd32(v, b + 4);
    s->status = view_rd32(v, b + l->slot_status);
    for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
      size_t u = b + l->slot_used + l->used_stride * (size_t)d;
      struct vgpu_slot_usage *o = &s->dev[d];
      o->context = view_rd64(v, u);
      o->module = view_rd64(v, u + 8);
      o->data = view_rd64(v, u + 16);
      o->total = view_rd64(v, u + 32);
      o->monitor = view_rd64(v, b + l->slot_monitorused + 8 * (size_t)d);
      o->sm_util = l->slot_util == VGPU_NO_FIELD
                       ? 0
                       : view_rd64(v, b + l->slot_util + l->util_stride * (size_t)d + 16);
    }
    if (!l->seqlock_valid) break;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (view_rd64(v, b + l->slot_seqlock) == s1) break;
  }
  s->torn = tries >= SEQLOCK_MAX_TRIES;
  /* An extension entry describes procs[idx] only while its pid tag matches (0: written before the
   * tag existed): HAMi-core's compaction moves procs[] without moving the extension, and a stale
   * entry's start time would make a live process look like a reused pid. */
  if (v->ext_has_slots) {
    const vgpu_ext_slot_t *es = &v->map.ext->slots[idx];
    int32_t tag = LOAD_RELAXED(&es->pid);
    if (tag == 0 || tag == s->pid) {
      s->has_ext = true;
      s->start_ticks = LOAD_RELAXED(&es->start_time_ticks);
      s->heartbeat_ns = LOAD_RELAXED(&es->heartbeat_ns);
      s->hostpid_source = LOAD_RELAXED(&es->hostpid_source);
    }
  }
}

void vgpu_region_view_lock_facts(const struct vgpu_region_view *v, struct vgpu_lock_facts *f) {
  memset(f, 0, sizeof *f);
  /* Only loads: the bytes are judged, never handed to glibc's sem_* calls. */
  f->has_sem = true;
  f->sem_valid = vgpu_sem_check(v->base + v->lay->off_sem, &f->sem_value, &f->sem_invalid_why);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = VGPU_SLOT_LOCK_OFFSET,
                     .l_len = 1};
  if (fcntl(v->map.fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK)
    f->record_lock_pid = fl.l_pid > 0 ? fl.l_pid : -1;
  if (v->map.ext) {
    f->ext_holder_pid = LOAD(&v->map.ext->lock_holder_pid);
    f->ext_holder_since_ns = LOAD_RELAXED(&v->map.ext->lock_holder_since_ns);
  }
  f->owner_pid = view_rd64(v, v->lay->off_owner_pid);
}

void vgpu_region_view_lock_state(const struct vgpu_region_view *v, const char *proc_root,
                                 uint64_t now_realtime_ns, struct vgpu_lock_view *lk) {
  struct vgpu_lock_facts f;
  vgpu_region_view_lock_facts(v, &f);
  memset(lk, 0, sizeof *lk);
  lk->has_sem = f.has_sem;
  lk->sem_value = f.sem_value;
  lk->sem_valid = f.sem_valid;
  lk->sem_invalid_why = f.sem_invalid_why;
  lk->record_lock_pid = f.record_lock_pid;
  if (f.ext_holder_pid != 0 || f.record_lock_pid != 0) {
    uint64_t since = f.ext_holder_since_ns;
    lk->holder_pid = f.ext_holder_pid != 0 ? f.ext_holder_pid : f.record_lock_pid;
    lk->holder_source = f.ext_holder_pid != 0 ? "extension" : "record-lock";
    lk->held_ns = since != 0 && now_realtime_ns > since ? now_realtime_ns - since : 0;
    if (f.record_lock_pid != 0) {
      lk->state = VGPU_LOCK_HELD;
      lk->holder_live = VGPU_LIVE_ALIVE; /* the kernel holds the lock for a living process only */
    } else {
      lk->state = VGPU_LOCK_STALE_RECORD;
      lk->holder_live = vgpu_proc_liveness(proc_root, lk->holder_pid, 0, NULL);
      /* Released by the kernel: the recorded holder is gone, or its pid was reused since. */
      if (!vgpu_liveness_dead(lk->holder_live)) lk->holder_live = VGPU_LIVE_GONE;
    }
    return;
  }
  int owner = (int)f.owner_pid;
  if (owner != 0) {
    lk->holder_pid = owner;
    lk->holder_source = "owner_pid";
    lk->holder_live = vgpu_proc_liveness(proc_root, owner, 0, NULL);
    lk->state = vgpu_liveness_dead(lk->holder_live) ? VGPU_LOCK_STALE_RECORD : VGPU_LOCK_HELD;
  } else if (f.has_sem && f.sem_valid && f.sem_value == 0) {
    lk->state = VGPU_LOCK_LOST;
    lk->holder_live = VGPU_LIVE_UNKNOWN;
  } else {
    lk->state = VGPU_LOCK_FREE;
  }
}

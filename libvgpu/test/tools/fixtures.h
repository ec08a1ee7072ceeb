/*
 * fixtures.h — writes region files of every historical layout for shrreg-tool's tests.
 *
 * The old layouts are declared here as C structs mirroring the historical HAMi-core headers and
 * laid out by the compiler, independently of the layout table in vgpu_region.h (VGPU_LAYOUTS), so
 * a wrong offset in the table shows up as a failing test instead of agreeing with itself.
 * Single-threaded test helper; files are written with plain stores, then sem_init'ed in place.
 */
#ifndef VGPU_TEST_TOOLS_FIXTURES_H
#define VGPU_TEST_TOOLS_FIXTURES_H

#include <fcntl.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vgpu/vgpu_region.h"

typedef struct {
  uint64_t context_size, module_size, data_size, offset, total;
} l0_devmem_t;
typedef struct {
  uint64_t dec_util, enc_util, sm_util;
} l0_util_t;

typedef struct {
  int32_t pid, hostpid;
  l0_devmem_t used[16];
  uint64_t monitorused[16];
  int32_t status;
} l0a_slot_t;
typedef struct {
  int32_t initialized_flag, sm_init_flag;
  uint64_t owner_pid;
  sem_t sem;
  uint64_t num;
  char uuids[16][96];
  uint64_t limit[16], sm_limit[16];
  l0a_slot_t procs[1024];
  int32_t proc_num, utilization_switch, recent_kernel, priority;
} l0a_region_t;

typedef struct {
  int32_t pid, hostpid;
  l0_devmem_t used[16];
  uint64_t monitorused[16];
  l0_util_t device_util[16];
  int32_t status;
} l0b_slot_t;
typedef struct {
  int32_t initialized_flag, sm_init_flag;
  uint64_t owner_pid;
  sem_t sem;
  uint64_t num;
  char uuids[16][96];
  uint64_t limit[16], sm_limit[16];
  l0b_slot_t procs[1024];
  int32_t proc_num, utilization_switch, recent_kernel, priority;
} l0b_region_t;

typedef struct {
  int32_t pid, hostpid;
  uint64_t seqlock;
  vgpu_device_memory_t used[16];
  uint64_t monitorused[16];
  vgpu_device_util_t device_util[16];
  int32_t status;
  uint64_t unused[2];
} broken_slot_t;
typedef struct {
  int32_t initialized_flag;
  uint32_t major_version, minor_version;
  int32_t sm_init_flag;
  uint64_t owner_pid;
  sem_t sem;
  sem_t sem_postinit;
  uint64_t num;
  char uuids[16][96];
  uint64_t limit[16], sm_limit[16];
  broken_slot_t procs[1024];
  int32_t proc_num, utilization_switch, recent_kernel, priority;
  uint64_t last_kernel_time;
  uint64_t unused[4];
} broken_region_t;

_Static_assert(sizeof(l0a_region_t) == 804680, "L0a size");
_Static_assert(sizeof(l0b_region_t) == 1197896, "L0b size");
_Static_assert(sizeof(broken_region_t) == 2008984, "v1.1-broken size");
_Static_assert(sizeof(broken_slot_t) == 1960, "v1.1-broken slot size");

typedef enum { FX_L0A, FX_L0B, FX_V1_1, FX_V1_1_BROKEN, FX_V1_2, FX_V1_2_EXT } fx_layout_t;

typedef struct {
  int pid, hostpid, status;
  uint64_t used[2];    /* total bytes on devices 0 and 1 (context 1/4, data 3/4) */
  uint64_t sm_util[2]; /* percent */
  uint64_t start_ticks;
  int32_t ext_pid_tag; /* extension entry's pid tag; 0 = written before the tag existed */
} fx_slot_t;

typedef struct {
  fx_layout_t layout;
  int device_num;
  uint64_t limit[2];
  uint64_t sm_limit[2];
  int nslots;
  fx_slot_t slots[8];
  int sem_value;       /* the slot-table semaphore's initial value (1 = free) */
  uint64_t owner_pid;
  int ext_lock_holder; /* extension only */
  uint64_t ext_lock_since_ns;
} fx_spec_t;

static inline size_t fx_file_size(fx_layout_t l) {
  switch (l) {
    case FX_L0A: return sizeof(l0a_region_t) + 1;
    case FX_L0B: return sizeof(l0b_region_t) + 1;
    case FX_V1_1_BROKEN: return sizeof(broken_region_t) + 1;
    case FX_V1_1:
    case FX_V1_2: return sizeof(vgpu_region_t) + 1;
    case FX_V1_2_EXT: return VGPU_REGION_FILE_SIZE;
  }
  return 0;
}

#define FX_FILL_COMMON(R, SPEC)                                                         \
  do {                                                                                 \
    int fx_d;                                                                          \
    (R)->num = (uint64_t)(SPEC)->device_num;                                           \
    for (fx_d = 0; fx_d < 2; fx_d++) {                                                 \
      snprintf((R)->uuids[fx_d], 96, "GPU-00000000-0000-0000-0000-00000000000%d", fx_d); \
      (R)->limit[fx_d] = (SPEC)->limit[fx_d];                                          \
      (R)->sm_limit[fx_d] = (SPEC)->sm_limit[fx_d];                                    \
    }                                                                                  \
    (R)->owner_pid = (SPEC)->owner_pid;                                                \
    (R)->proc_num = (SPEC)->nslots;                                                    \
    (R)->utilization_switch = 1;                                                       \
    (R)->recent_kernel = 2;                                                            \
    (R)->priority = 1;                                                                 \
  } while (0)

#define FX_FILL_SLOT_L0(S, F, WITH_UTIL)                     \
  do {                                                       \
    int fx_d;                                                \
    (S)->pid = (F)->pid;                                     \
    (S)->hostpid = (F)->hostpid;                             \
    (S)->status = (F)->status;                               \
    for (fx_d = 0; fx_d < 2; fx_d++) {                       \
      (S)->used[fx_d].context_size = (F)->used[fx_d] / 4;    \
      (S)->used[fx_d].data_size = (F)->used[fx_d] / 4 * 3;   \
      (S)->used[fx_d].total = (F)->used[fx_d];               \
      (S)->monitorused[fx_d] = (F)->used[fx_d];              \
      WITH_UTIL((S), fx_d, (F)->sm_util[fx_d]);              \
    }                                                        \
  } while (0)
#define FX_NO_UTIL(S, D, V) ((void)(S), (void)(D), (void)(V))
#define FX_UTIL(S, D, V) ((S)->device_util[D].sm_util = (V))

/* Writes the fixture; returns 0 or -1 (errno set). */
static inline int fx_write(const char *path, const fx_spec_t *spec) {
  size_t size = fx_file_size(spec->layout);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  uint8_t *base;
  int i;
  sem_t *sem = NULL;
  if (fd < 0) return -1;
  if (ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    return -1;
  }
  base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return -1;
  switch (spec->layout) {
    case FX_L0A: {
      l0a_region_t *r = (l0a_region_t *)base;
      FX_FILL_COMMON(r, spec);
      for (i = 0; i < spec->nslots; i++) FX_FILL_SLOT_L0(&r->procs[i], &spec->slots[i], FX_NO_UTIL);
      sem = &r->sem;
      break;
    }
    case FX_L0B: {
      l0b_region_t *r = (l0b_region_t *)base;
      FX_FILL_COMMON(r, spec);
      for (i = 0; i < spec->nslots; i++) FX_FILL_SLOT_L0(&r->procs[i], &spec->slots[i], FX_UTIL);
      sem = &r->sem;
      break;
    }
    case FX_V1_1_BROKEN: {
      broken_region_t *r = (broken_region_t *)base;
      FX_FILL_COMMON(r, spec);
      r->major_version = 1;
      r->minor_version = 1;
      r->last_kernel_time = 1764121800;
      for (i = 0; i < spec->nslots; i++) FX_FILL_SLOT_L0(&r->procs[i], &spec->slots[i], FX_UTIL);
      sem_init(&r->sem_postinit, 1, 1);
      sem = &r->sem;
      break;
    }
    case FX_V1_1:
    case FX_V1_2:
    case FX_V1_2_EXT: {
      vgpu_region_t *r = (vgpu_region_t *)base;
      int d;
      r->major_version = 1;
      r->minor_version = spec->layout == FX_V1_1 ? 1 : 2;
      r->device_num = (uint64_t)spec->device_num;
      for (d = 0; d < 2; d++) {
        snprintf(r->uuids[d], 96, "GPU-00000000-0000-0000-0000-00000000000%d", d);
        r->limit[d] = spec->limit[d];
        r->sm_limit[d] = spec->sm_limit[d];
      }
      r->owner_pid = spec->owner_pid;
      r->proc_num = spec->nslots;
      r->utilization_switch = 1;
      r->recent_kernel = 2;
      r->priority = 1;
      r->last_kernel_time = 1764121800;
      for (i = 0; i < spec->nslots; i++) {
        vgpu_proc_slot_t *s = &r->procs[i];
        const fx_slot_t *f = &spec->slots[i];
        s->pid = f->pid;
        s->hostpid = f->hostpid;
        s->status = f->status;
        s->seqlock = 4;
        for (d = 0; d < 2; d++) {
          s->used[d].context_size = f->used[d] / 4;
          s->used[d].data_size = f->used[d] / 4 * 3;
          s->used[d].total = f->used[d];
          s->monitorused[d] = f->used[d];
          s->device_util[d].sm_util = f->sm_util[d];
        }
      }
      if (spec->layout == FX_V1_2_EXT) {
        vgpu_region_ext_t *e = (vgpu_region_ext_t *)(base + VGPU_EXT_OFFSET);
        e->major = VGPU_EXT_MAJOR;
        e->minor = VGPU_EXT_MINOR;
        e->size = sizeof *e;
        e->created_ns = 1764121800000000000ull;
        snprintf(e->lib_version, sizeof e->lib_version, "libvgpu 0.1.0-test");
        snprintf(e->pod_uid, sizeof e->pod_uid, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
        snprintf(e->container_name, sizeof e->container_name, "trainer");
        e->lock_holder_pid = spec->ext_lock_holder;
        e->lock_holder_since_ns = spec->ext_lock_since_ns;
        e->devices[0].launches_total = 10;
        e->devices[0].oom_rejections = 1;
        for (i = 0; i < spec->nslots; i++) {
          e->slots[i].start_time_ticks = spec->slots[i].start_ticks;
          e->slots[i].pid = spec->slots[i].ext_pid_tag;
        }
        e->magic = VGPU_EXT_MAGIC;
      }
      sem_init((sem_t *)(void *)r->sem_postinit, 1, 1);
      sem = (sem_t *)(void *)r->sem;
      break;
    }
  }
  sem_init(sem, 1, (unsigned)spec->sem_value);
  *(int32_t *)base = VGPU_REGION_MAGIC;
  munmap(base, size);
  return 0;
}

#endif /* VGPU_TEST_TOOLS_FIXTURES_H */

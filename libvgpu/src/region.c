/*
 * region.c — see region.h: create/open, slot seqlocks, the slot table. Byte layout from
 * include/vgpu/vgpu_region.h (HAMi v1.2). The slot lock is in region_lock.c, process liveness in
 * region_liveness.c, the tools' multi-layout view in region_view.c.
 */
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "region_internal.h"
#include "vgpu.h"

_Static_assert(sizeof(sem_t) <= VGPU_SEM_SIZE, "sem_t fits HAMi's sem field");


/* HAMi-core layouts we recognise only to refuse them (their file sizes, with and without the +1
 * byte HAMi-core writes, from the one layout table in vgpu/vgpu_region.h). */
static const char *foreign_layout(off_t size, uint32_t major) {
  static const struct {
    vgpu_layout_id_t id;
    const char *what;
  } foreign[] = {{VGPU_LAYOUT_L0A, "L0a (pre-2024-04 HAMi-core)"},
                 {VGPU_LAYOUT_L0B, "L0b (HAMi-core v0)"},
                 {VGPU_LAYOUT_V1_1_BROKEN, "v1.1-broken (2026-03 HAMi-core)"}};
  for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
    const vgpu_layout_t *l = &VGPU_LAYOUTS[foreign[i].id];
    bool size_matches = size == (off_t)l->struct_size || size == (off_t)l->struct_size + 1;
    bool version_matches = l->off_major == VGPU_NO_FIELD || major == 1;
    if (size_matches && version_matches) return foreign[i].what;
  }
  return NULL;
}

int vgpu_region_set_lock(int fd, int cmd, short type, off_t start, off_t len) {
  struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
  int rc;
  do {
    rc = fcntl(fd, cmd, &fl);
  } while (rc < 0 && errno == EINTR);
  return rc;
}

uint64_t vgpu_region_wait_ns = VGPU_LOCK_WAIT_NS;

static void backoff_sleep(unsigned *us) {
  struct timespec ts = {0, (long)*us * 1000};
  nanosleep(&ts, NULL);
  if (*us < 10000) *us *= 2;
}

/* Polls an fcntl lock until `deadline` (monotonic ns): a blocking F_SETLKW would wait forever on
 * a stopped holder. 0 taken, -1 with errno ETIMEDOUT or the fcntl error. */
int vgpu_region_set_lock_until(int fd, short type, off_t start, off_t len, uint64_t deadline) {
  unsigned backoff_us = 20;
  while (vgpu_region_set_lock(fd, F_SETLK, type, start, len) != 0) {
    if (errno != EAGAIN && errno != EACCES) return -1;
    if (vgpu_now_monotonic_ns() >= deadline) {
      errno = ETIMEDOUT;
      return -1;
    }
    backoff_sleep(&backoff_us);
  }
  return 0;
}

static int init_lock(int fd) {
  return vgpu_region_set_lock_until(fd, F_WRLCK, 0, (off_t)sizeof(vgpu_region_t),
                        vgpu_now_monotonic_ns() + vgpu_region_wait_ns);
}

/* Reserves the blocks of [from, VGPU_REGION_FILE_SIZE): a sparse file on a full filesystem turns
 * the first store into a page into SIGBUS inside the application. fallocate(2) mode 0 allocates
 * holes and never changes data, so it is safe while HAMi-core processes write the file. Where the
 * filesystem has no fallocate, zeros are written, but only from `from` on (bytes nobody else
 * writes: a new file, or the extension beyond a HAMi-core file's end). 0, or -1 with errno. */
static int reserve_blocks(int fd, off_t from) {
  if (fallocate(fd, 0, 0, (off_t)VGPU_REGION_FILE_SIZE) == 0) return 0;
  if (errno != EOPNOTSUPP && errno != ENOSYS) return -1;
  static const char zeros[65536];
  for (off_t off = from; off < (off_t)VGPU_REGION_FILE_SIZE;) {
    size_t n = sizeof zeros;
    if ((off_t)n > (off_t)VGPU_REGION_FILE_SIZE - off) n = (size_t)((off_t)VGPU_REGION_FILE_SIZE - off);
    ssize_t w = pwrite(fd, zeros, n, off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    off += w;
  }
  return fdatasync(fd) == 0 || errno == EINVAL ? 0 : -1;
}
static void init_unlock(int fd) {
  vgpu_region_set_lock(fd, F_SETLK, F_UNLCK, 0, (off_t)sizeof(vgpu_region_t));
}

static void write_new_region(struct vgpu_region_map *m, const struct vgpu_region_init *init) {
  vgpu_region_t *r = m->r;
  memset(r, 0, sizeof *r);
  r->major_version = VGPU_REGION_MAJOR;
  r->minor_version = VGPU_REGION_MINOR;
  /* Valid process-shared semaphores (value 1) so a HAMi-core library sharing the file can lock. */
  sem_init((sem_t *)(void *)r->sem, 1, 1);
  sem_init((sem_t *)(void *)r->sem_postinit, 1, 1);
  r->device_num = init ? init->device_num : 0;
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
    if (init) {
      memcpy(r->uuids[d], init->uuids[d], VGPU_UUID_LEN);
      r->uuids[d][VGPU_UUID_LEN - 1] = 0;
      r->limit[d] = init->limit[d];
      r->sm_limit[d] = init->sm_limit[d];
    } else {
      r->sm_limit[d] = 100;
    }
  }
  r->utilization_switch = 1;
  r->recent_kernel = 2;
  r->priority = init ? init->priority : 1;
  r->last_kernel_time = (uint64_t)time(NULL);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  STORE(&r->initialized_flag, VGPU_REGION_MAGIC); /* last: readers see a complete header */
}

_Static_assert(sizeof(pthread_mutex_t) <= sizeof(((vgpu_region_ext_t *)0)->reserve_mutex),
              "the reservation mutex fits the extension's spare words");

pthread_mutex_t *vgpu_region_reserve_mutex(struct vgpu_region_map *m) {
  if (!m->ext || !(__atomic_load_n(&m->ext->flags, __ATOMIC_ACQUIRE) & VGPU_EXT_FLAG_RESERVE_MUTEX))
    return NULL;
  return (pthread_mutex_t *)(void *)m->ext->reserve_mutex;
}

/* Caller holds the init lock. */
static void init_reserve_mutex(vgpu_region_ext_t *e) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  memset(e->reserve_mutex, 0, sizeof e->reserve_mutex);
  bool ok = pthread_mutex_init((pthread_mutex_t *)(void *)e->reserve_mutex, &a) == 0;
  pthread_mutexattr_destroy(&a);
  if (ok) __atomic_fetch_or(&e->flags, VGPU_EXT_FLAG_RESERVE_MUTEX, __ATOMIC_RELEASE);
}

static void write_new_ext(struct vgpu_region_map *m, const struct vgpu_region_init *init) {
  vgpu_region_ext_t *e = m->ext;
  memset(e, 0, sizeof *e);
  e->major = VGPU_EXT_MAJOR;
  e->minor = VGPU_EXT_MINOR;
  e->size = (uint32_t)sizeof *e;
  e->created_ns = vgpu_now_realtime_ns();
  snprintf(e->lib_version, sizeof e->lib_version, "%s", VGPU_LIB_VERSION);
  if (init && init->pod_uid) snprintf(e->pod_uid, sizeof e->pod_uid, "%s", init->pod_uid);
  if (init && init->container_name)
    snprintf(e->container_name, sizeof e->container_name, "%s", init->container_name);
  init_reserve_mutex(e);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  STORE(&e->magic, VGPU_EXT_MAGIC);
}

static int map_file(struct vgpu_region_map *m, bool writable) {
  int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  void *p = mmap(NULL, VGPU_REGION_FILE_SIZE, prot, MAP_SHARED, m->fd, 0);
  if (p == MAP_FAILED) return VGPU_REGION_E_IO;
  m->r = p;
  m->map_size = VGPU_REGION_FILE_SIZE;
  m->ext = (vgpu_region_ext_t *)((char *)p + VGPU_EXT_OFFSET);
  return VGPU_REGION_OK;
}

static void unmap_file(struct vgpu_region_map *m) {
  if (m->r) munmap(m->r, m->map_size);
  m->r = NULL;
  m->ext = NULL;
}

/* Decides what to do with the bytes found under the init lock. */
static int validate_or_init(struct vgpu_region_map *m, const struct vgpu_region_init *init) {
  struct stat st;
  if (fstat(m->fd, &st) != 0) return VGPU_REGION_E_IO;
  int32_t magic = 0;
  uint32_t ver[2] = {0, 0};
  if (st.st_size >= 12) {
    if (pread(m->fd, &magic, sizeof magic, 0) != (ssize_t)sizeof magic) return VGPU_REGION_E_IO;
    if (pread(m->fd, ver, sizeof ver, 4) != (ssize_t)sizeof ver) return VGPU_REGION_E_IO;
  }
  if (magic == VGPU_REGION_MAGIC) {
    const char *foreign = foreign_layout(st.st_size, ver[0]);
    if (!foreign && st.st_size < (off_t)sizeof(vgpu_region_t)) foreign = "a truncated region";
    if (!foreign && (ver[0] != VGPU_REGION_MAJOR || (ver[1] != 1 && ver[1] != 2))) {
      snprintf(m->found, sizeof m->found, "version %u.%u", ver[0], ver[1]);
      return VGPU_REGION_E_VERSION;
    }
    if (foreign) {
      snprintf(m->found, sizeof m->found, "%s, %lld bytes", foreign, (long long)st.st_size);
      return VGPU_REGION_E_VERSION;
    }
    /* v1.1/v1.2 (same bytes). Grow to hold our extension (HAMi readers accept larger files) with
     * every block reserved; a file that cannot get them is left at its size. */
    if (reserve_blocks(m->fd, st.st_size) != 0) {
      int e = errno;
      struct stat now;
      if (fstat(m->fd, &now) == 0 && now.st_size > st.st_size && ftruncate(m->fd, st.st_size) != 0)
        VGPU_LOG_WARN("could not shrink the region file back to %lld bytes: %s",
                      (long long)st.st_size, strerror(errno));
      errno = e;
      return e == ENOSPC || e == EDQUOT ? VGPU_REGION_E_NOSPACE : VGPU_REGION_E_IO;
    }
    int rc = map_file(m, true);
    if (rc != VGPU_REGION_OK) return rc;
    if (LOAD(&m->ext->magic) != VGPU_EXT_MAGIC) {
      write_new_ext(m, init);
    } else if (m->ext->major != VGPU_EXT_MAJOR) {
      VGPU_LOG_WARN("region extension version %u.%u unknown; extension left untouched",
                    m->ext->major, m->ext->minor);
      m->ext = NULL;
    } else if (!(m->ext->flags & VGPU_EXT_FLAG_RESERVE_MUTEX)) {
      init_reserve_mutex(m->ext);
    }
    return VGPU_REGION_OK;
  }
  /* No magic: empty, or a creator died half-way (we hold the init lock, so nobody is writing). */
  if (ftruncate(m->fd, 0) != 0) return VGPU_REGION_E_IO;
  if (reserve_blocks(m->fd, 0) != 0) {
    int e = errno;
    if (ftruncate(m->fd, 0) != 0) { /* an empty file: the next process tries again */
      VGPU_LOG_WARN("could not truncate the unreservable region file back to 0 bytes: %s",
                    strerror(errno));
    }
    errno = e;
    return e == ENOSPC || e == EDQUOT ? VGPU_REGION_E_NOSPACE : VGPU_REGION_E_IO;
  }
  int rc = map_file(m, true);
  if (rc != VGPU_REGION_OK) return rc;
  write_new_ext(m, init);
  write_new_region(m, init);
  m->created = true;
  return VGPU_REGION_OK;
}

int vgpu_region_open(struct vgpu_region_map *m, const char *path,
                     const struct vgpu_region_init *init) {
  memset(m, 0, sizeof *m);
  m->fd = -1;
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
  if (fd < 0) return errno == ELOOP ? VGPU_REGION_E_NOT_REGULAR : VGPU_REGION_E_IO;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return VGPU_REGION_E_NOT_REGULAR;
  }
  /* Every container process must be able to open the file whatever its umask (HAMi: umask 0). */
  if ((st.st_mode & 0666) != 0666 && st.st_uid == geteuid()) (void)fchmod(fd, 0666);
  m->fd = fd;
  if (init_lock(fd) != 0) {
    int e = errno;
    close(fd);
    m->fd = -1;
    errno = e;
    return e == ETIMEDOUT ? VGPU_REGION_E_BUSY : VGPU_REGION_E_LOCK;
  }
  int rc = validate_or_init(m, init);
  int e = errno;
  init_unlock(fd);
  if (rc != VGPU_REGION_OK) {
    unmap_file(m);
    close(fd);
    m->fd = -1;
  }
  errno = e;
  return rc;
}

int vgpu_region_open_local(struct vgpu_region_map *m, const struct vgpu_region_init *init) {
  memset(m, 0, sizeof *m);
  m->fd = -1;
  /* The raw system call: glibc's memfd_create wrapper is newer than the library's glibc floor. */
  int fd = (int)syscall(SYS_memfd_create, "libvgpu-local-region", 1u /* MFD_CLOEXEC */);
  if (fd < 0) return VGPU_REGION_E_IO;
  m->fd = fd;
  m->local = true;
  if (reserve_blocks(fd, 0) != 0 || map_file(m, true) != VGPU_REGION_OK) {
    int e = errno;
    vgpu_region_close(m);
    errno = e;
    return e == ENOSPC || e == ENOMEM ? VGPU_REGION_E_NOSPACE : VGPU_REGION_E_IO;
  }
  write_new_ext(m, init);
  write_new_region(m, init);
  m->created = true;
  return VGPU_REGION_OK;
}

int vgpu_region_open_existing(struct vgpu_region_map *m, const char *path, bool writable) {
  memset(m, 0, sizeof *m);
  m->fd = -1;
  int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return errno == ELOOP ? VGPU_REGION_E_NOT_REGULAR : VGPU_REGION_E_IO;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return VGPU_REGION_E_NOT_REGULAR;
  }
  int32_t magic = 0;
  uint32_t ver[2] = {0, 0};
  if (st.st_size < (off_t)VGPU_REGION_FILE_SIZE || pread(fd, &magic, 4, 0) != 4 ||
      pread(fd, ver, 8, 4) != 8 || magic != VGPU_REGION_MAGIC || ver[0] != 1 ||
      foreign_layout(st.st_size, ver[0])) {
    close(fd);
    return VGPU_REGION_E_VERSION;
  }
  m->fd = fd;
  int rc = map_file(m, writable);
  if (rc != VGPU_REGION_OK) {
    close(fd);
    m->fd = -1;
    return rc;
  }
  if (LOAD(&m->ext->magic) != VGPU_EXT_MAGIC || m->ext->major != VGPU_EXT_MAJOR) m->ext = NULL;
  return VGPU_REGION_OK;
}

void vgpu_region_close(struct vgpu_region_map *m) {
  unmap_file(m);
  if (m->fd >= 0) close(m->fd);
  m->fd = -1;
}

/* ---- seqlock */

static void seq_begin(vgpu_proc_slot_t *s) {
  __atomic_fetch_add(&s->seqlock, 1, __ATOMIC_ACQ_REL); /* odd */
  __atomic_thread_fence(__ATOMIC_RELEASE);
}
static void seq_end(vgpu_proc_slot_t *s) {
  __atomic_fetch_add(&s->seqlock, 1, __ATOMIC_RELEASE); /* even */
}

static void add_clamped(uint64_t *field, int64_t delta) {
  uint64_t v = LOAD_RELAXED(field);
  uint64_t nv = delta >= 0 ? v + (uint64_t)delta
                           : (v >= (uint64_t)(-delta) ? v - (uint64_t)(-delta) : 0);
  STORE_RELAXED(field, nv);
}

void vgpu_slot_add(struct vgpu_region_map *m, int idx, int dev, enum vgpu_mem_kind kind,
                   int64_t delta) {
  if (idx < 0 || idx >= VGPU_MAX_PROCS || dev < 0 || dev >= VGPU_MAX_DEVICES || delta == 0) return;
  vgpu_proc_slot_t *s = &m->r->procs[idx];
  seq_begin(s);
  vgpu_device_memory_t *u = &s->used[dev];
  uint64_t *f = kind == VGPU_MEM_CONTEXT ? &u->context_size
                : kind == VGPU_MEM_MODULE ? &u->module_size
                                          : &u->data_size;
  add_clamped(f, delta);
  add_clamped(&u->total, delta);
  seq_end(s);
}

void vgpu_slot_publish(struct vgpu_region_map *m, int idx, int dev, const uint64_t kinds[3]) {
  if (idx < 0 || idx >= VGPU_MAX_PROCS || dev < 0 || dev >= VGPU_MAX_DEVICES) return;
  vgpu_proc_slot_t *s = &m->r->procs[idx];
  /* Odd here means a copy taken mid-write (HAMi-core's compaction copies seqlock too): even it
   * first so the bracket below is odd while we write. */
  if (LOAD(&s->seqlock) & 1) __atomic_fetch_add(&s->seqlock, 1, __ATOMIC_ACQ_REL);
  seq_begin(s);
  vgpu_device_memory_t *u = &s->used[dev];
  STORE_RELAXED(&u->context_size, kinds[VGPU_MEM_CONTEXT]);
  STORE_RELAXED(&u->module_size, kinds[VGPU_MEM_MODULE]);
  STORE_RELAXED(&u->data_size, kinds[VGPU_MEM_DATA]);
  STORE_RELAXED(&u->total, kinds[VGPU_MEM_CONTEXT] + kinds[VGPU_MEM_MODULE] + kinds[VGPU_MEM_DATA]);
  seq_end(s);
}

uint64_t vgpu_slot_total(struct vgpu_region_map *m, int idx, int dev) {
  vgpu_proc_slot_t *s = &m->r->procs[idx];
  uint64_t v = 0;
  for (int tries = 0; tries < 1000; tries++) {
    uint64_t s1 = LOAD(&s->seqlock);
    if (s1 & 1) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    v = LOAD_RELAXED(&s->used[dev].total);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (LOAD_RELAXED(&s->seqlock) == s1) return v;
  }
  return LOAD_RELAXED(&s->used[dev].total); /* best effort: a writer died mid-update */
}

uint64_t vgpu_region_used(struct vgpu_region_map *m, int dev) {
  if (dev < 0 || dev >= VGPU_MAX_DEVICES) return 0;
  int n = LOAD(&m->r->proc_num);
  if (n < 0) n = 0;
  if (n > VGPU_MAX_PROCS) n = VGPU_MAX_PROCS;
  uint64_t sum = 0;
  for (int i = 0; i < n; i++) {
    vgpu_proc_slot_t *s = &m->r->procs[i];
    if (LOAD(&s->status) == VGPU_SLOT_FREE || LOAD(&s->pid) == 0) continue;
    sum += vgpu_slot_total(m, i, dev);
  }
  return sum;
}

int vgpu_region_slot_alive(struct vgpu_region_map *m, int idx, uint64_t now_ns) {
  vgpu_proc_slot_t *s = &m->r->procs[idx];
  int32_t pid = LOAD(&s->pid);
  if (pid <= 0) return 0;
  uint64_t recorded = 0, heartbeat = 0;
  /* Extension data only when tagged with this slot's pid: HAMi-core's compaction moves procs[]
   * but not the extension, and a stale start time would make a live process look reused. */
  if (m->ext && LOAD(&m->ext->slots[idx].pid) == pid) {
    recorded = LOAD(&m->ext->slots[idx].start_time_ticks);
    heartbeat = LOAD(&m->ext->slots[idx].heartbeat_ns);
  }
  uint64_t start = 0;
  int st = vgpu_proc_stat(pid, &start);
  if (st < 0) return 1; /* cannot tell: never free what might be alive */
  bool looks_alive = st == 1 && (recorded == 0 || start == recorded);
  if (looks_alive) return 1;
  /* Gone from our /proc, or the pid now belongs to someone else. A fresh heartbeat means the
   * owner lives on (another pid namespace sharing this file): keep it for now. */
  return vgpu_heartbeat_fresh(heartbeat, now_ns) ? -1 : 0;
}

/* ---- slot table (caller holds the slot lock) */

void vgpu_region_generation_begin(struct vgpu_region_map *m) {
  if (m->ext) __atomic_fetch_add(&m->ext->generation, 1, __ATOMIC_ACQ_REL);
}
void vgpu_region_generation_end(struct vgpu_region_map *m) {
  if (m->ext) __atomic_fetch_add(&m->ext->generation, 1, __ATOMIC_RELEASE);
}
static void gen_begin(struct vgpu_region_map *m) { vgpu_region_generation_begin(m); }
static void gen_end(struct vgpu_region_map *m) { vgpu_region_generation_end(m); }

static void clear_slot_body(struct vgpu_region_map *m, int idx) {
  vgpu_proc_slot_t *s = &m->r->procs[idx];
  /* A writer killed mid-update left the seqlock odd: re-align it so it ends even below. */
  if (__atomic_load_n(&s->seqlock, __ATOMIC_ACQUIRE) & 1) __atomic_fetch_add(&s->seqlock, 1, __ATOMIC_ACQ_REL);
  seq_begin(s);
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
    vgpu_device_memory_t *u = &s->used[d];
    STORE_RELAXED(&u->context_size, 0);
    STORE_RELAXED(&u->module_size, 0);
    STORE_RELAXED(&u->data_size, 0);
    STORE_RELAXED(&u->offset, 0);
    STORE_RELAXED(&u->total, 0);
    STORE_RELAXED(&s->monitorused[d], 0);
    STORE_RELAXED(&s->device_util[d].sm_util, 0);
    STORE_RELAXED(&s->device_util[d].enc_util, 0);
    STORE_RELAXED(&s->device_util[d].dec_util, 0);
  }
  seq_end(s);
}

/* Frees in place, as a clean exit does: status first (HAMi's monitor skips the slot from then
 * on), counters zeroed under the seqlock, pid last. Slots never move, so lock-free readers never
 * see a half-copied slot. */
void vgpu_region_clear_slot(struct vgpu_region_map *m, int idx) {
  if (idx < 0 || idx >= VGPU_MAX_PROCS) return;
  vgpu_proc_slot_t *s = &m->r->procs[idx];
  STORE(&s->status, VGPU_SLOT_FREE);
  clear_slot_body(m, idx);
  STORE(&s->hostpid, 0);
  STORE(&s->pid, 0);
  if (m->ext) memset(&m->ext->slots[idx], 0, sizeof m->ext->slots[idx]);
}

int vgpu_region_trim_slots(struct vgpu_region_map *m) {
  /* Trailing free slots shrink the table so readers scan less. */
  int n = LOAD(&m->r->proc_num);
  if (n < 0) n = 0;
  if (n > VGPU_MAX_PROCS) n = VGPU_MAX_PROCS;
  while (n > 0 && LOAD(&m->r->procs[n - 1].status) == VGPU_SLOT_FREE &&
         LOAD(&m->r->procs[n - 1].pid) == 0)
    n--;
  STORE(&m->r->proc_num, n);
  return n;
}

void vgpu_region_free_slot(struct vgpu_region_map *m, int idx) {
  if (idx < 0 || idx >= VGPU_MAX_PROCS) return;
  gen_begin(m);
  vgpu_region_clear_slot(m, idx);
  vgpu_region_trim_slots(m);
  gen_end(m);
}

int vgpu_region_sweep(struct vgpu_region_map *m, int self, int *suspects) {
  int n = LOAD(&m->r->proc_num), freed = 0, sus = 0;
  if (n > VGPU_MAX_PROCS) n = VGPU_MAX_PROCS;
  uint64_t now = vgpu_now_realtime_ns();
  for (int i = n - 1; i >= 0; i--) {
    if (i == self) continue;
    vgpu_proc_slot_t *s = &m->r->procs[i];
    if (LOAD(&s->status) == VGPU_SLOT_FREE && LOAD(&s->pid) == 0) continue;
    int alive = vgpu_region_slot_alive(m, i, now);
    if (alive < 0) sus++;
    if (alive != 0) continue;
    VGPU_LOG_INFO("freeing slot %d of dead process %d (%llu bytes on device 0)", i,
                  (int)LOAD(&s->pid), (unsigned long long)vgpu_slot_total(m, i, 0));
    vgpu_region_free_slot(m, i);
    freed++;
  }
  if (suspects) *suspects = sus;
  return freed;
}

int vgpu_region_claim_slot(struct vgpu_region_map *m, const struct vgpu_slot_identity *id) {
  vgpu_region_sweep(m, -1, NULL);
  int n = LOAD(&m->r->proc_num);
  if (n < 0) n = 0;
  if (n > VGPU_MAX_PROCS) n = VGPU_MAX_PROCS;
  int idx = -1;
  for (int i = 0; i < n && idx < 0; i++) /* our pid in a slot: a previous life of this pid */
    if (LOAD(&m->r->procs[i].pid) == id->pid) idx = i;
  for (int i = 0; i < n && idx < 0; i++)
    if (LOAD(&m->r->procs[i].status) == VGPU_SLOT_FREE && LOAD(&m->r->procs[i].pid) == 0) idx = i;
  bool append = false;
  if (idx < 0) {
    if (n >= VGPU_MAX_PROCS) return -1;
    idx = n;
    append = true;
  }
  vgpu_proc_slot_t *s = &m->r->procs[idx];
  gen_begin(m);
  STORE(&s->status, VGPU_SLOT_FREE);
  clear_slot_body(m, idx);
  STORE(&s->pid, id->pid);
  STORE(&s->hostpid, id->hostpid);
  if (m->ext) {
    vgpu_ext_slot_t *e = &m->ext->slots[idx];
    STORE(&e->start_time_ticks, id->start_time_ticks);
    STORE(&e->heartbeat_ns, vgpu_now_realtime_ns());
    STORE(&e->hostpid_source, id->hostpid_source);
    STORE(&e->pid, id->pid);
  }
  STORE(&s->status, VGPU_SLOT_RUNNING);
  if (append) STORE(&m->r->proc_num, idx + 1);
  gen_end(m);
  return idx;
}


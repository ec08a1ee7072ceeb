/*
 * region.c — see region.h. Byte layout from include/vgpu/vgpu_region.h (HAMi v1.2).
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

#include "vgpu.h"

_Static_assert(sizeof(sem_t) <= VGPU_SEM_SIZE, "sem_t fits HAMi's sem field");

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define LOAD_RELAXED(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define STORE_RELAXED(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

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

static int set_lock(int fd, int cmd, short type, off_t start, off_t len) {
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
static int set_lock_until(int fd, short type, off_t start, off_t len, uint64_t deadline) {
  unsigned backoff_us = 20;
  while (set_lock(fd, F_SETLK, type, start, len) != 0) {
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
  return set_lock_until(fd, F_WRLCK, 0, (off_t)sizeof(vgpu_region_t),
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
  set_lock(fd, F_SETLK, F_UNLCK, 0, (off_t)sizeof(vgpu_region_t));
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

static pthread_mutex_t *reserve_mutex(struct vgpu_region_map *m) {
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

/* ---- slot lock */

static pthread_mutex_t g_lock_mu = PTHREAD_MUTEX_INITIALIZER;

static void *hami_sem(struct vgpu_region_map *m) { return m->r->sem; }

/* Whether region->sem can be used as a lock; an unusable one is reported once per process and the
 * slot lock is then the record lock alone (every libvgpu process still excluded; HAMi-core
 * processes sharing the file are not, and their own sem_* calls may abort on those bytes). */
static bool hami_sem_usable(struct vgpu_region_map *m) {
  static int reported;
  int value = 0;
  const char *why = NULL;
  if (vgpu_sem_check(hami_sem(m), &value, &why)) return true;
  if (!__atomic_exchange_n(&reported, 1, __ATOMIC_RELAXED))
    VGPU_LOG_ERROR("shrreg semaphore is unusable (%s); locking with the record lock only, which "
                   "HAMi-core processes sharing the file do not take; fix: delete the cache file "
                   "once no process of the container uses it",
                   why);
  return false;
}

/* HAMi-core's lock: wait on region->sem, then owner_pid = our pid. Bounded by `deadline`
 * (monotonic ns). Recovery as HAMi-core's lock_shrreg, but at once instead of after a
 * 10 s timeout: an owner that is dead in our /proc (one file = one container = one pid namespace)
 * is cleared and the semaphore posted. A semaphore left at 0 with no owner (a holder SIGKILLed
 * between sem_wait and storing owner_pid, or between HAMi-core's owner_pid = 0 and sem_post:
 * HAMi-core #86) is posted once, after owner_pid read 0 for a whole bound, or for 100 ms when the
 * previous libvgpu holder of the slot lock died inside its critical section (`prev_died`; then the
 * holder cannot be a live libvgpu process, which would hold the slot lock we now hold); a live
 * holder stores owner_pid right after sem_wait returns, so it cannot look like this unless it is
 * stopped exactly between those two instructions. HAMi-core itself exits after five minutes. */
static bool hami_lock_until(struct vgpu_region_map *m, uint64_t deadline, bool prev_died,
                            bool recover) {
  void *sem = hami_sem(m);
  uint64_t *owner = &m->r->owner_pid;
  uint64_t me = (uint64_t)getpid();
  uint64_t owner_seen = vgpu_now_monotonic_ns(); /* last time owner_pid was non-zero (or start) */
  bool orphan_posted = false;
  int recoveries = 0;
  uint64_t dead_owner = 0, dead_since = 0;
  uint64_t step = 1000000ull; /* 1 ms, doubling to 50 ms */
  m->sem_held = false;
  for (;;) {
    if (!hami_sem_usable(m)) return true; /* not a semaphore we can use: record lock only */
    if (vgpu_sem_trywait(sem)) break;
    uint64_t o = LOAD(owner);
    uint64_t now = vgpu_now_monotonic_ns();
    if (o != 0) owner_seen = now;
    /* Our own pid cannot be a live holder here (our threads are serialized before this): a
     * previous life of this pid. A dead owner is recovered only if it is still recorded 1 ms later
     * with the semaphore still taken: a stale owner left by a holder killed after its sem_post
     * while a live process has just taken the semaphore (and is about to record itself) must not
     * be mistaken for the holder. */
    bool dead = recover && o != 0 && recoveries < 8 &&
                (o == me || vgpu_proc_stat((pid_t)o, NULL) == 0);
    if (dead && o != dead_owner) {
      dead_owner = o;
      dead_since = now;
      dead = false;
    }
    if (dead && now - dead_since >= 1000000ull) {
      recoveries++;
      if (__atomic_compare_exchange_n(owner, &o, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        VGPU_LOG_WARN("shrreg semaphore owner %llu is dead; recovered the lock",
                      (unsigned long long)o);
        vgpu_sem_post_if_down(sem);
      }
      continue;
    }
    uint64_t orphan_after = prev_died ? 100000000ull : vgpu_region_wait_ns;
    if (recover && !orphan_posted && now - owner_seen >= orphan_after) {
      VGPU_LOG_ERROR("shrreg semaphore held with no owner for %llu ms (a holder died between "
                     "sem_wait and recording itself, HAMi-core #86); released it",
                     (unsigned long long)((now - owner_seen) / 1000000));
      orphan_posted = true;
      vgpu_sem_post_if_down(sem);
      continue;
    }
    if (now >= deadline) return false;
    /* Waits in short steps: the owner is sampled between them. */
    uint64_t wait = deadline - now < step ? deadline - now : step;
    if (step < 50000000ull) step *= 2;
    if (vgpu_sem_wait_ns(sem, wait)) break;
  }
  m->sem_held = true;
  STORE(owner, me);
  return true;
}

static void hami_unlock(struct vgpu_region_map *m) {
  /* Post first, then clear owner_pid only if it is still ours: a SIGKILL between the two leaves a
   * free semaphore with a dead owner (harmless), never HAMi-core's unrecoverable 0-with-no-owner.
   * A semaphore this holder did not take (unusable bytes) is left alone. */
  if (!m->sem_held) return;
  m->sem_held = false;
  uint64_t me = (uint64_t)getpid();
  vgpu_sem_post(hami_sem(m));
  __atomic_compare_exchange_n(&m->r->owner_pid, &me, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/* The slot lock; `recover`: see hami_lock_until. On timeout *holder (if given) names what kept
 * it. */
static bool lock_for(struct vgpu_region_map *m, uint64_t bound_ns, bool recover, pid_t *holder) {
  if (holder) *holder = 0;
  uint64_t deadline = vgpu_now_monotonic_ns() + bound_ns;
  /* Threads of this process: a timed wait too (the holder may be waiting on a stopped peer). */
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += (time_t)(bound_ns / 1000000000ull);
  dl.tv_nsec += (long)(bound_ns % 1000000000ull);
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  if (pthread_mutex_timedlock(&g_lock_mu, &dl) != 0) {
    if (holder) *holder = getpid(); /* another thread of this process */
    return false;
  }
  if (set_lock_until(m->fd, F_WRLCK, VGPU_SLOT_LOCK_OFFSET, 1, deadline) != 0) {
    if (errno == ETIMEDOUT) {
      if (holder) *holder = vgpu_region_lock_holder(m);
      pthread_mutex_unlock(&g_lock_mu);
      return false;
    }
    /* Locks unsupported on this filesystem: still serialize threads; processes may race. */
    VGPU_LOG_ERROR("cannot lock shrreg (%s); container-wide limit not atomic", strerror(errno));
  }
  bool prev_died = false;
  if (m->ext) {
    /* Still set: the previous holder died inside its critical section (unlock clears it). */
    int32_t prev = LOAD(&m->ext->lock_holder_pid);
    prev_died = prev > 0 && prev != (int32_t)getpid() && vgpu_proc_stat(prev, NULL) == 0;
    STORE_RELAXED(&m->ext->lock_holder_since_ns, vgpu_now_realtime_ns());
    STORE(&m->ext->lock_holder_pid, (int32_t)getpid());
  }
  if (!hami_lock_until(m, deadline, prev_died, recover)) {
    if (holder) *holder = (pid_t)LOAD(&m->r->owner_pid);
    if (m->ext) {
      STORE(&m->ext->lock_holder_pid, 0);
      STORE_RELAXED(&m->ext->lock_holder_since_ns, 0);
    }
    set_lock(m->fd, F_SETLK, F_UNLCK, VGPU_SLOT_LOCK_OFFSET, 1);
    pthread_mutex_unlock(&g_lock_mu);
    return false;
  }
  return true;
}

bool vgpu_region_lock_for(struct vgpu_region_map *m, uint64_t bound_ns) {
  return lock_for(m, bound_ns, true, NULL);
}

bool vgpu_region_lock_no_recovery_for(struct vgpu_region_map *m, uint64_t bound_ns, pid_t *holder) {
  return lock_for(m, bound_ns, false, holder);
}

bool vgpu_region_release_stale_lock(struct vgpu_region_map *m, int32_t holder) {
  if (holder != 0 && m->ext) {
    int32_t expect = holder;
    if (__atomic_compare_exchange_n(&m->ext->lock_holder_pid, &expect, 0, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
      STORE_RELAXED(&m->ext->lock_holder_since_ns, 0);
  }
  if (holder != 0) {
    uint64_t expect = (uint64_t)(int64_t)holder;
    __atomic_compare_exchange_n(&m->r->owner_pid, &expect, 0, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
  }
  /* Posts only a valid semaphore that is down (one CAS, so a holder taking it meanwhile wins). */
  int value = 0;
  const char *why = NULL;
  if (!vgpu_sem_check(hami_sem(m), &value, &why)) return false;
  return vgpu_sem_post_if_down(hami_sem(m));
}

void vgpu_region_lock(struct vgpu_region_map *m) {
  uint64_t start = vgpu_now_monotonic_ns();
  while (!vgpu_region_lock_for(m, 10000000000ull))
    VGPU_LOG_WARN("Lock shrreg timeout after %llu ms, owner=%d (semaphore owner %llu), retrying",
                  (unsigned long long)((vgpu_now_monotonic_ns() - start) / 1000000),
                  (int)vgpu_region_lock_holder(m),
                  (unsigned long long)LOAD(&m->r->owner_pid));
}

void vgpu_region_unlock(struct vgpu_region_map *m) {
  hami_unlock(m);
  if (m->ext) {
    STORE(&m->ext->lock_holder_pid, 0);
    STORE_RELAXED(&m->ext->lock_holder_since_ns, 0);
  }
  set_lock(m->fd, F_SETLK, F_UNLCK, VGPU_SLOT_LOCK_OFFSET, 1);
  pthread_mutex_unlock(&g_lock_mu);
}

int vgpu_region_reserve_lock_for(struct vgpu_region_map *m, uint64_t bound_ns) {
  pthread_mutex_t *mu = reserve_mutex(m);
  if (!mu) return vgpu_region_lock_for(m, bound_ns) ? 0 : -1;
  int rc = pthread_mutex_trylock(mu);
  if (rc == EBUSY) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += (time_t)(bound_ns / 1000000000ull);
    deadline.tv_nsec += (long)(bound_ns % 1000000000ull);
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec++;
      deadline.tv_nsec -= 1000000000L;
    }
    rc = pthread_mutex_timedlock(mu, &deadline);
    if (rc == ETIMEDOUT) return -1;
  }
  if (rc == EOWNERDEAD) {
    /* The holder died between summing and adding to its own slot: nothing shared is half-done
     * beyond that slot, which its seqlock protects and the sweep will free. */
    VGPU_LOG_WARN("reservation lock holder died; recovered");
    pthread_mutex_consistent(mu);
  } else if (rc != 0) {
    VGPU_LOG_ERROR("reservation lock failed (%s); using the slot lock", strerror(rc));
    __atomic_fetch_and(&m->ext->flags, ~VGPU_EXT_FLAG_RESERVE_MUTEX, __ATOMIC_RELEASE);
    return vgpu_region_lock_for(m, bound_ns) ? 0 : -1;
  }
  return 1;
}

bool vgpu_region_reserve_lock(struct vgpu_region_map *m) {
  /* A live holder normally keeps it for microseconds; one that is stopped (SIGSTOP, a debugger)
   * would block everyone, so say so every 10 s the way HAMi-core's users grep for. */
  for (unsigned waited = 10;; waited += 10) {
    int rc = vgpu_region_reserve_lock_for(m, 10000000000ull);
    if (rc >= 0) return rc == 1;
    pthread_mutex_t *mu = reserve_mutex(m);
    VGPU_LOG_WARN("Lock shrreg timeout after %u ms (reservation lock), owner tid=%d, retrying",
                  waited * 1000, mu ? (int)mu->__data.__owner : 0);
  }
}

void vgpu_region_reserve_unlock(struct vgpu_region_map *m, bool mutex) {
  if (mutex)
    pthread_mutex_unlock((pthread_mutex_t *)(void *)m->ext->reserve_mutex);
  else
    vgpu_region_unlock(m);
}

void vgpu_region_atfork(int phase) {
  if (phase == 0)
    pthread_mutex_lock(&g_lock_mu);
  else
    pthread_mutex_unlock(&g_lock_mu);
}

pid_t vgpu_region_lock_holder(struct vgpu_region_map *m) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = VGPU_SLOT_LOCK_OFFSET,
                     .l_len = 1};
  if (fcntl(m->fd, F_GETLK, &fl) != 0 || fl.l_type == F_UNLCK) return 0;
  return fl.l_pid;
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

/* ---- liveness */

enum vgpu_liveness vgpu_proc_liveness(const char *proc_root, int pid, uint64_t recorded_start,
                                      uint64_t *start) {
  char path[4200], buf[1024];
  if (start) *start = 0;
  if (pid <= 0) return VGPU_LIVE_NO_PID;
  if ((size_t)snprintf(path, sizeof path, "%s/%d/stat", proc_root, pid) >= sizeof path)
    return VGPU_LIVE_UNKNOWN;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? VGPU_LIVE_GONE : VGPU_LIVE_UNKNOWN;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return n == 0 ? VGPU_LIVE_GONE : VGPU_LIVE_UNKNOWN;
  buf[n] = 0;
  /* The command name (field 2) may hold spaces and parentheses: fields restart after the last
   * ')'. */
  const char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ' || p[2] == 0) return VGPU_LIVE_UNKNOWN;
  char state = p[2];
  p += 2; /* field 3 (state); starttime is field 22 */
  int field = 3;
  for (; field < 22 && *p; p++)
    if (*p == ' ') field++;
  uint64_t found = field == 22 ? strtoull(p, NULL, 10) : 0;
  if (start) *start = found;
  if (state == 'Z' || state == 'X' || state == 'x') return VGPU_LIVE_ZOMBIE;
  if (recorded_start != 0 && found != 0 && found != recorded_start) return VGPU_LIVE_REUSED;
  return VGPU_LIVE_ALIVE;
}

const char *vgpu_liveness_name(enum vgpu_liveness l) {
  switch (l) {
    case VGPU_LIVE_ALIVE: return "alive";
    case VGPU_LIVE_GONE: return "gone";
    case VGPU_LIVE_ZOMBIE: return "zombie";
    case VGPU_LIVE_REUSED: return "pid-reused";
    case VGPU_LIVE_UNKNOWN: return "unknown";
    case VGPU_LIVE_NO_PID: return "no-pid";
  }
  return "unknown";
}

int vgpu_proc_stat(pid_t pid, uint64_t *start_ticks) {
  uint64_t start = 0;
  switch (vgpu_proc_liveness("/proc", (int)pid, 0, &start)) {
    case VGPU_LIVE_ALIVE:
      if (start == 0) return -1; /* no start time: cannot tell a reused pid */
      if (start_ticks) *start_ticks = start;
      return 1;
    case VGPU_LIVE_GONE:
    case VGPU_LIVE_ZOMBIE:
    case VGPU_LIVE_NO_PID: return 0;
    default: return -1;
  }
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

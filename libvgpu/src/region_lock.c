/*
 * region_lock.c — the slot lock (in-process mutex, fcntl record lock, HAMi-core's semaphore with
 * owner_pid) and the reservation lock; see region.h. Split from region.c.
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

/* CLOCK_REALTIME bound_ns from now: pthread_mutex_timedlock's deadline. */
static struct timespec realtime_deadline(uint64_t bound_ns) {
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += (time_t)(bound_ns / 1000000000ull);
  dl.tv_nsec += (long)(bound_ns % 1000000000ull);
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  return dl;
}

/* The slot lock; `recover`: see hami_lock_until. On timeout *holder (if given) names what kept
 * it. */
static bool lock_for(struct vgpu_region_map *m, uint64_t bound_ns, bool recover, pid_t *holder) {
  if (holder) *holder = 0;
  uint64_t deadline = vgpu_now_monotonic_ns() + bound_ns;
  /* Threads of this process: a timed wait too (the holder may be waiting on a stopped peer). */
  struct timespec dl = realtime_deadline(bound_ns);
  if (pthread_mutex_timedlock(&g_lock_mu, &dl) != 0) {
    if (holder) *holder = getpid(); /* another thread of this process */
    return false;
  }
  if (vgpu_region_set_lock_until(m->fd, F_WRLCK, VGPU_SLOT_LOCK_OFFSET, 1, deadline) != 0) {
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
    vgpu_region_set_lock(m->fd, F_SETLK, F_UNLCK, VGPU_SLOT_LOCK_OFFSET, 1);
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
  vgpu_region_set_lock(m->fd, F_SETLK, F_UNLCK, VGPU_SLOT_LOCK_OFFSET, 1);
  pthread_mutex_unlock(&g_lock_mu);
}

int vgpu_region_reserve_lock_for(struct vgpu_region_map *m, uint64_t bound_ns) {
  pthread_mutex_t *mu = vgpu_region_reserve_mutex(m);
  if (!mu) return vgpu_region_lock_for(m, bound_ns) ? 0 : -1;
  int rc = pthread_mutex_trylock(mu);
  if (rc == EBUSY) {
    struct timespec deadline = realtime_deadline(bound_ns);
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
    pthread_mutex_t *mu = vgpu_region_reserve_mutex(m);
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


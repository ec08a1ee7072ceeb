/*
 * region_sem.c — HAMi-core's slot-table semaphore (region->sem), operated without glibc's
 * sem_* calls. See region.h "Region semaphore".
 *
 * The semaphore lives in a file every process of the container can write, so its bytes are
 * hostile input. glibc treats an unexpected futex error as fatal: a `private` word that is not a
 * futex flag turns sem_timedwait (EINVAL) or sem_post with waiters (ENOSYS) into abort(), and a
 * value word at SEM_VALUE_MAX makes sem_post fail. These functions keep glibc's protocol on the
 * value word (so HAMi-core processes calling sem_wait/sem_post on the same bytes are excluded, and
 * woken by our posts) but always use the process-shared futex operations and ignore futex errors:
 * whatever the bytes, they return, never abort.
 *
 * glibc's sem_t (64-bit targets): the value is the 32-bit word at offset 0, the futex word. Since
 * glibc 2.21 it is the low half of a 64-bit word whose high half counts waiters, followed at offset
 * 8 by the futex flag word `private` (FUTEX_PRIVATE_FLAG = 128 for a process-shared semaphore, as
 * sem_init(pshared=1) writes it; 0 for a process-private one). glibc 2.17-2.20 (the library's
 * floor) keep `private` at offset 4 (0 = shared) and a 64-bit waiter count at offset 8. To work
 * with both, these functions touch only the value word: they do not register as waiters (a glibc
 * poster then skips the wake-up, so a wait re-checks the value every WAIT_STEP_NS), and a post
 * always wakes one sleeper (glibc waiters of either layout sleep on the value word).
 */
#include <limits.h>
#include <linux/futex.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "region.h"
#include "vgpu.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the value word is at offset 0");
_Static_assert(sizeof(void *) == 8, "glibc's 64-bit sem_t layout");
_Static_assert(sizeof(sem_t) == 32, "glibc's 64-bit sem_t layout");

#define WAIT_STEP_NS 50000000ull /* a glibc post does not wake us: the longest a wait oversleeps */

static uint32_t *value_word(void *sem) { return (uint32_t *)sem; }

bool vgpu_sem_check(const void *sem, int *value, const char **why) {
  uint32_t v = __atomic_load_n((const uint32_t *)sem, __ATOMIC_ACQUIRE);
  int32_t flag = __atomic_load_n((const int32_t *)((const char *)sem + 8), __ATOMIC_RELAXED);
  *value = v > INT_MAX ? -1 : (int)v;
  *why = NULL;
  /* 128: process-shared (glibc >= 2.21); 0: process-private there, or glibc < 2.21's idle
   * waiter count: both valid futex operations, so accepted. */
  if (flag != FUTEX_PRIVATE_FLAG && flag != 0)
    *why = "its futex flag word is garbage: not a semaphore";
  else if (v > INT_MAX)
    *why = "its value is out of range: not a semaphore";
  else if (v > 1)
    *why = "its value is above 1: it would admit several holders at once";
  return *why == NULL;
}

int vgpu_sem_value(const void *sem) {
  uint32_t v = __atomic_load_n((const uint32_t *)sem, __ATOMIC_ACQUIRE);
  return v > INT_MAX ? -1 : (int)v;
}

bool vgpu_sem_trywait(void *sem) {
  uint32_t *w = value_word(sem);
  uint32_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
  for (;;) {
    if (v == 0 || v > INT_MAX) return false;
    if (__atomic_compare_exchange_n(w, &v, v - 1, true, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      return true;
  }
}

bool vgpu_sem_wait_ns(void *sem, uint64_t wait_ns) {
  uint64_t deadline = vgpu_now_monotonic_ns() + wait_ns;
  for (;;) {
    if (vgpu_sem_trywait(sem)) return true;
    if (vgpu_sem_value(sem) != 0) return false; /* out of range: no post can make it takeable */
    uint64_t now = vgpu_now_monotonic_ns();
    if (now >= deadline) return false;
    uint64_t left = deadline - now < WAIT_STEP_NS ? deadline - now : WAIT_STEP_NS;
    struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
    /* Process-shared wait while the value reads 0. Every outcome (woken, EAGAIN: it changed,
     * ETIMEDOUT, EINTR, any error) loops back to the checks above. */
    syscall(SYS_futex, value_word(sem), FUTEX_WAIT, 0, &ts, NULL, 0);
  }
}

static bool post_from(void *sem, bool only_if_down) {
  uint32_t *w = value_word(sem);
  uint32_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
  do {
    if (only_if_down ? v != 0 : v >= INT_MAX) return false; /* glibc: EOVERFLOW at INT_MAX */
  } while (!__atomic_compare_exchange_n(w, &v, v + 1, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
  /* One sleeper, glibc's or ours; errors (hostile bytes cannot cause one here) are ignored. */
  syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
  return true;
}

bool vgpu_sem_post(void *sem) { return post_from(sem, false); }

bool vgpu_sem_post_if_down(void *sem) { return post_from(sem, true); }

/*
 * region_sem_test.c — the region semaphore without glibc's sem_* calls (src/region_sem.c):
 *   - it speaks glibc's protocol: a glibc sem_wait in another process is woken by vgpu_sem_post,
 *     a vgpu_sem_wait_ns is woken by glibc's sem_post, and the two exclude each other;
 *   - whatever the bytes (every garbage futex flag, out-of-range values, waiter counts), check
 *     judges them, and trywait/wait/post return instead of aborting as glibc's calls do;
 *   - the slot lock over a garbage semaphore falls back to the record lock and never posts it;
 *   - glibc itself aborts on such bytes (the reason for all this; checked in a child).
 * Run: libvgpu/build/unit/region_sem_test
 */
#include <limits.h>
#include <semaphore.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "region.h"
#include "vgpu.h"
#include "vgpu_unit.h"

static void *shared_sem(void) {
  void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) abort();
  if (sem_init((sem_t *)p, 1, 1) != 0) abort();
  return p;
}

static void set_bytes(void *sem, uint64_t data, int32_t flag) {
  __atomic_store_n((uint64_t *)sem, data, __ATOMIC_RELEASE);
  __atomic_store_n((int32_t *)((char *)sem + 8), flag, __ATOMIC_RELEASE);
}

static void check_acceptsWhatSemInitWrites(void) {
  void *s = shared_sem();
  int v = -2;
  const char *why = "x";
  EXPECT(vgpu_sem_check(s, &v, &why));
  EXPECT_EQ_U(v, 1);
  EXPECT(why == NULL);
  EXPECT(vgpu_sem_trywait(s));
  EXPECT(vgpu_sem_check(s, &v, &why));
  EXPECT_EQ_U(v, 0);
  EXPECT(!vgpu_sem_trywait(s));
  EXPECT(vgpu_sem_post(s));
  int gv = -1;
  sem_getvalue((sem_t *)s, &gv);
  EXPECT_EQ_U(gv, 1);
  munmap(s, 4096);
}

/* glibc >= 2.21 process-private (flag 0), and glibc 2.17-2.20's layout (value, private = 0 at
 * offset 4, a waiter count at 8) when idle: valid futex operations, accepted. */
static void check_acceptsOtherGlibcStates(void) {
  void *s = shared_sem();
  int v = 0;
  const char *why = NULL;
  set_bytes(s, 1, 0);
  EXPECT(vgpu_sem_check(s, &v, &why));
  set_bytes(s, 0x300000000ull, 128); /* three glibc waiters on a held semaphore */
  EXPECT(vgpu_sem_check(s, &v, &why));
  EXPECT_EQ_U(v, 0);
  munmap(s, 4096);
}

static void check_refusesGarbage(void) {
  void *s = shared_sem();
  static const struct {
    uint64_t data;
    int32_t flag;
  } bad[] = {{0, 1},          {0, (int32_t)0xdeadbeef}, {0x500000000ull, 7}, {1, -1},
             {0, 129},        {2, 128},                {0x7fffffffull, 128}, {0xffffffffull, 128},
             {0x80000000ull, 0}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int v = 0;
    const char *why = NULL;
    set_bytes(s, bad[i].data, bad[i].flag);
    EXPECT(!vgpu_sem_check(s, &v, &why));
    EXPECT(why != NULL);
  }
  munmap(s, 4096);
}

/* Every operation on every garbage pattern returns (in a child: an abort would show as a signal). */
static void ops_neverAbortOnGarbage(void) {
  void *s = shared_sem();
  pid_t pid = fork();
  if (pid == 0) {
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 20000; i++) {
      seed ^= seed << 13;
      seed ^= seed >> 7;
      seed ^= seed << 17;
      uint64_t data = (i % 3 == 0) ? (seed & 0xffffffff00000000ull) : seed; /* often value 0 */
      set_bytes(s, data, (int32_t)(seed >> 17));
      vgpu_sem_trywait(s);
      vgpu_sem_wait_ns(s, i % 100 == 0 ? 1000000 : 0);
      vgpu_sem_post(s);
      vgpu_sem_post_if_down(s);
    }
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  munmap(s, 4096);
}

/* What the tool used to run into: glibc's sem_timedwait on such bytes aborts the process. */
static void glibc_abortsOnGarbageFlag(void) {
  void *s = shared_sem();
  set_bytes(s, 0, (int32_t)0xdeadbeef);
  pid_t pid = fork();
  if (pid == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    sem_timedwait((sem_t *)s, &ts);
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  munmap(s, 4096);
}

/* A glibc waiter in another process (HAMi-core's sem_wait) is woken by our post. */
static void glibcWaiter_wokenByOurPost(void) {
  void *s = shared_sem();
  EXPECT(vgpu_sem_trywait(s)); /* we hold it */
  pid_t pid = fork();
  if (pid == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    _exit(sem_timedwait((sem_t *)s, &ts) == 0 ? 0 : 1);
  }
  /* Wait until the child is counted as a waiter (glibc adds 1 << 32 before sleeping). */
  for (int i = 0; i < 2000 && (__atomic_load_n((uint64_t *)s, __ATOMIC_ACQUIRE) >> 32) == 0; i++)
    usleep(1000);
  EXPECT((__atomic_load_n((uint64_t *)s, __ATOMIC_ACQUIRE) >> 32) != 0);
  uint64_t t0 = vgpu_now_monotonic_ns();
  EXPECT(vgpu_sem_post(s));
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT(vgpu_now_monotonic_ns() - t0 < 2000000000ull); /* woken, not timed out */
  EXPECT_EQ_U(vgpu_sem_value(s), 0);                     /* the child took it and exited */
  munmap(s, 4096);
}

/* Our waiter is woken by a glibc sem_post from another process, long before its bound. */
static void ourWaiter_wokenByGlibcPost(void) {
  void *s = shared_sem();
  EXPECT(vgpu_sem_trywait(s));
  pid_t pid = fork();
  if (pid == 0) {
    usleep(200000);
    sem_post((sem_t *)s);
    _exit(0);
  }
  uint64_t t0 = vgpu_now_monotonic_ns();
  EXPECT(vgpu_sem_wait_ns(s, 5000000000ull));
  uint64_t took = vgpu_now_monotonic_ns() - t0;
  EXPECT(took >= 150000000ull && took < 2000000000ull);
  waitpid(pid, NULL, 0);
  EXPECT_EQ_U(vgpu_sem_value(s), 0);
  EXPECT_EQ_U(__atomic_load_n((uint64_t *)s, __ATOMIC_ACQUIRE) >> 32, 0); /* waiter count undone */
  EXPECT(!vgpu_sem_wait_ns(s, 20000000ull));                              /* held: times out */
  EXPECT_EQ_U(__atomic_load_n((uint64_t *)s, __ATOMIC_ACQUIRE) >> 32, 0);
  munmap(s, 4096);
}

/* Mutual exclusion between glibc users and ours: a counter incremented non-atomically under the
 * semaphore by two processes (one glibc, one ours) loses no increment. */
static void glibcAndOurs_excludeEachOther(void) {
  void *s = shared_sem();
  volatile uint64_t *counter = (volatile uint64_t *)((char *)s + 64);
  *counter = 0;
  enum { N = 20000 };
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < N; i++) {
      sem_wait((sem_t *)s);
      uint64_t c = *counter;
      if (i % 64 == 0) sched_yield();
      *counter = c + 1;
      sem_post((sem_t *)s);
    }
    _exit(0);
  }
  for (int i = 0; i < N; i++) {
    while (!vgpu_sem_wait_ns(s, 1000000000ull)) {
    }
    uint64_t c = *counter;
    if (i % 64 == 0) sched_yield();
    *counter = c + 1;
    vgpu_sem_post(s);
  }
  waitpid(pid, NULL, 0);
  EXPECT_EQ_U(*counter, 2 * N);
  EXPECT_EQ_U(vgpu_sem_value(s), 1);
  munmap(s, 4096);
}

static void postIfDown_postsOnlyAtZero(void) {
  void *s = shared_sem();
  EXPECT(!vgpu_sem_post_if_down(s)); /* free: posting would admit two */
  EXPECT_EQ_U(vgpu_sem_value(s), 1);
  EXPECT(vgpu_sem_trywait(s));
  EXPECT(vgpu_sem_post_if_down(s));
  EXPECT_EQ_U(vgpu_sem_value(s), 1);
  set_bytes(s, 0xffffffffull, 0);
  EXPECT(!vgpu_sem_post(s)); /* out of range: never wraps into the waiter count */
  EXPECT_EQ_U(__atomic_load_n((uint64_t *)s, __ATOMIC_ACQUIRE), 0xffffffffull);
  munmap(s, 4096);
}

/* The slot lock over a garbage semaphore: the record lock alone, the bytes never posted. */
static void slotLock_garbageSemaphore_recordLockOnlyAndUntouched(void) {
  char dir[] = "/tmp/vgpu-sem-XXXXXX";
  if (!mkdtemp(dir)) abort();
  char path[256];
  snprintf(path, sizeof path, "%s/r.cache", dir);
  struct vgpu_region_map m;
  struct vgpu_region_init in;
  memset(&in, 0, sizeof in);
  EXPECT(vgpu_region_open(&m, path, &in) == VGPU_REGION_OK);
  set_bytes(m.r->sem, 0, (int32_t)0xdeadbeef);
  pid_t pid = fork();
  if (pid == 0) {
    bool ok = vgpu_region_lock_for(&m, 200000000ull);
    if (ok) vgpu_region_unlock(&m);
    _exit(ok ? 0 : 1);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT_EQ_U(__atomic_load_n((uint64_t *)m.r->sem, __ATOMIC_ACQUIRE), 0);
  EXPECT(!vgpu_region_release_stale_lock(&m, 0)); /* never posts garbage */
  EXPECT_EQ_U(__atomic_load_n((uint64_t *)m.r->sem, __ATOMIC_ACQUIRE), 0);
  /* A valid one again: taken and given back as before. */
  sem_init((sem_t *)(void *)m.r->sem, 1, 1);
  EXPECT(vgpu_region_lock_for(&m, 200000000ull));
  EXPECT_EQ_U(vgpu_sem_value(m.r->sem), 0);
  EXPECT(m.r->owner_pid == (uint64_t)getpid());
  vgpu_region_unlock(&m);
  EXPECT_EQ_U(vgpu_sem_value(m.r->sem), 1);
  vgpu_region_close(&m);
  unlink(path);
  rmdir(dir);
}

UNIT_MAIN("region_sem_test", CASE(check_acceptsWhatSemInitWrites), CASE(check_acceptsOtherGlibcStates),
          CASE(check_refusesGarbage),
          CASE(ops_neverAbortOnGarbage), CASE(glibc_abortsOnGarbageFlag),
          CASE(glibcWaiter_wokenByOurPost), CASE(ourWaiter_wokenByGlibcPost),
          CASE(glibcAndOurs_excludeEachOther), CASE(postIfDown_postsOnlyAtZero),
          CASE(slotLock_garbageSemaphore_recordLockOnlyAndUntouched))

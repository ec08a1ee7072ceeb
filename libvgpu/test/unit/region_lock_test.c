/*
 * region_lock_test.c — death-safe locking, seqlock publication and liveness:
 *   - a process SIGKILLed while holding the slot lock never blocks the next locker (fcntl record
 *     locks are released by the kernel), repeated with kills at random moments;
 *   - readers never accept a torn slot (total == data_size invariant under a concurrent writer);
 *   - the sweep frees slots of dead processes and of reused pids, keeps live ones and ones whose
 *     heartbeat is still fresh (a process in another pid namespace);
 *   - a full slot table is reported, not overrun.
 * Run: libvgpu/build/unit/region_lock_test
 */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "region.h"
#include "vgpu.h"
#include "vgpu_unit.h"

static char g_dir[] = "/tmp/vgpu-lock-XXXXXX";
static char g_path[256];

static void open_fresh(struct vgpu_region_map *m, const char *name) {
  snprintf(g_path, sizeof g_path, "%s/%s", g_dir, name);
  struct vgpu_region_init in;
  memset(&in, 0, sizeof in);
  if (vgpu_region_open(m, g_path, &in) != VGPU_REGION_OK) abort();
}

static double now_s(void) { return (double)vgpu_now_monotonic_ns() / 1e9; }

static void lock_holderKilled_nextLockerProceeds(void) {
  struct vgpu_region_map m;
  open_fresh(&m, "lock.cache");
  unsigned seed = 99;
  for (int it = 0; it < 100; it++) {
    int p[2];
    if (pipe(p) != 0) abort();
    pid_t pid = fork();
    if (pid == 0) {
      struct vgpu_region_map c;
      if (vgpu_region_open(&c, g_path, NULL) != VGPU_REGION_OK) _exit(3);
      for (;;) { /* take and drop the lock until killed; tell the parent once it is held */
        vgpu_region_lock(&c);
        if (p[1] >= 0) {
          if (write(p[1], "x", 1) != 1) _exit(4);
          close(p[1]);
          p[1] = -1;
          pause();
        }
        vgpu_region_unlock(&c);
      }
    }
    close(p[1]);
    char ch;
    bool held = it % 2 == 0;
    if (held) { /* kill while it surely holds the lock */
      EXPECT(read(p[0], &ch, 1) == 1);
      EXPECT(vgpu_region_lock_holder(&m) == pid);
    } else { /* kill at a random moment */
      struct timespec ts = {0, (long)(rand_r(&seed) % 2000) * 1000};
      nanosleep(&ts, NULL);
    }
    close(p[0]);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    double t0 = now_s();
    vgpu_region_lock(&m);
    vgpu_region_unlock(&m);
    double took = now_s() - t0;
    if (took >= 0.5) fprintf(stderr, "  iteration %d (%s): next lock after %.3f s\n", it, held ? "held" : "random", took);
    EXPECT(took < 0.5);
  }
  EXPECT_EQ_U(vgpu_region_lock_holder(&m), 0);
  vgpu_region_close(&m);
}

/* The reservation mutex (robust, process-shared, in the extension): a holder killed while
 * holding it hands the next locker EOWNERDEAD, which is recovered, repeatedly. */
static void reserveLock_holderKilled_nextLockerProceeds(void) {
  struct vgpu_region_map m;
  open_fresh(&m, "reserve.cache");
  EXPECT(m.ext->flags & VGPU_EXT_FLAG_RESERVE_MUTEX);
  for (int it = 0; it < 20; it++) {
    int p[2];
    if (pipe(p) != 0) abort();
    pid_t pid = fork();
    if (pid == 0) {
      struct vgpu_region_map c;
      if (vgpu_region_open(&c, g_path, NULL) != VGPU_REGION_OK) _exit(3);
      EXPECT(vgpu_region_reserve_lock(&c));
      if (write(p[1], "x", 1) != 1) _exit(4);
      pause();
    }
    char ch;
    EXPECT(read(p[0], &ch, 1) == 1);
    close(p[0]);
    close(p[1]);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    double t0 = now_s();
    bool mutex = vgpu_region_reserve_lock(&m);
    EXPECT(mutex);
    vgpu_region_reserve_unlock(&m, mutex);
    EXPECT(now_s() - t0 < 0.5);
  }
  vgpu_region_close(&m);
}

static struct vgpu_region_map g_m;
static volatile int g_done;
static int g_torn;

static void *reader(void *arg) {
  (void)arg;
  vgpu_proc_slot_t *s = &g_m.r->procs[0];
  while (!g_done) {
    uint64_t s1 = __atomic_load_n(&s->seqlock, __ATOMIC_ACQUIRE);
    if (s1 & 1) continue;
    uint64_t total = __atomic_load_n(&s->used[0].total, __ATOMIC_RELAXED);
    uint64_t data = __atomic_load_n(&s->used[0].data_size, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&s->seqlock, __ATOMIC_RELAXED) != s1) continue;
    if (total != data) __atomic_fetch_add(&g_torn, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

static void seqlock_readers_neverSeeTornSlot(void) {
  open_fresh(&g_m, "seq.cache");
  struct vgpu_slot_identity id = {.pid = getpid()};
  vgpu_region_lock(&g_m);
  int idx = vgpu_region_claim_slot(&g_m, &id);
  vgpu_region_unlock(&g_m);
  EXPECT_EQ_U(idx, 0);
  pthread_t r[2];
  for (int i = 0; i < 2; i++) pthread_create(&r[i], NULL, reader, NULL);
  for (int i = 0; i < 300000; i++) {
    vgpu_slot_add(&g_m, 0, 0, VGPU_MEM_DATA, 4096 + i % 7);
    vgpu_slot_add(&g_m, 0, 0, VGPU_MEM_DATA, -(4096 + i % 7));
  }
  g_done = 1;
  for (int i = 0; i < 2; i++) pthread_join(r[i], NULL);
  EXPECT_EQ_U(g_torn, 0);
  EXPECT_EQ_U(vgpu_slot_total(&g_m, 0, 0), 0);
  vgpu_region_close(&g_m);
}

static pid_t dead_pid(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, NULL, 0);
  return pid;
}

static void sweep_freesDead_keepsLiveAndFresh(void) {
  struct vgpu_region_map m;
  open_fresh(&m, "sweep.cache");
  uint64_t my_start = 0;
  EXPECT(vgpu_proc_stat(getpid(), &my_start) == 1);
  vgpu_region_lock(&m);
  struct vgpu_slot_identity me = {.pid = getpid(), .start_time_ticks = my_start};
  struct vgpu_slot_identity dead = {.pid = dead_pid()};
  struct vgpu_slot_identity reused = {.pid = getppid(), .start_time_ticks = 1}; /* wrong start */
  struct vgpu_slot_identity fresh = {.pid = dead_pid()};
  struct vgpu_slot_identity foreign = {.pid = 1}; /* HAMi-core writer: no extension data */
  int i_me = vgpu_region_claim_slot(&m, &me);
  int i_dead = vgpu_region_claim_slot(&m, &dead);
  int i_reused = vgpu_region_claim_slot(&m, &reused);
  int i_fresh = vgpu_region_claim_slot(&m, &fresh);
  int i_foreign = vgpu_region_claim_slot(&m, &foreign);
  vgpu_slot_add(&m, i_dead, 0, VGPU_MEM_DATA, 1 << 20);
  vgpu_slot_add(&m, i_me, 0, VGPU_MEM_DATA, 1 << 10);
  m.ext->slots[i_dead].heartbeat_ns = 0;
  m.ext->slots[i_reused].heartbeat_ns = vgpu_now_realtime_ns() - 5000000000ull;
  memset(&m.ext->slots[i_foreign], 0, sizeof m.ext->slots[i_foreign]);
  EXPECT_EQ_U(vgpu_region_used(&m, 0), (1 << 20) + (1 << 10));
  int suspects = -1;
  EXPECT_EQ_U(vgpu_region_sweep(&m, i_me, &suspects), 2);
  EXPECT_EQ_U(suspects, 1);
  EXPECT_EQ_U(m.r->procs[i_dead].status, 0);
  EXPECT_EQ_U(m.r->procs[i_reused].status, 0);
  EXPECT_EQ_U(m.r->procs[i_me].status, 1);
  EXPECT_EQ_U(m.r->procs[i_fresh].status, 1);   /* kept until its heartbeat ages */
  EXPECT_EQ_U(m.r->procs[i_foreign].status, 1); /* pid 1 is alive */
  EXPECT_EQ_U(vgpu_region_used(&m, 0), 1 << 10);
  m.ext->slots[i_fresh].heartbeat_ns = vgpu_now_realtime_ns() - 2000000000ull;
  EXPECT_EQ_U(vgpu_region_sweep(&m, i_me, &suspects), 1);
  EXPECT_EQ_U(suspects, 0);
  /* Freed slots are reused before the table grows. */
  int n = m.r->proc_num;
  struct vgpu_slot_identity again = {.pid = dead_pid()};
  int i_again = vgpu_region_claim_slot(&m, &again);
  EXPECT(i_again < n);
  vgpu_region_unlock(&m);
  vgpu_region_close(&m);
}

/* HAMi-core's exit handler sets a slot's pid and status to 0 but leaves its counters (seen in
 * testdata/hami-core/after-exit), and a HAMi reader attached to our region leaves such a slot too.
 * Those bytes must not count as usage, and the slot must be reused with clean counters. */
static void foreignLeftoverSlot_notCounted_reusedClean(void) {
  struct vgpu_region_map m;
  open_fresh(&m, "leftover.cache");
  vgpu_region_lock(&m);
  uint64_t my_start = 0;
  EXPECT(vgpu_proc_stat(getpid(), &my_start) == 1);
  struct vgpu_slot_identity gone = {.pid = dead_pid()};
  struct vgpu_slot_identity me = {.pid = getpid(), .start_time_ticks = my_start};
  int i_left = vgpu_region_claim_slot(&m, &gone);
  int i_me = vgpu_region_claim_slot(&m, &me);
  vgpu_slot_add(&m, i_left, 0, VGPU_MEM_DATA, 64u << 20);
  vgpu_slot_add(&m, i_me, 0, VGPU_MEM_DATA, 1u << 20);
  /* What HAMi-core's exit leaves: identity cleared, counters and proc_num untouched. */
  __atomic_store_n(&m.r->procs[i_left].pid, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&m.r->procs[i_left].status, 0, __ATOMIC_RELEASE);
  EXPECT_EQ_U(m.r->proc_num, 2);
  EXPECT_EQ_U(vgpu_region_used(&m, 0), 1u << 20);
  struct vgpu_slot_identity next = {.pid = dead_pid()};
  int i_next = vgpu_region_claim_slot(&m, &next);
  EXPECT_EQ_U(i_next, i_left);
  EXPECT_EQ_U(vgpu_slot_total(&m, i_next, 0), 0);
  EXPECT_EQ_U(vgpu_region_used(&m, 0), 1u << 20);
  vgpu_region_unlock(&m);
  vgpu_region_close(&m);
}

static void claim_fullTable_reportsFull(void) {
  struct vgpu_region_map m;
  open_fresh(&m, "full.cache");
  vgpu_region_lock(&m);
  int ok = 0;
  for (int i = 0; i < VGPU_MAX_PROCS; i++) {
    struct vgpu_slot_identity id = {.pid = 4000000 + i}; /* dead pids, fresh heartbeats: kept */
    int idx = vgpu_region_claim_slot(&m, &id);
    ok += idx == i;
    /* Heartbeats from the future: stay "fresh" however long this loop of sweeps takes. */
    if (idx >= 0) m.ext->slots[idx].heartbeat_ns = vgpu_now_realtime_ns() + 3600000000000ull;
  }
  EXPECT_EQ_U(ok, VGPU_MAX_PROCS);
  struct vgpu_slot_identity one_more = {.pid = 5000000};
  EXPECT(vgpu_region_claim_slot(&m, &one_more) == -1);
  EXPECT_EQ_U(m.r->proc_num, VGPU_MAX_PROCS);
  vgpu_region_unlock(&m);
  vgpu_region_close(&m);
}

int main(int argc, char **argv) {
  if (!mkdtemp(g_dir)) return 1;
  static const struct unit_case cases[] = {
      CASE(lock_holderKilled_nextLockerProceeds), CASE(reserveLock_holderKilled_nextLockerProceeds),
      CASE(seqlock_readers_neverSeeTornSlot),
      CASE(sweep_freesDead_keepsLiveAndFresh), CASE(foreignLeftoverSlot_notCounted_reusedClean),
      CASE(claim_fullTable_reportsFull)};
  int rc = unit_run("region_lock", cases, sizeof cases / sizeof cases[0], argc, argv);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd) != 0) rc = 1;
  return rc;
}

/*
 * cases_procs.c — libvgpu under LD_PRELOAD with many threads and processes against the fake driver:
 * concurrent allocation, processes sharing one region, fork, SIGKILLed slot-lock holders, the
 * memory of dead processes, and a slot freed under a live process. `cases_procs <name>`; exit 0 =
 * pass (test/run_preload.sh runs it like cases.c; cases.h).
 */
#include "cases.h"

/* Many threads allocating and freeing: never above the limit, back to 0 at the end. */
static void *worker(void *arg) {
  CUcontext ctx = arg;
  cuCtxSetCurrent(ctx);
  unsigned seed = (unsigned)(uintptr_t)&ctx;
  CUdeviceptr held[8] = {0};
  for (int i = 0; i < 3000; i++) {
    int k = rand_r(&seed) % 8;
    if (held[k]) {
      CHECK(cuMemFree(held[k]) == CUDA_SUCCESS);
      held[k] = 0;
    } else {
      size_t sz = (size_t)(1 + rand_r(&seed) % 4) * MiB;
      CUresult rc = cuMemAlloc(&held[k], sz);
      CHECK(rc == CUDA_SUCCESS || rc == CUDA_ERROR_OUT_OF_MEMORY);
      if (rc != CUDA_SUCCESS) held[k] = 0;
    }
  }
  for (int k = 0; k < 8; k++)
    if (held[k]) CHECK(cuMemFree(held[k]) == CUDA_SUCCESS);
  return NULL;
}
static int case_threads(void) {
  CUcontext ctx = setup(0);
  CUdeviceptr warm;
  CHECK(cuMemAlloc(&warm, 1) == CUDA_SUCCESS); /* registers before the sampler starts */
  CHECK(cuMemFree(warm) == CUDA_SUCCESS);
  pthread_t t[8];
  struct test_sampler smp;
  CHECK(test_sampler_start(&smp, 64 * MiB) == 0);
  for (int i = 0; i < 8; i++) CHECK(pthread_create(&t[i], NULL, worker, ctx) == 0);
  for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
  CHECK_EQ_U(test_sampler_stop(&smp), 0); /* 0 = the sampler never saw usage above 64 MiB */
  CHECK_EQ_U(test_used(0), 0);
  return 0;
}

/* Several processes race for one container limit: together they get exactly floor(limit/chunk). */
static int case_processes(void) {
  enum { N = 4 };
  int fds[N][2];
  pid_t kids[N];
  int go[2], hold[2]; /* start together; stay alive until the parent has looked */
  CHECK(pipe(go) == 0 && pipe(hold) == 0);
  for (int i = 0; i < N; i++) {
    CHECK(pipe(fds[i]) == 0);
    kids[i] = fork();
    if (kids[i] == 0) {
      setup(0);
      char c;
      CHECK(read(go[0], &c, 1) == 1);
      int got = 0;
      CUdeviceptr p;
      while (cuMemAlloc(&p, 6 * MiB) == CUDA_SUCCESS) got++; /* whole 2 MiB pages */
      CHECK(write(fds[i][1], &got, sizeof got) == (ssize_t)sizeof got);
      CHECK(read(hold[0], &c, 1) == 1);
      exit(0);
    }
  }
  CHECK(write(go[1], "xxxx", N) == N);
  int total = 0;
  for (int i = 0; i < N; i++) {
    int got = 0;
    CHECK(read(fds[i][0], &got, sizeof got) == (ssize_t)sizeof got);
    total += got;
  }
  CHECK_EQ_U(total, 64 / 6); /* 10 chunks of 6 MiB fit in 64 MiB, the 11th never */
  CHECK_EQ_U(test_used(0), 10 * 6 * MiB);
  CHECK(write(hold[1], "xxxx", N) == N);
  for (int i = 0; i < N; i++) {
    int st;
    CHECK(waitpid(kids[i], &st, 0) == kids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  CHECK_EQ_U(test_used(0), 0); /* clean exits free their slots */
  return 0;
}

/* fork: the child is its own process in the region; the parent's count is untouched. */
static int case_fork(void) { /* LIBVGPU_CONTEXT_SIZE=8m: each process's context counts 8 MiB */
  setup(0);
  CUdeviceptr a;
  CHECK(cuMemAlloc(&a, 16 * MiB) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 24 * MiB);
  pid_t pid = fork();
  if (pid == 0) {
    setup(0);
    CUdeviceptr b;
    CHECK_EQ_U(test_my_used(0, 2), 0);  /* the parent's allocations are not the child's */
    CHECK_EQ_U(test_my_used(0, 0), 8 * MiB); /* its own primary context counts again */
    CHECK(cuMemAlloc(&b, 8 * MiB) == CUDA_SUCCESS);
    CHECK_EQ_U(test_my_used(0, 2), 8 * MiB);
    CHECK_EQ_U(test_used(0), 40 * MiB);
    CHECK(cuMemAlloc(&b, 32 * MiB) == CUDA_ERROR_OUT_OF_MEMORY); /* the parent's 24 count */
    exit(0); /* a clean exit frees the slot at once (an _exit is covered by dead_memory) */
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_EQ_U(test_used(0), 24 * MiB);
  CHECK_EQ_U(test_my_used(0, 2), 16 * MiB);
  CHECK(cuMemFree(a) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 8 * MiB);
  return 0;
}

/* SIGKILL at random points, hundreds of times: nobody deadlocks (alarm), and the dead processes'
 * memory leaves the count (dead slots freed by the next allocation that needs room or the
 * liveness sweep). */
static int case_sigkill(void) {
  int iterations = getenv("SIGKILL_ITERATIONS") ? atoi(getenv("SIGKILL_ITERATIONS")) : 300;
  setup(0);
  alarm(120);
  unsigned seed = (unsigned)getpid();
  for (int it = 0; it < iterations; it++) {
    pid_t pid = fork();
    if (pid == 0) {
      setup(0);
      CUdeviceptr p[4] = {0};
      for (unsigned i = 0;; i++) { /* allocate and free until killed */
        int k = (int)(i % 4);
        if (p[k]) {
          cuMemFree(p[k]);
          p[k] = 0;
        } else if (cuMemAlloc(&p[k], 2 * MiB) != CUDA_SUCCESS) {
          p[k] = 0;
        }
      }
    }
    struct timespec ts = {0, (long)(rand_r(&seed) % 3000) * 1000};
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
  }
  /* Everything the dead left behind must be reclaimable: the whole limit, within 2 s. */
  double t0 = now_s();
  CUdeviceptr all;
  CUresult rc = cuMemAlloc(&all, 64 * MiB);
  double waited = now_s() - t0;
  fprintf(stderr, "sigkill: %d kills, full-limit allocation after %.3f s\n", iterations, waited);
  CHECK(rc == CUDA_SUCCESS);
  CHECK(waited < 2.0);
  CHECK_EQ_U(test_used(0), 64 * MiB);
  const vgpu_region_t *r = test_region();
  int live = 0;
  for (int i = 0; i < r->proc_num; i++) {
    if (r->procs[i].status == 0) continue;
    live++;
    /* Only a child killed before its first allocation (in setup, which ASan makes slow) may
     * still hold a slot: gone from /proc but with a heartbeat under a second old it could be a
     * live process of another pid namespace, so it is kept until the heartbeat goes stale. It
     * holds nothing. */
    if (r->procs[i].pid != getpid()) CHECK_EQ_U(r->procs[i].used[0].total, 0);
  }
  if (live != 1) {
    /* Past the heartbeat's staleness, the next process to claim a slot sweeps it away. */
    fprintf(stderr, "sigkill: %d empty slot(s) of killed children kept while their heartbeat is fresh\n",
            live - 1);
    nanosleep(&(struct timespec){1, 200 * 1000 * 1000}, NULL);
    pid_t pid = fork();
    if (pid == 0) {
      setup(0);
      exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    live = 0;
    for (int i = 0; i < r->proc_num; i++) live += r->procs[i].status != 0;
  }
  if (live != 1 || r->proc_num > 2) {
    for (int i = 0; i < r->proc_num; i++)
      fprintf(stderr, "slot %d pid %d status %d total %llu\n", i, r->procs[i].pid, r->procs[i].status,
              (unsigned long long)r->procs[i].used[0].total);
  }
  CHECK(live == 1); /* dead slots were freed, not leaked */
  return 0;
}

/* A process holding memory is SIGKILLed; another one gets the memory within 2 s. */
static int case_dead_memory(void) {
  setup(0);
  int p[2];
  CHECK(pipe(p) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    setup(0);
    CUdeviceptr a;
    CHECK(cuMemAlloc(&a, 48 * MiB) == CUDA_SUCCESS);
    CHECK(write(p[1], "x", 1) == 1);
    pause();
    _exit(0);
  }
  char c;
  CHECK(read(p[0], &c, 1) == 1);
  CUdeviceptr b;
  CHECK(cuMemAlloc(&b, 32 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  double t0 = now_s();
  CHECK(cuMemAlloc(&b, 32 * MiB) == CUDA_SUCCESS);
  CHECK(now_s() - t0 < 2.0);
  CHECK_EQ_U(test_used(0), 32 * MiB);
  return 0;
}

/* Another process freed our slot (it judged us dead, e.g. from another pid namespace while we
 * were stopped): we register again instead of writing into what may be someone else's slot. */
static int case_slot_lost(void) {
  setup(0);
  CUdeviceptr a, b;
  CHECK(cuMemAlloc(&a, 8 * MiB) == CUDA_SUCCESS);
  int fd = open(getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE"), O_RDWR);
  vgpu_region_t *r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(r != MAP_FAILED);
  int mine = -1;
  for (int i = 0; i < r->proc_num; i++)
    if (r->procs[i].pid == getpid()) mine = i;
  CHECK(mine >= 0);
  __atomic_store_n(&r->procs[mine].status, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&r->procs[mine].pid, 0, __ATOMIC_RELEASE);
  memset(r->procs[mine].used, 0, sizeof r->procs[mine].used);
  CHECK(cuMemAlloc(&b, 4 * MiB) == CUDA_SUCCESS);
  /* A fresh slot holding everything the process still holds: nothing it allocated before the
   * loss escapes the count. */
  CHECK_EQ_U(test_used(0), 12 * MiB);
  CHECK(cuMemFree(a) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 4 * MiB);
  CHECK(cuMemFree(b) == CUDA_SUCCESS);
  CHECK_EQ_U(test_used(0), 0);
  return 0;
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      {"threads", case_threads},
      {"processes", case_processes},
      {"fork", case_fork},
      {"sigkill", case_sigkill},
      {"dead_memory", case_dead_memory},
      {"slot_lost", case_slot_lost},
  };
  return run_case(argc, argv, cases, sizeof cases / sizeof cases[0]);
}

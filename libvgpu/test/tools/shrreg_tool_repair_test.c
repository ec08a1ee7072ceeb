/*
 * shrreg_tool_repair_test.c — shrreg-tool's repairs against real processes: --cleanup (dead,
 * zombie, pid-reused and live slots, --pids verdicts), --force-unlock (live, killed and lost
 * holders) and a region written by libvgpu itself, SIGKILLed and cleaned up. Part of the CLI test
 * (shrreg_tool_test.c runs these; the kit is shrreg_tool_test_kit.c).
 */
#include "shrreg_tool_test.h"

void test_cleanup(void) {
  static const fx_layout_t layouts[] = {FX_V1_1, FX_V1_2, FX_V1_2_EXT};
  size_t li;
  for (li = 0; li < 3; li++) {
    run_t r;
    char want[128];
    const char *p = fx_path("cleanup.cache");
    pid_t live = spawn_sleeper();
    pid_t live2 = spawn_sleeper();
    pid_t reused = spawn_sleeper();
    pid_t gone = dead_pid();
    pid_t zombie = zombie_pid();
    fx_spec_t s = base_spec(layouts[li]);
    s.nslots = 5;
    s.slots[0] = (fx_slot_t){gone, 0, 1, {100ull << 20, 0}, {0, 0}, 0, 0};
    s.slots[1] = (fx_slot_t){live, 0, 1, {200ull << 20, 0}, {0, 0}, start_ticks_of(live), 0};
    s.slots[2] = (fx_slot_t){zombie, 0, 1, {300ull << 20, 0}, {0, 0}, 0, 0};
    /* Pid reuse is visible only through the extension's recorded start time. */
    s.slots[3] = (fx_slot_t){reused, 0, 1, {400ull << 20, 0}, {0, 0}, start_ticks_of(reused) + 7, 0};
    s.slots[4] = (fx_slot_t){live2, 0, 2, {0, 500ull << 20}, {0, 0}, 0, 0};
    CHECK(fx_write(p, &s) == 0, "fixture");
    RUN(&r, "--cleanup", "--file", p);
    CHECK(r.rc == 0, "cleanup rc=%d err=%s", r.rc, r.err);
    snprintf(want, sizeof want, "dropped slot 0: pid %d (host pid 0) gone, held 100 MB", gone);
    CHECK(contains(r.out, want), "gone dropped: %s", r.out);
    snprintf(want, sizeof want, "pid %d (host pid 0) zombie", zombie);
    CHECK(contains(r.out, want), "zombie dropped: %s", r.out);
    snprintf(want, sizeof want, "pid %d (host pid 0) pid-reused", reused);
    CHECK(contains(r.out, want) == (layouts[li] == FX_V1_2_EXT), "reuse detected only with extension: %s", r.out);
    RUN(&r, "--json", "--file", p);
    {
      char expr[160];
      if (layouts[li] == FX_V1_2_EXT)
        snprintf(expr, sizeof expr, "sorted(p['pid'] for p in d['processes']) == sorted([%d, %d])", live, live2);
      else
        snprintf(expr, sizeof expr, "sorted(p['pid'] for p in d['processes']) == sorted([%d, %d, %d])", live, live2, reused);
      CHECK(strcmp(jq(r.out, expr), "True") == 0, "survivors: %s", jq(r.out, "[p['pid'] for p in d['processes']]"));
    }
    /* Slots are freed in place (never moved); the live slot 4 keeps the table at 5 entries. */
    CHECK(strcmp(jq(r.out, "d['proc_num']"), "5") == 0, "proc_num %s", jq(r.out, "d['proc_num']"));
    CHECK(strcmp(jq(r.out, "[p['slot'] for p in d['processes']]"), layouts[li] == FX_V1_2_EXT ? "[1, 4]" : "[1, 3, 4]") == 0,
          "survivors stay in their slots: %s", jq(r.out, "[p['slot'] for p in d['processes']]"));
    CHECK(strcmp(jq(r.out, "d['lock']['state'] + str(d['lock']['semaphore_value'])"), "unlocked1") == 0, "lock released");
    if (layouts[li] == FX_V1_2_EXT) {
      CHECK(strcmp(jq(r.out, "d['extension']['generation']"), "2") == 0, "generation bumped twice");
      CHECK(strcmp(jq(r.out, "[p['start_time_ticks'] > 0 for p in d['processes']]"), "[True, False]") == 0,
            "extension slots stay with their slots: %s", jq(r.out, "d['processes']"));
    }
    /* Survivors keep their own usage after being moved. */
    {
      char expr[256];
      snprintf(expr, sizeof expr, "[p['devices'][1]['used_bytes'] for p in d['processes'] if p['pid']==%d]", live2);
      CHECK(strcmp(jq(r.out, expr), "[524288000]") == 0, "moved slot keeps usage: %s", jq(r.out, expr));
    }
    /* Running cleanup again finds nothing. */
    RUN(&r, "--cleanup", "--json", "--file", p);
    CHECK(r.rc == 0 && strcmp(jq(r.out, "len(d['dropped'])"), "0") == 0, "idempotent: %s", r.out);
    reap(live);
    reap(live2);
    reap(reused);
    reap(zombie);
  }
  {
    /* --device limits cleanup to slots using that device. */
    run_t r;
    const char *p = fx_path("cleanup-dev.cache");
    pid_t g1 = dead_pid();
    pid_t g2 = dead_pid();
    fx_spec_t s = base_spec(FX_V1_2);
    char expr[128];
    s.nslots = 2;
    s.slots[0] = (fx_slot_t){g1, 0, 1, {100ull << 20, 0}, {0, 0}, 0, 0};
    s.slots[1] = (fx_slot_t){g2, 0, 1, {0, 100ull << 20}, {0, 0}, 0, 0};
    CHECK(fx_write(p, &s) == 0, "fixture");
    RUN(&r, "--cleanup", "--device", "1", "--json", "--file", p);
    snprintf(expr, sizeof expr, "[x['pid'] for x in d['dropped']] == [%d] and d['proc_num'] == 1", g2);
    CHECK(r.rc == 0 && strcmp(jq(r.out, expr), "True") == 0, "device filter: %s", r.out);
  }
  {
    /* --host: liveness from the recorded host pid (slot pid is a container pid that means nothing here). */
    run_t r;
    const char *p = fx_path("cleanup-host.cache");
    pid_t live = spawn_sleeper();
    pid_t gone = dead_pid();
    fx_spec_t s = base_spec(FX_V1_2);
    s.nslots = 2;
    s.slots[0] = (fx_slot_t){7, live, 1, {100ull << 20, 0}, {0, 0}, 0, 0};
    s.slots[1] = (fx_slot_t){8, gone, 1, {100ull << 20, 0}, {0, 0}, 0, 0};
    CHECK(fx_write(p, &s) == 0, "fixture");
    RUN(&r, "--cleanup", "--host", "--json", "--file", p);
    CHECK(r.rc == 0 && strcmp(jq(r.out, "[x['pid'] for x in d['dropped']]"), "[8]") == 0, "host mode: %s", r.out);
    reap(live);
  }
  {
    /* --pids: the node-side caller judged liveness; exactly those slots go, nothing else. */
    run_t r;
    const char *p = fx_path("cleanup-pids.cache");
    fx_spec_t s = base_spec(FX_V1_2);
    s.nslots = 3;
    s.slots[0] = (fx_slot_t){11, 0, 1, {100ull << 20, 0}, {0, 0}, 0, 0};
    s.slots[1] = (fx_slot_t){12, 0, 1, {100ull << 20, 0}, {0, 0}, 0, 0};
    s.slots[2] = (fx_slot_t){13, 0, 1, {100ull << 20, 0}, {0, 0}, 0, 0};
    CHECK(fx_write(p, &s) == 0, "fixture");
    RUN(&r, "--cleanup", "--pids", "11,13,99", "--json", "--file", p);
    CHECK(r.rc == 0 && strcmp(jq(r.out, "sorted(x['pid'] for x in d['dropped'])"), "[11, 13]") == 0, "--pids: %s %s", r.out, r.err);
    RUN(&r, "--json", "--file", p);
    CHECK(strcmp(jq(r.out, "[x['pid'] for x in d['processes']]"), "[12]") == 0, "--pids survivors: %s", jq(r.out, "d['processes']"));
    /* A slot that changed since the caller judged it is kept. */
    s.nslots = 2;
    s.slots[0] = (fx_slot_t){21, 2021, 1, {100ull << 20, 0}, {0, 0}, 0, 0};
    s.slots[1] = (fx_slot_t){22, 2022, 1, {100ull << 20, 0}, {0, 0}, 0, 0};
    CHECK(fx_write(p, &s) == 0, "fixture");
    RUN(&r, "--cleanup", "--pids", "21:9999,22:2022", "--json", "--file", p);
    CHECK(r.rc == 0 && strcmp(jq(r.out, "[x['pid'] for x in d['dropped']]"), "[22]") == 0, "--pids with host pid guard: %s %s", r.out, r.err);
    RUN(&r, "--cleanup", "--pids", "21:2021:5", "--file", p);
    CHECK(r.rc == 0, "--pids with start ticks on a region without extension: rc=%d", r.rc);
    RUN(&r, "--json", "--file", p);
    CHECK(strcmp(jq(r.out, "len(d['processes'])"), "0") == 0, "start ticks ignored without extension: %s", jq(r.out, "d['processes']"));
    {
      fx_spec_t e = base_spec(FX_V1_2_EXT);
      e.nslots = 2;
      e.slots[0] = (fx_slot_t){31, 2031, 1, {100ull << 20, 0}, {0, 0}, 777, 0};
      e.slots[1] = (fx_slot_t){32, 2032, 1, {100ull << 20, 0}, {0, 0}, 888, 0};
      CHECK(fx_write(p, &e) == 0, "fixture");
      RUN(&r, "--cleanup", "--pids", "31:2031:776,32:2032:888", "--json", "--file", p);
      CHECK(r.rc == 0 && strcmp(jq(r.out, "[x['pid'] for x in d['dropped']]"), "[32]") == 0, "--pids start-ticks guard: %s %s", r.out, r.err);
    }
    RUN(&r, "--cleanup", "--pids", "5:x", "--file", p);
    CHECK(r.rc == 2, "--pids bad host pid: rc=%d", r.rc);
    RUN(&r, "--cleanup", "--pids", "1,x", "--file", p);
    CHECK(r.rc == 2, "--pids garbage: rc=%d", r.rc);
    RUN(&r, "--inspect", "--pids", "1", "--file", p);
    CHECK(r.rc == 2, "--pids with inspect: rc=%d", r.rc);
  }
}

/* A child that takes the region semaphore the HAMi way (sem_wait, owner_pid = self) and then
 * either keeps it (alive) or exits without posting (killed holder). */
static pid_t hold_lock(const char *path, size_t sem_off, size_t owner_off, int then_exit) {
  int ready[2];
  char c;
  pid_t p;
  CHECK(pipe(ready) == 0, "pipe");
  p = fork();
  if (p == 0) {
    uint8_t *b;
    size_t sz;
    map_region(path, &b, &sz);
    sem_wait((sem_t *)(b + sem_off));
    __atomic_store_n((uint64_t *)(b + owner_off), (uint64_t)getpid(), __ATOMIC_RELEASE);
    if (write(ready[1], "x", 1) != 1) _exit(2);
    if (then_exit) _exit(0);
    for (;;) pause();
  }
  close(ready[1]);
  if (read(ready[0], &c, 1) != 1) CHECK(0, "holder did not start");
  close(ready[0]);
  if (then_exit) waitpid(p, NULL, 0);
  return p;
}

void test_force_unlock(void) {
  const size_t sem_off = offsetof(vgpu_region_t, sem);
  const size_t owner_off = offsetof(vgpu_region_t, owner_pid);
  run_t r;
  char want[160];
  const char *p = fx_path("lock.cache");
  fx_spec_t s = base_spec(FX_V1_2);
  pid_t holder;

  CHECK(fx_write(p, &s) == 0, "fixture");
  RUN(&r, "--force-unlock", "--file", p);
  CHECK(r.rc == 0 && contains(r.out, "nothing to unlock"), "free lock: rc=%d out=%s", r.rc, r.out);

  /* Live holder: refused, semaphore untouched. */
  holder = hold_lock(p, sem_off, owner_off, 0);
  RUN(&r, "--inspect", "--file", p);
  snprintf(want, sizeof want, "Lock Holder:     %d\n", holder);
  CHECK(contains(r.out, "Lock Status:     LOCKED\n") && contains(r.out, want), "inspect shows holder: %s", r.out);
  RUN(&r, "--force-unlock", "--device", "0", "--file", p);
  snprintf(want, sizeof want, "lock holder pid %d is alive", holder);
  CHECK(r.rc == 7 && contains(r.err, want), "live holder refused: rc=%d err=%s", r.rc, r.err);
  CHECK(sem_value_of(p, sem_off) == 0, "semaphore still held");
  RUN(&r, "--cleanup", "--lock-timeout-ms", "300", "--file", p);
  CHECK(r.rc == 8 && contains(r.err, "try again later"), "cleanup waits then gives up: rc=%d err=%s", r.rc, r.err);
  reap(holder);

  /* The holder is now gone (SIGKILLed while holding): unlock succeeds, cleanup works after. */
  RUN(&r, "--inspect", "--file", p);
  CHECK(contains(r.out, "LOCKED (holder gone)") && contains(r.out, "Lock Holder State: zombie") == 0, "stale: %s", r.out);
  RUN(&r, "--cleanup", "--lock-timeout-ms", "200", "--file", p);
  CHECK(r.rc == 8 && contains(r.err, "run --force-unlock first"), "cleanup hints at unlock: %s", r.err);
  RUN(&r, "--force-unlock", "--file", p);
  CHECK(r.rc == 0 && contains(r.out, "released the lock of a holder that is gone"), "dead holder: rc=%d out=%s err=%s", r.rc, r.out, r.err);
  CHECK(sem_value_of(p, sem_off) == 1, "semaphore back to 1: %d", sem_value_of(p, sem_off));
  RUN(&r, "--force-unlock", "--file", p);
  CHECK(r.rc == 0 && contains(r.out, "nothing to unlock"), "second unlock is a no-op (never posts twice)");
  CHECK(sem_value_of(p, sem_off) == 1, "semaphore still 1");
  RUN(&r, "--cleanup", "--file", p);
  CHECK(r.rc == 0, "cleanup after recovery: rc=%d", r.rc);

  /* Holder exited without posting (owner_pid left behind): same recovery. */
  holder = hold_lock(p, sem_off, owner_off, 1);
  RUN(&r, "--force-unlock", "--json", "--file", p);
  snprintf(want, sizeof want, "holder_gone %d", holder);
  CHECK(r.rc == 0 && strcmp(jq(r.out, "'%s %s' % (d['previous_state'], d['previous_holder_pid'])"), want) == 0, "json unlock: %s", r.out);

  /* --holder: release only the holder the caller judged dead; a different recorded holder is refused. */
  holder = hold_lock(p, sem_off, owner_off, 0);
  snprintf(want, sizeof want, "%d", holder + 1);
  RUN(&r, "--force-unlock", "--holder", want, "--file", p);
  CHECK(r.rc == 7 && contains(r.err, "recorded as held by pid"), "--holder mismatch refused: rc=%d err=%s", r.rc, r.err);
  CHECK(sem_value_of(p, sem_off) == 0, "still held after mismatch");
  snprintf(want, sizeof want, "%d", holder);
  RUN(&r, "--force-unlock", "--holder", want, "--file", p);
  CHECK(r.rc == 0 && sem_value_of(p, sem_off) == 1, "--holder match released: rc=%d err=%s", r.rc, r.err);
  reap(holder);
  RUN(&r, "--force-unlock", "--holder", want, "--file", p);
  CHECK(r.rc == 1 && contains(r.err, "no holder is recorded"), "--holder when free: rc=%d", r.rc);

  /* Lost post (HAMi #2500): down, nobody recorded. Watched, then released. */
  s.sem_value = 0;
  CHECK(fx_write(p, &s) == 0, "fixture");
  RUN(&r, "--inspect", "--file", p);
  CHECK(contains(r.out, "LOCKED (no holder recorded)"), "lost: %s", r.out);
  RUN(&r, "--force-unlock", "--observe-ms", "200", "--file", p);
  CHECK(r.rc == 0 && contains(r.out, "lost post"), "lost post released: rc=%d out=%s", r.rc, r.out);
  CHECK(sem_value_of(p, sem_off) == 1, "semaphore 1 after lost post");

  /* libvgpu regions: the kernel record lock is the truth, the extension record says who. */
  {
    fx_spec_t e = base_spec(FX_V1_2_EXT);
    int ready[2];
    char c;
    pid_t reused = spawn_sleeper();
    CHECK(fx_write(p, &e) == 0, "fixture");
    CHECK(pipe(ready) == 0, "pipe");
    holder = fork();
    if (holder == 0) {
      uint8_t *b;
      size_t sz;
      int fd;
      struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0x40000100LL, .l_len = 1};
      vgpu_region_ext_t *x;
      /* Map first: closing any fd of the file drops this process's record locks. */
      map_region(p, &b, &sz);
      fd = open(p, O_RDWR);
      if (fcntl(fd, F_SETLK, &fl) != 0) _exit(3);
      x = (vgpu_region_ext_t *)(b + VGPU_EXT_OFFSET);
      x->lock_holder_since_ns = (uint64_t)time(NULL) * 1000000000ull - 90ull * 1000000000ull;
      __atomic_store_n(&x->lock_holder_pid, getpid(), __ATOMIC_RELEASE);
      if (write(ready[1], "x", 1) != 1) _exit(2);
      for (;;) pause();
    }
    close(ready[1]);
    CHECK(read(ready[0], &c, 1) == 1, "record-lock holder started");
    close(ready[0]);
    RUN(&r, "--inspect", "--json", "--file", p);
    snprintf(want, sizeof want, "locked %d extension alive True %d", holder, holder);
    CHECK(strcmp(jq(r.out, "'%s %s %s %s %s %s' % (d['lock']['state'], d['lock']['holder_pid'], d['lock']['holder_source'], "
                           "d['lock']['holder_liveness'], d['lock']['held_ms'] >= 89000, d['lock']['record_lock_pid'])"), want) == 0,
          "record lock json: %s", r.out);
    RUN(&r, "--force-unlock", "--file", p);
    CHECK(r.rc == 7 && contains(r.err, "is alive (held 9"), "record-lock holder refused: rc=%d %s", r.rc, r.err);
    RUN(&r, "--cleanup", "--lock-timeout-ms", "200", "--file", p);
    CHECK(r.rc == 8, "cleanup waits for the record lock: rc=%d %s", r.rc, r.err);
    reap(holder);
    /* The kernel released the lock; the record is stale even though its pid now names a live process. */
    {
      uint8_t *b;
      size_t sz;
      map_region(p, &b, &sz);
      ((vgpu_region_ext_t *)(b + VGPU_EXT_OFFSET))->lock_holder_pid = reused;
      munmap(b, sz);
    }
    RUN(&r, "--inspect", "--file", p);
    CHECK(contains(r.out, "LOCKED (holder gone)"), "stale record with a reused pid: %s", r.out);
    RUN(&r, "--force-unlock", "--file", p);
    CHECK(r.rc == 0 && contains(r.out, "released the lock of a holder that is gone"), "stale record cleared: rc=%d %s", r.rc, r.err);
    RUN(&r, "--inspect", "--json", "--file", p);
    CHECK(strcmp(jq(r.out, "'%s %s' % (d['lock']['state'], d['lock']['holder_pid'])"), "unlocked None") == 0, "after: %s", jq(r.out, "d['lock']"));
    RUN(&r, "--cleanup", "--file", p);
    CHECK(r.rc == 0, "cleanup takes and releases the record lock: rc=%d %s", r.rc, r.err);
    RUN(&r, "--inspect", "--json", "--file", p);
    CHECK(strcmp(jq(r.out, "'%s %s' % (d['lock']['state'], d['lock']['semaphore_value'])"), "unlocked 1") == 0, "lock free after cleanup: %s", jq(r.out, "d['lock']"));
    reap(reused);
  }
}

/*
 * A region written by libvgpu itself (when build/libvgpu.so, the fake libcuda and region_app are
 * built): a live process is shown with its usage, then SIGKILLed and cleaned up.
 */
static uint64_t now_realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Writes the extension heartbeat of the slot holding `pid` (libvgpu's layout, vgpu_region.h). */
static int set_heartbeat(const char *path, int pid, uint64_t ns) {
  int fd = open(path, O_RDWR | O_NOFOLLOW);
  if (fd < 0) return 0;
  size_t len = VGPU_REGION_FILE_SIZE;
  uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return 0;
  vgpu_region_t *r = (vgpu_region_t *)m;
  vgpu_region_ext_t *e = (vgpu_region_ext_t *)(m + VGPU_EXT_OFFSET);
  int found = 0;
  for (int i = 0; i < VGPU_MAX_PROCS; i++) {
    if (__atomic_load_n(&r->procs[i].pid, __ATOMIC_ACQUIRE) == pid) {
      __atomic_store_n(&e->slots[i].heartbeat_ns, ns, __ATOMIC_RELEASE);
      found = 1;
    }
  }
  munmap(m, len);
  return found;
}

void test_libvgpu_written(const char *build) {
  char lib[512], app[512], fake[512], line[128];
  run_t r;
  const char *p = fx_path("libvgpu-real.cache");
  int to_child[2], from_child[2];
  pid_t app_pid;
  FILE *f;
  int child_pid = 0;
  snprintf(lib, sizeof lib, "%s/libvgpu.so", build);
  snprintf(app, sizeof app, "%s/tools-test/region_app", build);
  snprintf(fake, sizeof fake, "%s/fake", build);
  if (access(lib, R_OK) != 0 || access(app, X_OK) != 0) {
    CHECK(0, "%s or %s not built: the libvgpu-written region cannot be checked", lib, app);
    return;
  }
  unlink(p);
  CHECK(pipe(to_child) == 0 && pipe(from_child) == 0, "pipes");
  app_pid = fork();
  if (app_pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    close(to_child[1]);
    close(from_child[0]);
    setenv("CUDA_DEVICE_MEMORY_SHARED_CACHE", p, 1);
    setenv("CUDA_DEVICE_MEMORY_LIMIT", "1g", 1);
    setenv("CUDA_DEVICE_SM_LIMIT", "40", 1);
    setenv("LD_LIBRARY_PATH", fake, 1);
    {
      /* A sanitizer build's libvgpu.so needs the sanitizer runtimes preloaded first. */
      const char *san = getenv("SANITIZER_PRELOAD");
      char preload[1024];
      snprintf(preload, sizeof preload, "%s%s%s", san && *san ? san : "", san && *san ? ":" : "", lib);
      setenv("LD_PRELOAD", preload, 1);
    }
    execl(app, app, "96", (char *)NULL);
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  f = fdopen(from_child[0], "r");
  if (f == NULL || fgets(line, sizeof line, f) == NULL || sscanf(line, "ready %d", &child_pid) != 1) {
    CHECK(0, "region_app did not start under libvgpu");
    kill(app_pid, SIGKILL);
    waitpid(app_pid, NULL, 0);
    return;
  }
  RUN(&r, "--json", "--file", p);
  {
    char expr[512], want[128];
    snprintf(expr, sizeof expr,
             "'%%s %%s %%s %%s %%s' %% (d['layout'], d['devices'][0]['memory_limit_bytes'], d['devices'][0]['sm_limit_percent'], "
             "[(x['pid'], x['liveness'], x['devices'][0]['used_bytes'] >= 96*2**20) for x in d['processes']], d['extension'] is not None)");
    snprintf(want, sizeof want, "v1.2 1073741824 40 [(%d, 'alive', True)] True", child_pid);
    CHECK(r.rc == 0 && strcmp(jq(r.out, expr), want) == 0, "libvgpu region: rc=%d %s / %s", r.rc, jq(r.out, expr), r.err);
  }
  RUN(&r, "--version", "--file", p);
  CHECK(r.rc == 0 && contains(r.out, "layout v1.2, version 1.2") && !contains(r.out, "no extension block"), "libvgpu version: %s", r.out);
  kill(app_pid, SIGKILL);
  waitpid(app_pid, NULL, 0);
  fclose(f);
  close(to_child[1]);
  RUN(&r, "--inspect", "--file", p);
  CHECK(r.rc == 0 && contains(r.out, "Alive: gone") && contains(r.out, "1 gone"), "killed app shows as gone: %s", r.out);
  /* Within a second of its last heartbeat libvgpu's rule keeps the slot (its owner may live in
   * another pid namespace); after that it goes. The heartbeat is set here, not left to timing,
   * so each side is checked exactly on a loaded machine too. */
  /* "Fresh" is set 5 s ahead: both rules count a heartbeat not older than 1 s (one ahead of the
   * reader's clock included) as fresh, and this way a slow start of the tool cannot age it. */
  CHECK(set_heartbeat(p, child_pid, now_realtime_ns() + 5000000000ull), "set a fresh heartbeat");
  RUN(&r, "--cleanup", "--json", "--file", p);
  CHECK(r.rc == 0 && strcmp(jq(r.out, "'%s %s' % (len(d['dropped']), d['kept_unjudgeable'])"), "0 1") == 0,
        "fresh heartbeat kept: %s", r.out);
  CHECK(set_heartbeat(p, child_pid, now_realtime_ns() - 2000000000ull), "set a stale heartbeat");
  RUN(&r, "--cleanup", "--json", "--file", p);
  {
    char want[64];
    snprintf(want, sizeof want, "[%d] 0", child_pid);
    CHECK(r.rc == 0 && strcmp(jq(r.out, "'%s %s' % ([x['pid'] for x in d['dropped']], d['kept_unjudgeable'])"), want) == 0,
          "stale heartbeat: cleanup drops the libvgpu slot: %s %s", r.out, r.err);
  }
  RUN(&r, "--json", "--file", p);
  CHECK(strcmp(jq(r.out, "'%s %s' % (len(d['processes']), d['devices'][0]['used_bytes'])"), "0 0") == 0, "after cleanup: %s", jq(r.out, "d['devices']"));
}

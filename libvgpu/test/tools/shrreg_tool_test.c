/*
 * shrreg_tool_test.c — runs the real shrreg-tool binary against fixture regions of every layout
 * and checks output and exit codes: every flag, every layout, errors, lock recovery with real
 * (live, exited, zombie, pid-reused) processes, and privilege drops for permission errors.
 *
 * This file: arguments, every layout, limits, permissions and hostile fields; the repairs are in
 * shrreg_tool_repair_test.c, the shared kit in shrreg_tool_test_kit.c (shrreg_tool_test.h).
 *
 * Run: libvgpu/test/tools/run.sh (builds the tool and this test; last line
 * "shrreg-tool: N passed, M failed"). Needs root for the permission tests (skipped otherwise)
 * and python3 for JSON checks.
 */
#include "shrreg_tool_test.h"

/* ---------------------------------------------------------------------------------------------- */

static void test_help_and_usage(void) {
  run_t r;
  RUN(&r, "--help");
  CHECK(r.rc == 0 && contains(r.out, "--force-unlock") && contains(r.out, "--set-mem-limit"), "help: rc=%d", r.rc);
  RUN(&r, "--bogus");
  CHECK(r.rc == 2 && contains(r.err, "unknown argument '--bogus'"), "unknown flag: rc=%d err=%s", r.rc, r.err);
  RUN(&r, "--set-sm-limit", "0", "101");
  CHECK(r.rc == 2 && contains(r.err, "percentage"), "pct>100: rc=%d", r.rc);
  RUN(&r, "--set-sm-limit", "x", "5");
  CHECK(r.rc == 2 && contains(r.err, "device 'x'"), "bad dev: rc=%d", r.rc);
  RUN(&r, "--set-sm-limit", "0");
  CHECK(r.rc == 2 && contains(r.err, "needs DEV"), "missing pct: rc=%d", r.rc);
  RUN(&r, "--set-mem-limit", "0", "12q");
  CHECK(r.rc == 2 && contains(r.err, "not a size"), "bad size: rc=%d", r.rc);
  RUN(&r, "--set-mem-limit", "0", "99999999999999999999g");
  CHECK(r.rc == 2, "overflowing size: rc=%d", r.rc);
  RUN(&r, "--set-mem-limit", "0", "-5");
  CHECK(r.rc == 2, "negative size: rc=%d", r.rc);
  RUN(&r, "--inspect", "--device", "16");
  CHECK(r.rc == 2, "device 16: rc=%d", r.rc);
  RUN(&r, "--inspect", "--cleanup");
  CHECK(r.rc == 2 && contains(r.err, "one command"), "two commands: rc=%d", r.rc);
  RUN(&r, "--version", "--device", "0");
  CHECK(r.rc == 2, "device with version: rc=%d", r.rc);
  RUN(&r, "--file");
  CHECK(r.rc == 2, "file without value: rc=%d", r.rc);
}

static void test_missing_file(void) {
  run_t r;
  const char *missing = fx_path("does-not-exist.cache");
  RUN(&r, "--inspect", "--file", missing);
  CHECK(r.rc == 3 && contains(r.err, "no such region file"), "missing: rc=%d err=%s", r.rc, r.err);
  {
    const char *const args[] = {"--inspect", NULL};
    run_as(&r, 0, missing, args);
    CHECK(r.rc == 3 && contains(r.err, missing), "missing via env: rc=%d err=%s", r.rc, r.err);
  }
  RUN(&r, "--cleanup", "--file", missing);
  CHECK(r.rc == 3, "cleanup missing: rc=%d", r.rc);
  RUN(&r, "--version", "--file", missing);
  CHECK(r.rc == 0 && contains(r.out, "shrreg-tool ") && contains(r.out, "not readable"), "version w/o file: rc=%d", r.rc);
}

/* The node-side caller judges a file on an O_NOFOLLOW fd and then hands shrreg-tool the path with
 * --expect-inode DEV:INO: a tenant that swaps the path for a symlink to (or a hard link of)
 * another container's region in between must change nothing there. */
static void test_expect_inode(void) {
  run_t r;
  struct stat st, vst;
  char expect[64], victim_copy[300];
  const char *p = fx_path("judged.cache");
  const char *victim = fx_path("victim.cache");
  fx_spec_t s = base_spec(FX_V1_2);
  CHECK(fx_write(p, &s) == 0 && fx_write(victim, &s) == 0, "fixtures");
  CHECK(stat(p, &st) == 0 && stat(victim, &vst) == 0, "stat");
  snprintf(expect, sizeof expect, "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
  RUN(&r, "--set-sm-limit", "0", "30", "--file", p, "--expect-inode", expect);
  CHECK(r.rc == 0 && contains(r.out, "-> 30%"), "expected inode accepted: rc=%d err=%s", r.rc, r.err);
  /* Swap: the judged path becomes a symlink to the victim's region. */
  CHECK(unlink(p) == 0 && symlink(victim, p) == 0, "swap to symlink");
  RUN(&r, "--set-sm-limit", "0", "5", "--file", p, "--expect-inode", expect);
  CHECK(r.rc == 10 && contains(r.err, "symbolic link"), "symlink swap refused: rc=%d err=%s", r.rc, r.err);
  RUN(&r, "--cleanup", "--file", p, "--expect-inode", expect);
  CHECK(r.rc == 10, "symlink swap refused for cleanup: rc=%d", r.rc);
  /* Swap: a hard link of the victim's region at the judged path (same content, other inode). */
  CHECK(unlink(p) == 0 && link(victim, p) == 0, "swap to hard link");
  RUN(&r, "--set-sm-limit", "0", "5", "--file", p, "--expect-inode", expect);
  CHECK(r.rc == 10 && contains(r.err, "2 link(s)"), "hard link refused: rc=%d err=%s", r.rc, r.err);
  /* Even the victim's own inode is refused while it has a second name. */
  snprintf(expect, sizeof expect, "%llu:%llu", (unsigned long long)vst.st_dev, (unsigned long long)vst.st_ino);
  RUN(&r, "--force-unlock", "--file", p, "--expect-inode", expect);
  CHECK(r.rc == 10, "multiply linked file refused: rc=%d", r.rc);
  RUN(&r, "--json", "--file", victim);
  CHECK(strcmp(jq(r.out, "d['devices'][0]['sm_limit_percent']"), "50") == 0, "victim untouched: %s", r.out);
  snprintf(victim_copy, sizeof victim_copy, "%s", p);
  RUN(&r, "--inspect", "--file", victim_copy, "--expect-inode", "12");
  CHECK(r.rc == 2 && contains(r.err, "DEV:INO"), "malformed expectation: rc=%d", r.rc);
  unlink(p);
}

/* HAMi-core's compaction moves procs[] but not our extension entries: an entry whose pid tag
 * names another process is stale and must not make a live process look like a reused pid. */
static void test_stale_extension_entry(void) {
  run_t r;
  char want[128];
  const char *p = fx_path("stale-ext.cache");
  pid_t moved = spawn_sleeper();
  pid_t reused = spawn_sleeper();
  fx_spec_t s = base_spec(FX_V1_2_EXT);
  s.nslots = 2;
  s.slots[0] = (fx_slot_t){moved, 0, 1, {100ull << 20, 0}, {0, 0}, start_ticks_of(moved) + 7, 424242};
  s.slots[1] = (fx_slot_t){reused, 0, 1, {200ull << 20, 0}, {0, 0}, start_ticks_of(reused) + 7, reused};
  CHECK(fx_write(p, &s) == 0, "fixture");
  RUN(&r, "--cleanup", "--file", p);
  CHECK(r.rc == 0, "cleanup rc=%d err=%s", r.rc, r.err);
  snprintf(want, sizeof want, "pid %d (host pid 0) pid-reused", moved);
  CHECK(!contains(r.out, want), "a stale extension entry does not drop a live process: %s", r.out);
  snprintf(want, sizeof want, "pid %d (host pid 0) pid-reused", reused);
  CHECK(contains(r.out, want), "a matching entry still detects pid reuse: %s", r.out);
  RUN(&r, "--json", "--file", p);
  {
    char expr[160];
    snprintf(expr, sizeof expr, "[p['pid'] for p in d['processes']] == [%d]", moved);
    CHECK(strcmp(jq(r.out, expr), "True") == 0, "survivor: %s", jq(r.out, "[p['pid'] for p in d['processes']]"));
  }
  reap(moved);
  reap(reused);
}

static void test_unknown_layouts(void) {
  run_t r;
  const char *p = fx_path("odd.cache");
  int fd;
  int32_t magic = VGPU_REGION_MAGIC;
  uint32_t v2 = 2;
  /* Right magic, size of no known layout. */
  fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
  CHECK(ftruncate(fd, 1500000) == 0, "truncate");
  CHECK(pwrite(fd, &magic, 4, 0) == 4, "magic");
  close(fd);
  RUN(&r, "--file", p);
  CHECK(r.rc == 5 && contains(r.err, "unknown region file size"), "odd size: rc=%d err=%s", r.rc, r.err);
  /* v1 size but major 2. */
  fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
  CHECK(ftruncate(fd, 2008953) == 0, "truncate");
  CHECK(pwrite(fd, &magic, 4, 0) == 4 && pwrite(fd, &v2, 4, 4) == 4, "magic");
  close(fd);
  RUN(&r, "--file", p);
  CHECK(r.rc == 5 && contains(r.err, "major"), "major 2: rc=%d err=%s", r.rc, r.err);
  /* No magic. */
  fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
  CHECK(ftruncate(fd, 2008953) == 0, "truncate");
  close(fd);
  RUN(&r, "--file", p, "--json");
  CHECK(r.rc == 5 && contains(r.err, "magic") && r.out[0] == '\0', "zeros: rc=%d", r.rc);
  /* Too small, directory, FIFO (must not hang). */
  fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
  CHECK(write(fd, "abc", 3) == 3, "write");
  close(fd);
  RUN(&r, "--file", p);
  CHECK(r.rc == 5 && contains(r.err, "too small"), "tiny: rc=%d", r.rc);
  RUN(&r, "--file", g_dir);
  CHECK(r.rc == 5 || r.rc == 9, "directory: rc=%d err=%s", r.rc, r.err);
  p = fx_path("fifo.cache");
  unlink(p);
  CHECK(mkfifo(p, 0644) == 0, "mkfifo");
  RUN(&r, "--file", p);
  CHECK(r.rc == 5 && contains(r.err, "not a regular file"), "fifo: rc=%d err=%s", r.rc, r.err);
}

static void test_every_layout_inspect(void) {
  static const struct {
    fx_layout_t l;
    const char *label;
    const char *version;
  } cases[] = {{FX_L0A, "L0a", "none"},
               {FX_L0B, "L0b", "none"},
               {FX_V1_1, "v1.1", "MAJOR=1, MINOR=1"},
               {FX_V1_1_BROKEN, "v1.1-broken", "MAJOR=1, MINOR=1"},
               {FX_V1_2, "v1.2", "MAJOR=1, MINOR=2"},
               {FX_V1_2_EXT, "v1.2", "MAJOR=1, MINOR=2"}};
  size_t i;
  pid_t live = spawn_sleeper();
  pid_t gone = dead_pid();
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_t r;
    char want[128];
    const char *p = fx_path("layout.cache");
    fx_spec_t s = base_spec(cases[i].l);
    s.nslots = 2;
    s.slots[0] = (fx_slot_t){live, live + 100000, 1, {1536ull << 20, 0}, {37, 0}, 0, 0};
    s.slots[1] = (fx_slot_t){gone, 0, 1, {512ull << 20, 256ull << 20}, {0, 0}, 0, 0};
    CHECK(fx_write(p, &s) == 0, "fixture %s", cases[i].label);
    RUN(&r, "--inspect", "--file", p);
    snprintf(want, sizeof want, "Layout:          %s (", cases[i].label);
    CHECK(r.rc == 0 && contains(r.out, want), "%s: rc=%d out=%.300s err=%s", cases[i].label, r.rc, r.out, r.err);
    CHECK(contains(r.out, cases[i].version), "%s version line", cases[i].label);
    CHECK(contains(r.out, "Device 0: GPU-00000000-0000-0000-0000-000000000000"), "%s uuid", cases[i].label);
    CHECK(contains(r.out, "Total Memory:    4096 MB") && contains(r.out, "Total Memory:    2048 MB"), "%s limits", cases[i].label);
    /* Live usage counts, the exited process's does not (it is reported separately). */
    CHECK(contains(r.out, "Used Memory:     1536 MB") && contains(r.out, "Held By Gone:    512 MB"), "%s used: %s", cases[i].label, r.out);
    CHECK(contains(r.out, "SM Limit:        50%"), "%s sm limit", cases[i].label);
    snprintf(want, sizeof want, "PID: %d  Host PID: %d  Memory: 1536 MB", live, live + 100000);
    CHECK(contains(r.out, want), "%s task line", cases[i].label);
    snprintf(want, sizeof want, "PID: %d  Host PID: 0  Memory: 512 MB", gone);
    CHECK(contains(r.out, want) && contains(r.out, "Alive: gone"), "%s gone task", cases[i].label);
    CHECK(contains(r.out, "Processes:       2 (1 running, 0 suspended, 1 gone)"), "%s counts", cases[i].label);
    CHECK(contains(r.out, "Lock Status:     UNLOCKED"), "%s lock", cases[i].label);
    /* Util is only in layouts that have device_util. */
    CHECK(contains(r.out, cases[i].l == FX_L0A ? "Util: 0%" : "Util: 37%"), "%s util", cases[i].label);

    RUN(&r, "--inspect", "--json", "--file", p);
    CHECK(r.rc == 0, "%s json rc=%d", cases[i].label, r.rc);
    CHECK(strcmp(jq(r.out, "d['layout']"), cases[i].label) == 0, "%s json layout %s", cases[i].label, jq(r.out, "d['layout']"));
    CHECK(strcmp(jq(r.out, "d['devices'][0]['memory_limit_bytes']"), "4294967296") == 0, "%s json limit", cases[i].label);
    CHECK(strcmp(jq(r.out, "d['devices'][0]['sm_limit_percent']"), "50") == 0, "%s json sm", cases[i].label);
    snprintf(want, sizeof want, "%d %d 1610612736 alive", live, live + 100000);
    CHECK(strcmp(jq(r.out, "'%d %d %d %s' % (d['processes'][0]['pid'], d['processes'][0]['hostpid'], "
                           "d['processes'][0]['devices'][0]['used_bytes'], d['processes'][0]['liveness'])"), want) == 0,
          "%s json proc: %s", cases[i].label, jq(r.out, "d['processes'][0]"));
    CHECK(strcmp(jq(r.out, "d['processes'][1]['devices'][1]['used_bytes']"), "268435456") == 0, "%s json dev1", cases[i].label);
    CHECK(strcmp(jq(r.out, "d['extension'] is None"), cases[i].l == FX_V1_2_EXT ? "False" : "True") == 0, "%s ext", cases[i].label);

    /* --device narrows to one device and the processes using it. */
    RUN(&r, "--inspect", "--device", "1", "--file", p);
    CHECK(r.rc == 0 && !contains(r.out, "Device 0:") && contains(r.out, "Device 1:"), "%s --device 1", cases[i].label);
    snprintf(want, sizeof want, "PID: %d ", live);
    CHECK(!contains(r.out, want), "%s --device 1 hides device-0-only task", cases[i].label);
    RUN(&r, "--inspect", "--device", "5", "--file", p);
    CHECK(r.rc == 2 && contains(r.err, "has 2 device"), "%s --device 5: rc=%d", cases[i].label, r.rc);
  }
  reap(live);
}

static void test_extension_and_version(void) {
  run_t r;
  const char *p = fx_path("ext.cache");
  fx_spec_t s = base_spec(FX_V1_2_EXT);
  CHECK(fx_write(p, &s) == 0, "fixture");
  RUN(&r, "--file", p);
  CHECK(r.rc == 0 && contains(r.out, "Library:         libvgpu 0.1.0-test (extension 1.0)"), "ext lib: %s", r.out);
  CHECK(contains(r.out, "Pod UID:         0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0") && contains(r.out, "Container:       trainer"), "ext pod");
  RUN(&r, "--json", "--file", p);
  CHECK(strcmp(jq(r.out, "d['extension']['container_name'] + ' ' + str(d['extension']['devices'][0]['oom_rejections'])"), "trainer 1") == 0,
        "ext json: %s", jq(r.out, "d['extension']"));
  RUN(&r, "--version", "--file", p);
  CHECK(r.rc == 0 && contains(r.out, "shrreg size: 2008952, version 1.2") && contains(r.out, "layout v1.2, version 1.2") &&
            contains(r.out, "created the region: libvgpu 0.1.0-test"),
        "version: %s", r.out);
  RUN(&r, "--version", "--json", "--file", p);
  CHECK(strcmp(jq(r.out, "'%s %s %s' % (d['layout'], d['region_minor'], d['library_version'])"), "v1.2 2 libvgpu 0.1.0-test") == 0,
        "version json: %s", r.out);
  p = fx_path("l0a.cache");
  s = base_spec(FX_L0A);
  CHECK(fx_write(p, &s) == 0, "fixture");
  RUN(&r, "--version", "--file", p);
  CHECK(r.rc == 0 && contains(r.out, "layout L0a, no version fields") && contains(r.out, "no extension block"), "version L0a: %s", r.out);
  /* No --file: the path comes from the environment. */
  {
    const char *const args[] = {"--version", NULL};
    run_as(&r, 0, p, args);
    CHECK(r.rc == 0 && contains(r.out, p), "version via env: %s", r.out);
  }
}

static void test_set_limits(void) {
  static const fx_layout_t writable[] = {FX_V1_1, FX_V1_2, FX_V1_2_EXT};
  static const fx_layout_t readonly[] = {FX_L0A, FX_L0B, FX_V1_1_BROKEN};
  size_t i;
  run_t r;
  const char *p = fx_path("limits.cache");
  for (i = 0; i < 3; i++) {
    fx_spec_t s = base_spec(writable[i]);
    CHECK(fx_write(p, &s) == 0, "fixture");
    RUN(&r, "--set-sm-limit", "1", "20", "--file", p);
    CHECK(r.rc == 0 && contains(r.out, "device 1: SM limit 0% -> 20%"), "set sm: rc=%d out=%s err=%s", r.rc, r.out, r.err);
    RUN(&r, "--set-mem-limit", "0", "8Gi", "--file", p);
    CHECK(r.rc == 0 && contains(r.out, "4294967296 -> 8589934592"), "set mem: %s", r.out);
    RUN(&r, "--json", "--set-mem-limit", "1", "512m", "--file", p);
    CHECK(strcmp(jq(r.out, "'%s %s' % (d['old'], d['new'])"), "2147483648 536870912") == 0, "set mem json: %s", r.out);
    RUN(&r, "--json", "--file", p);
    CHECK(strcmp(jq(r.out, "'%s %s %s'%(d['devices'][1]['sm_limit_percent'], d['devices'][0]['memory_limit_bytes'], d['devices'][1]['memory_limit_bytes'])"),
                 "20 8589934592 536870912") == 0,
          "read back: %s", jq(r.out, "d['devices']"));
    RUN(&r, "--set-mem-limit", "0", "0", "--file", p);
    CHECK(r.rc == 0 && contains(r.out, "(unlimited)"), "unlimited");
    RUN(&r, "--set-sm-limit", "2", "20", "--file", p);
    CHECK(r.rc == 2 && contains(r.err, "has 2 device"), "dev beyond device_num: rc=%d", r.rc);
  }
  {
    fx_spec_t s = base_spec(FX_V1_2);
    s.nslots = 1;
    s.slots[0] = (fx_slot_t){getpid(), getpid(), 1, {3ull << 30, 0}, {0, 0}, 0, 0};
    CHECK(fx_write(p, &s) == 0, "fixture");
    RUN(&r, "--set-mem-limit", "0", "1g", "--file", p);
    CHECK(r.rc == 0 && contains(r.out, "already in use"), "limit below usage warns: %s", r.out);
    RUN(&r, "--set-sm-limit", "0", "30", "--file", p);
    CHECK(contains(r.out, "HAMi-core reads the SM limit once"), "HAMi note on non-extension region");
  }
  for (i = 0; i < 3; i++) {
    fx_spec_t s = base_spec(readonly[i]);
    CHECK(fx_write(p, &s) == 0, "fixture");
    RUN(&r, "--set-sm-limit", "0", "20", "--file", p);
    CHECK(r.rc == 6 && contains(r.err, "read-only for this tool"), "read-only set: rc=%d err=%s", r.rc, r.err);
    RUN(&r, "--cleanup", "--file", p);
    CHECK(r.rc == 6, "read-only cleanup: rc=%d", r.rc);
    RUN(&r, "--force-unlock", "--file", p);
    CHECK(r.rc == 6, "read-only unlock: rc=%d", r.rc);
  }
}

static void test_permissions(void) {
  run_t r;
  const char *p = fx_path("perm.cache");
  fx_spec_t s = base_spec(FX_V1_2);
  const char *const inspect[] = {"--inspect", "--file", p, NULL};
  const char *const set[] = {"--set-sm-limit", "0", "10", "--file", p, NULL};
  if (getuid() != 0) {
    fprintf(stderr, "skip: permission tests need root (to drop to nobody)\n");
    return;
  }
  CHECK(fx_write(p, &s) == 0, "fixture");
  CHECK(chmod(p, 0600) == 0, "chmod");
  run_as(&r, 65534, NULL, inspect);
  CHECK(r.rc == 4 && contains(r.err, "permission denied"), "read denied: rc=%d err=%s", r.rc, r.err);
  CHECK(chmod(p, 0644) == 0, "chmod");
  run_as(&r, 65534, NULL, inspect);
  CHECK(r.rc == 0, "readable by others: rc=%d err=%s", r.rc, r.err);
  run_as(&r, 65534, NULL, set);
  CHECK(r.rc == 4 && contains(r.err, "read-write"), "write denied: rc=%d err=%s", r.rc, r.err);
}

/* Hostile bytes: every header field a reader trusts set to extremes; the tool must exit cleanly. */
static void test_hostile_fields(void) {
  static const size_t offs32[] = {offsetof(vgpu_region_t, proc_num), offsetof(vgpu_region_t, minor_version)};
  static const size_t offs64[] = {offsetof(vgpu_region_t, device_num), offsetof(vgpu_region_t, limit),
                                  offsetof(vgpu_region_t, owner_pid)};
  static const int32_t vals32[] = {-1, INT32_MIN, INT32_MAX, 1025, 1024};
  static const uint64_t vals64[] = {UINT64_MAX, 17, 1ull << 63};
  const char *p = fx_path("hostile.cache");
  size_t i, j;
  run_t r;
  for (i = 0; i < 2; i++)
    for (j = 0; j < 5; j++) {
      uint8_t *b;
      size_t sz;
      fx_spec_t s = base_spec(FX_V1_2_EXT);
      s.nslots = 1;
      s.slots[0] = (fx_slot_t){getpid(), 0, 1, {1, 0}, {0, 0}, 0, 0};
      CHECK(fx_write(p, &s) == 0, "fixture");
      map_region(p, &b, &sz);
      memcpy(b + offs32[i], &vals32[j], 4);
      /* Non-printable uuid and extension strings without terminators. */
      memset(b + offsetof(vgpu_region_t, uuids), 0xff, 96);
      memset(b + VGPU_EXT_OFFSET + offsetof(vgpu_region_ext_t, lib_version), 'A', VGPU_LIB_VERSION_LEN + VGPU_POD_UID_LEN);
      munmap(b, sz);
      RUN(&r, "--json", "--file", p);
      CHECK(!r.signaled && r.rc == 0 && strcmp(jq(r.out, "'ok'"), "ok") == 0, "hostile32 %zu/%zu rc=%d", i, j, r.rc);
      RUN(&r, "--cleanup", "--file", p);
      CHECK(!r.signaled && r.rc == 0, "hostile32 cleanup %zu/%zu rc=%d err=%s", i, j, r.rc, r.err);
    }
  for (i = 0; i < 3; i++)
    for (j = 0; j < 3; j++) {
      uint8_t *b;
      size_t sz;
      fx_spec_t s = base_spec(FX_V1_2_EXT);
      CHECK(fx_write(p, &s) == 0, "fixture");
      map_region(p, &b, &sz);
      memcpy(b + offs64[i], &vals64[j], 8);
      /* Extension claiming to be larger than the file. */
      *(uint32_t *)(b + VGPU_EXT_OFFSET + offsetof(vgpu_region_ext_t, size)) = 0xffffffffu;
      munmap(b, sz);
      RUN(&r, "--json", "--file", p);
      CHECK(!r.signaled && r.rc == 0 && strcmp(jq(r.out, "'ok'"), "ok") == 0, "hostile64 %zu/%zu rc=%d", i, j, r.rc);
    }
  /* Extension header but the file ends inside the slot table: slots must not be read. */
  {
    uint8_t *b;
    size_t sz;
    fx_spec_t s = base_spec(FX_V1_2_EXT);
    CHECK(fx_write(p, &s) == 0, "fixture");
    CHECK(truncate(p, VGPU_EXT_OFFSET + offsetof(vgpu_region_ext_t, slots) + 100) == 0, "truncate");
    map_region(p, &b, &sz);
    munmap(b, sz);
    RUN(&r, "--json", "--file", p);
    CHECK(!r.signaled && r.rc == 0 && strcmp(jq(r.out, "d['extension']['container_name']"), "trainer") == 0, "short ext: rc=%d", r.rc);
  }
}

int main(int argc, char **argv) {
  const char *build = argc > 2 ? argv[2] : "build";
  if (argc < 2) {
    fprintf(stderr, "usage: %s PATH/TO/shrreg-tool [BUILD_DIR]\n", argv[0]);
    return 2;
  }
  g_tool = argv[1];
  snprintf(g_dir, sizeof g_dir, "/tmp/shrreg-test.XXXXXX");
  if (mkdtemp(g_dir) == NULL) return 2;
  chmod(g_dir, 0755);
  test_help_and_usage();
  test_missing_file();
  test_expect_inode();
  test_stale_extension_entry();
  test_unknown_layouts();
  test_every_layout_inspect();
  test_extension_and_version();
  test_set_limits();
  test_cleanup();
  test_force_unlock();
  test_permissions();
  test_hostile_fields();
  test_libvgpu_written(build);
  {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
  }
  printf("shrreg-tool-cli: %d passed, %d failed\n", g_pass, g_fail);
  return g_fail == 0 ? 0 : 1;
}

/*
 * shrreg_tool_test.c — runs the real shrreg-tool binary against fixture regions of every layout
 * and checks output and exit codes: every flag, every layout, errors, lock recovery with real
 * (live, exited, zombie, pid-reused) processes, and privilege drops for permission errors.
 *
 * Run: libvgpu/test/tools/run.sh (builds the tool and this test; last line
 * "shrreg-tool: N passed, M failed"). Needs root for the permission tests (skipped otherwise)
 * and python3 for JSON checks.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixtures.h"

static int g_pass, g_fail;
static const char *g_tool;
static char g_dir[256];

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (cond) {                                                            \
      g_pass++;                                                            \
    } else {                                                               \
      g_fail++;                                                            \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                 \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
    }                                                                      \
  } while (0)

typedef struct {
  int rc;
  int signaled;
  char out[65536];
  char err[8192];
} run_t;

static void slurp(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  size_t n = 0;
  if (f != NULL) {
    n = fread(buf, 1, cap - 1, f);
    fclose(f);
  }
  buf[n] = '\0';
}

/* Runs the tool with argv (NULL-terminated), optional env override and uid; waits at most 20 s. */
static void run_as(run_t *r, uid_t uid, const char *env_cache, const char *const *args) {
  char outp[300], errp[300];
  const char *argv[32];
  int n = 0;
  pid_t pid;
  int st = 0;
  int waited;
  snprintf(outp, sizeof outp, "%s/out.txt", g_dir);
  snprintf(errp, sizeof errp, "%s/err.txt", g_dir);
  argv[n++] = g_tool;
  while (*args && n < 31) argv[n++] = *args++;
  argv[n] = NULL;
  pid = fork();
  if (pid == 0) {
    int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    dup2(fo, 1);
    dup2(fe, 2);
    if (env_cache) setenv("CUDA_DEVICE_MEMORY_SHARED_CACHE", env_cache, 1);
    else unsetenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
    if (uid != 0 && setuid(uid) != 0) _exit(120);
    execv(g_tool, (char *const *)argv);
    _exit(127);
  }
  for (waited = 0; waited < 2000; waited++) {
    if (waitpid(pid, &st, WNOHANG) == pid) break;
    usleep(10000);
  }
  if (waited == 2000) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
  }
  r->signaled = WIFSIGNALED(st);
  r->rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  slurp(outp, r->out, sizeof r->out);
  slurp(errp, r->err, sizeof r->err);
}

#define RUN(r, ...)                                       \
  do {                                                    \
    const char *const run_args_[] = {__VA_ARGS__, NULL};  \
    run_as((r), 0, NULL, run_args_);                      \
  } while (0)

/* Evaluates a Python expression over the parsed JSON `d`; returns its str() or "<invalid>". */
static const char *jq(const char *json, const char *expr) {
  static char result[4096];
  char inp[300], prog[1024], cmd[2048];
  FILE *f;
  snprintf(inp, sizeof inp, "%s/json.txt", g_dir);
  f = fopen(inp, "w");
  if (f == NULL) return "<io>";
  fputs(json, f);
  fclose(f);
  snprintf(prog, sizeof prog, "import json,sys\ntry:\n d=json.load(open(sys.argv[1]))\nexcept Exception:\n print('<invalid>'); sys.exit(0)\ntry:\n print(%s)\nexcept Exception as e:\n print('<error:%%s>' %% e)\n", expr);
  snprintf(cmd, sizeof cmd, "%s/q.py", g_dir);
  f = fopen(cmd, "w");
  if (f == NULL) return "<io>";
  fputs(prog, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "python3 %s/q.py %s", g_dir, inp);
  f = popen(cmd, "r");
  if (f == NULL) return "<io>";
  if (fgets(result, sizeof result, f) == NULL) result[0] = '\0';
  pclose(f);
  result[strcspn(result, "\n")] = '\0';
  return result;
}

static int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

static char *fx_path(const char *name) {
  static char paths[8][300];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, 300, "%s/%s", g_dir, name);
  return p;
}

/* A process that lives until killed; returns its pid. */
static pid_t spawn_sleeper(void) {
  pid_t p = fork();
  if (p == 0) {
    for (;;) pause();
  }
  return p;
}

static void reap(pid_t p) {
  kill(p, SIGKILL);
  waitpid(p, NULL, 0);
}

/* A pid that belonged to a process which has exited and been reaped. */
static pid_t dead_pid(void) {
  pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, NULL, 0);
  return p;
}

/* A zombie: exited, not reaped until reap(). */
static pid_t zombie_pid(void) {
  pid_t p = fork();
  int i;
  char path[64], buf[256];
  if (p == 0) _exit(0);
  snprintf(path, sizeof path, "/proc/%d/stat", p);
  for (i = 0; i < 200; i++) {
    FILE *f = fopen(path, "r");
    if (f != NULL) {
      size_t n = fread(buf, 1, sizeof buf - 1, f);
      fclose(f);
      buf[n] = '\0';
      if (strstr(buf, ") Z ") != NULL) break;
    }
    usleep(5000);
  }
  return p;
}

static uint64_t start_ticks_of(pid_t p) {
  char path[64], buf[1024];
  FILE *f;
  size_t n;
  char *s;
  int field;
  snprintf(path, sizeof path, "/proc/%d/stat", p);
  f = fopen(path, "r");
  if (f == NULL) return 0;
  n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  s = strrchr(buf, ')') + 2;
  for (field = 3; field < 22; s++)
    if (*s == ' ') field++;
  return strtoull(s, NULL, 10);
}

static fx_spec_t base_spec(fx_layout_t l) {
  fx_spec_t s;
  memset(&s, 0, sizeof s);
  s.layout = l;
  s.device_num = 2;
  s.limit[0] = 4ull << 30;
  s.limit[1] = 2ull << 30;
  s.sm_limit[0] = 50;
  s.sm_limit[1] = 0;
  s.sem_value = 1;
  return s;
}

static void map_region(const char *path, uint8_t **base, size_t *size) {
  int fd = open(path, O_RDWR);
  struct stat st;
  fstat(fd, &st);
  *size = (size_t)st.st_size;
  *base = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
}

static int sem_value_of(const char *path, size_t off) {
  uint8_t *b;
  size_t sz;
  int v = -1;
  map_region(path, &b, &sz);
  sem_getvalue((sem_t *)(b + off), &v);
  munmap(b, sz);
  return v;
}

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

static void test_cleanup(void) {
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

static void test_force_unlock(void) {
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

static void test_libvgpu_written(const char *build) {
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

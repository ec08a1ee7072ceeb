/*
 * shrreg_sem_test.c — shrreg-tool against a tenant-written garbage slot-table semaphore, through
 * the real binary (the way `vgpu-exporter cleanup --apply` runs it, often as root):
 *   - every command that would lock or post the semaphore (--cleanup, with and without the node
 *     side's --pids/--expect-inode; --force-unlock, with and without --holder) exits 11 with one
 *     line on stderr and leaves every byte of the file as it was; none is killed by a signal;
 *   - --inspect reports the semaphore as corrupt (text and JSON) and exits 0;
 *   - a tenant flipping the semaphore's bytes while the tool runs never makes it abort: every run
 *     ends with a documented exit code (0 done, 8 lock busy, 11 corrupt).
 * Before the fix glibc's sem_timedwait/sem_post hit the garbage futex flag: SIGABRT, core dump.
 * Run: libvgpu/test/tools/run.sh (last line "shrreg-tool-semaphore: N passed, M failed").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shrreg_tool_test.h" /* the CLI test's kit: CHECK and its counters, run_as, fixtures */

/* Runs the tool (NULL-terminated args) as the CLI test does (run_as: at most 20 s). */
static void run(run_t *r, const char *const *args) { run_as(r, 0, NULL, args); }

static int lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* The whole file, to prove "nothing changed". Caller frees. */
static uint8_t *file_bytes(const char *path, size_t *size) {
  int fd = open(path, O_RDONLY);
  struct stat st;
  uint8_t *b = NULL;
  if (fd < 0 || fstat(fd, &st) != 0) return NULL;
  *size = (size_t)st.st_size;
  b = malloc(*size);
  if (b != NULL && pread(fd, b, *size, 0) != (ssize_t)*size) {
    free(b);
    b = NULL;
  }
  close(fd);
  return b;
}

static size_t sem_off(void) { return offsetof(vgpu_region_t, sem); }

/* A v1.2 region with our extension, one dead process's slot, and these semaphore bytes. */
static void write_region(const char *path, uint64_t data, int32_t flag, pid_t dead) {
  fx_spec_t s;
  int fd;
  memset(&s, 0, sizeof s);
  s.layout = FX_V1_2_EXT;
  s.device_num = 1;
  s.limit[0] = 1ull << 30;
  s.sem_value = 1;
  s.nslots = 1;
  s.slots[0].pid = dead;
  s.slots[0].hostpid = dead;
  s.slots[0].status = 1;
  s.slots[0].used[0] = 256ull << 20;
  s.slots[0].ext_pid_tag = dead;
  unlink(path);
  if (fx_write(path, &s) != 0) abort();
  fd = open(path, O_RDWR);
  if (fd < 0 || pwrite(fd, &data, 8, (off_t)sem_off()) != 8 ||
      pwrite(fd, &flag, 4, (off_t)sem_off() + 8) != 4)
    abort();
  close(fd);
}

static const struct {
  const char *name;
  uint64_t data;
  int32_t flag;
} k_garbage[] = {
    {"garbage flag, semaphore down", 0, (int32_t)0xdeadbeef},
    {"garbage flag, semaphore up", 1, 0x41414141},
    {"garbage flag with waiters", 0x500000000ull, 7},
    {"value 2 (two holders)", 2, 128},
    {"value out of range", 0xffffffffull, 128},
};

static void test_every_locking_command_refuses(void) {
  char path[300], pidarg[64], inode[64], holder[32];
  pid_t dead = dead_pid();
  struct stat st;
  size_t i, c;
  snprintf(path, sizeof path, "%s/garbage.cache", g_dir);
  for (i = 0; i < sizeof k_garbage / sizeof k_garbage[0]; i++) {
    write_region(path, k_garbage[i].data, k_garbage[i].flag, dead);
    if (stat(path, &st) != 0) abort();
    snprintf(pidarg, sizeof pidarg, "%d:%d", (int)dead, (int)dead);
    snprintf(inode, sizeof inode, "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    snprintf(holder, sizeof holder, "%d", (int)dead);
    {
      const char *const cmds[][12] = {
          {"--cleanup", "--file", path, "--lock-timeout-ms", "300", NULL},
          {"--cleanup", "--file", path, "--pids", pidarg, "--expect-inode", inode, "--json", NULL},
          {"--force-unlock", "--file", path, "--observe-ms", "50", NULL},
          {"--force-unlock", "--file", path, "--holder", holder, "--expect-inode", inode, NULL},
      };
      for (c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
        run_t r;
        size_t n0 = 0, n1 = 0;
        uint8_t *before = file_bytes(path, &n0);
        uint8_t *after;
        run(&r, cmds[c]);
        after = file_bytes(path, &n1);
        CHECK(r.sig == 0, "%s: %s killed by signal %d (%s)", k_garbage[i].name, cmds[c][0], r.sig, r.err);
        CHECK(r.rc == 11, "%s: %s cmd %zu: rc=%d err=%s", k_garbage[i].name, cmds[c][0], c, r.rc, r.err);
        CHECK(lines(r.err) == 1 && strstr(r.err, "slot-table semaphore is corrupt") != NULL &&
                  strstr(r.err, "nothing changed") != NULL,
              "%s: %s: one clear line: %s", k_garbage[i].name, cmds[c][0], r.err);
        CHECK(before != NULL && after != NULL && n0 == n1 && memcmp(before, after, n0) == 0,
              "%s: %s changed the file", k_garbage[i].name, cmds[c][0]);
        free(before);
        free(after);
      }
    }
  }
}

static void test_inspect_reports(void) {
  char path[300];
  run_t r;
  snprintf(path, sizeof path, "%s/inspect.cache", g_dir);
  write_region(path, 0, (int32_t)0xdeadbeef, dead_pid());
  {
    const char *const a[] = {"--file", path, NULL};
    run(&r, a);
  }
  CHECK(r.rc == 0 && r.sig == 0 && strstr(r.out, "Lock Semaphore:  CORRUPT (its futex flag word is garbage") != NULL,
        "inspect text: rc=%d sig=%d out=%.300s", r.rc, r.sig, r.out);
  {
    const char *const a[] = {"--file", path, "--json", NULL};
    run(&r, a);
  }
  CHECK(r.rc == 0 && strstr(r.out, "\"semaphore_valid\":false,\"semaphore_problem\":\"its futex flag word is garbage") != NULL,
        "inspect json: %.400s", r.out);
  write_region(path, 1, 128, dead_pid()); /* what sem_init(pshared=1, 1) writes */
  {
    const char *const a[] = {"--file", path, "--json", NULL};
    run(&r, a);
  }
  CHECK(r.rc == 0 && strstr(r.out, "\"semaphore_valid\":true") != NULL && strstr(r.out, "semaphore_problem") == NULL,
        "inspect json, valid semaphore: %.400s", r.out);
  {
    const char *const a[] = {"--cleanup", "--file", path, NULL};
    run(&r, a);
  }
  CHECK(r.rc == 0 && strstr(r.out, "1 dead process slot(s) freed") != NULL, "valid semaphore: cleanup works: rc=%d %s %s", r.rc, r.out, r.err);
}

/* A tenant rewriting the semaphore in a loop while the node side cleans up. */
static void test_flipping_tenant_never_aborts(void) {
  char path[300];
  pid_t flipper;
  int i, aborted = 0, other = 0, done = 0;
  snprintf(path, sizeof path, "%s/flip.cache", g_dir);
  write_region(path, 0, 128, dead_pid());
  flipper = fork();
  if (flipper == 0) {
    int fd = open(path, O_RDWR);
    uint8_t *b = mmap(NULL, sizeof(vgpu_region_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    uint64_t n = 0;
    if (b == MAP_FAILED) _exit(1);
    for (;;) {
      uint64_t *data = (uint64_t *)(b + sem_off());
      int32_t *flag = (int32_t *)(b + sem_off() + 8);
      __atomic_store_n(flag, (n & 1) ? (int32_t)0xdeadbeef : 128, __ATOMIC_RELEASE);
      __atomic_store_n(data, (n & 2) ? 1 : 0, __ATOMIC_RELEASE);
      n++;
    }
  }
  for (i = 0; i < 40; i++) {
    run_t r;
    const char *const a[] = {"--cleanup", "--file", path, "--lock-timeout-ms", "100", NULL};
    run(&r, a);
    if (r.sig != 0) aborted++;
    else if (r.rc == 0) done++;
    else if (r.rc != 8 && r.rc != 11) {
      other++;
      fprintf(stderr, "  run %d: rc=%d %s", i, r.rc, r.err);
    }
  }
  kill(flipper, SIGKILL);
  waitpid(flipper, NULL, 0);
  CHECK(aborted == 0, "a flipping tenant killed the tool %d of 40 times", aborted);
  CHECK(other == 0, "%d runs ended with an undocumented exit code", other);
  printf("flipping tenant: 40 runs, %d completed, %d refused or busy, %d killed\n", done, 40 - done - aborted - other, aborted);
}

int main(int argc, char **argv) {
  char cmd[400];
  if (argc < 2) {
    fprintf(stderr, "usage: %s PATH/TO/shrreg-tool\n", argv[0]);
    return 2;
  }
  g_tool = argv[1];
  snprintf(g_dir, sizeof g_dir, "%s", "/tmp/shrreg-sem.XXXXXX");
  if (mkdtemp(g_dir) == NULL) return 2;
  test_every_locking_command_refuses();
  test_inspect_reports();
  test_flipping_tenant_never_aborts();
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
  printf("shrreg-tool-semaphore: %d passed, %d failed\n", g_pass, g_fail);
  return g_fail == 0 ? 0 : 1;
}

/*
 * shrreg_fuzz.c — mutation fuzzing of shrreg-tool's region parser, in process.
 *
 * Proves: for region files of every layout with random bytes overwritten (headers, counters,
 * slots, extension) and random sizes around every layout boundary, --inspect, --version and
 * --cleanup return one of the documented exit codes and never crash or hang. Deterministic
 * (seeded), so a failure reproduces. Run: build/tools-test/shrreg_fuzz [ITERATIONS]
 * (test/tools/run.sh runs 400).
 */
#define SHRREG_TOOL_NO_MAIN
#include "../../tools/shrreg_tool.c"
#include "../../tools/shrreg_args.c"
#include "../../tools/shrreg_region.c"
#include "../../tools/shrreg_json.c"
#include "../../tools/shrreg_inspect.c"
#include "../../tools/shrreg_repair.c"

#include <sys/wait.h>

#include "fixtures.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

static void mutate(const char *path) {
  int fd = open(path, O_RDWR);
  struct stat st;
  uint8_t *b;
  int n = 1 + (int)(rnd() % 32);
  int i;
  if (fd < 0 || fstat(fd, &st) != 0) return;
  b = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (b == MAP_FAILED) return;
  for (i = 0; i < n; i++) {
    size_t off;
    switch (rnd() % 4) {
      case 0: off = 4 + rnd() % 4096; break;                                /* header, uuids, limits */
      case 1: off = (size_t)st.st_size - 1 - rnd() % 64; break;             /* tail counters */
      case 2: off = 1856 + rnd() % (4 * 1960); break;                       /* first slots */
      default: off = (size_t)(rnd() % (uint64_t)st.st_size); break;         /* anywhere, incl. extension */
    }
    if (off >= (size_t)st.st_size) off = (size_t)st.st_size - 1;
    if (off < 4) continue; /* keep the magic most of the time so the parser goes deep */
    b[off] = (uint8_t)rnd();
    if (rnd() % 4 == 0 && off + 8 <= (size_t)st.st_size) memset(b + off, 0xff, 8 - off % 8);
  }
  if (rnd() % 50 == 0) b[0] ^= 1;
  if (st.st_size < 8) {
    munmap(b, (size_t)st.st_size);
    return;
  }
  munmap(b, (size_t)st.st_size);
}

/* Runs one tool invocation in a child so a crash is observed, not fatal; stdout to /dev/null. */
static int run_case(const char *cmd, const char *path, int *crashed) {
  pid_t p = fork();
  int st = 0;
  int waited;
  if (p == 0) {
    char *argv[] = {"shrreg-tool", (char *)cmd, "--json", "--observe-ms", "0", "--lock-timeout-ms", "50", "--file", (char *)path, NULL};
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    _exit(shrreg_tool_main(9, argv));
  }
  for (waited = 0; waited < 1000; waited++) {
    if (waitpid(p, &st, WNOHANG) == p) break;
    usleep(5000);
  }
  if (waited == 1000) {
    kill(p, SIGKILL);
    waitpid(p, &st, 0);
    *crashed = 2;
    return -1;
  }
  *crashed = WIFSIGNALED(st);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv) {
  static const fx_layout_t layouts[] = {FX_L0A, FX_L0B, FX_V1_1, FX_V1_1_BROKEN, FX_V1_2, FX_V1_2_EXT};
  static const char *cmds[] = {"--inspect", "--version", "--cleanup", "--force-unlock"};
  static const size_t sizes[] = {12, 804679, 804680, 804682, 1197895, 1197897, 2008951, 2008952, 2008985, 2008986, 2008960 + 100};
  int iterations = argc > 1 ? atoi(argv[1]) : 400;
  char dir[] = "/tmp/shrreg-fuzz.XXXXXX";
  char path[128];
  int pass = 0;
  int failed = 0;
  int i;
  if (mkdtemp(dir) == NULL) return 2;
  snprintf(path, sizeof path, "%s/f.cache", dir);
  for (i = 0; i < iterations; i++) {
    fx_spec_t s;
    int crashed = 0;
    int rc;
    const char *cmd = cmds[rnd() % 4];
    memset(&s, 0, sizeof s);
    s.layout = layouts[rnd() % 6];
    s.device_num = (int)(rnd() % 3);
    s.limit[0] = rnd();
    s.sm_limit[1] = rnd() % 200;
    s.sem_value = (int)(rnd() % 2);
    s.nslots = (int)(rnd() % 8);
    {
      int k;
      for (k = 0; k < s.nslots; k++) {
        s.slots[k].pid = (int)(rnd() % 70000);
        s.slots[k].hostpid = (int)rnd();
        s.slots[k].status = (int)(rnd() % 4);
        s.slots[k].used[0] = rnd();
        s.slots[k].start_ticks = rnd() % 3;
      }
    }
    s.ext_lock_holder = (int)(rnd() % 3 == 0 ? rnd() % 70000 : 0);
    if (fx_write(path, &s) != 0) return 2;
    if (i % 10 == 9) {
      if (truncate(path, (off_t)sizes[rnd() % (sizeof sizes / sizeof sizes[0])]) != 0) return 2;
    }
    mutate(path);
    rc = run_case(cmd, path, &crashed);
    if (crashed || rc < 0 || rc > 11 || rc == 10) { /* 10 needs --expect-inode; 11 a corrupt semaphore */
      failed++;
      fprintf(stderr, "FAIL fuzz iteration %d (%s, layout %d): %s rc=%d\n", i, cmd, (int)s.layout,
              crashed == 2 ? "hang" : crashed ? "crash" : "bad exit", rc);
    } else {
      pass++;
    }
  }
  unlink(path);
  rmdir(dir);
  printf("shrreg-fuzz: %d passed, %d failed\n", pass, failed);
  return failed == 0 ? 0 : 1;
}

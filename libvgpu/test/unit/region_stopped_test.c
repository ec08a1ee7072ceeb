/*
 * region_stopped_test.c — a process SIGSTOPped while it holds the region's locks (the slot lock,
 * HAMi-core's semaphore and the reservation mutex) freezes nobody: an application running under
 * the real preload library (build/preload/region_fail, fake driver) gets CUDA_ERROR_OUT_OF_MEMORY
 * for an allocation within the wait bound (fail safe), frees at once, and fork() and exit finish;
 * once the holder resumes and leaves, allocations work again and nothing is left counted.
 * Two orders: the application registers before the holder stops, or only after.
 * Needs the preload build (BUILD, default build; SANITIZE=1 preloads the sanitizer runtimes).
 * Run from libvgpu/: build/unit/region_stopped_test
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "region.h"
#include "vgpu.h"
#include "vgpu_unit.h"

static char g_dir[] = "/tmp/vgpu-stopped-XXXXXX";
static char g_path[256];

static double now_s(void) { return (double)vgpu_now_monotonic_ns() / 1e9; }

static void fresh_region(const char *name) {
  snprintf(g_path, sizeof g_path, "%s/%s", g_dir, name);
  struct vgpu_region_init in;
  memset(&in, 0, sizeof in);
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
    in.limit[d] = 64ull << 20; /* as the application's environment says */
    in.sm_limit[d] = 100;
  }
  struct vgpu_region_map m;
  if (vgpu_region_open(&m, g_path, &in) != VGPU_REGION_OK) abort();
  vgpu_region_close(&m);
}

/* A child that takes the reservation mutex, the slot lock and HAMi-core's semaphore, then stops
 * itself. Resumed, it releases them and exits 0. Returns its pid once it is stopped. */
static pid_t start_stopped_holder(void) {
  int p[2];
  if (pipe(p) != 0) abort();
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    struct vgpu_region_map m;
    if (vgpu_region_open(&m, g_path, NULL) != VGPU_REGION_OK) _exit(3);
    bool mutex = vgpu_region_reserve_lock(&m);
    vgpu_region_lock(&m);
    if (write(p[1], "x", 1) != 1) _exit(4);
    raise(SIGSTOP);
    vgpu_region_unlock(&m);
    vgpu_region_reserve_unlock(&m, mutex);
    _exit(0);
  }
  close(p[1]);
  char ch;
  EXPECT(read(p[0], &ch, 1) == 1);
  close(p[0]);
  int st = 0;
  EXPECT(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st));
  return pid;
}

static void resume_holder(pid_t pid) {
  kill(pid, SIGCONT);
  int st = 0;
  EXPECT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static char g_preload[1024], g_app[512], g_fake[512];

static void find_build(void) {
  const char *b = getenv("BUILD");
  char cwd[400];
  if (!getcwd(cwd, sizeof cwd)) abort();
  snprintf(g_app, sizeof g_app, "%s/%s/preload/region_fail", cwd, b ? b : "build");
  snprintf(g_fake, sizeof g_fake, "%s/%s/fake", cwd, b ? b : "build");
  char lib[512] = "";
  snprintf(lib, sizeof lib, "%s/%s/libvgpu.so", cwd, b ? b : "build");
  snprintf(g_preload, sizeof g_preload, "%s", lib);
  if (getenv("SANITIZE")) {
    char asan[256] = "", ubsan[256] = "";
    FILE *f = popen("gcc -print-file-name=libasan.so; gcc -print-file-name=libubsan.so", "r");
    if (f) {
      if (fgets(asan, sizeof asan, f)) asan[strcspn(asan, "\n")] = 0;
      if (fgets(ubsan, sizeof ubsan, f)) ubsan[strcspn(ubsan, "\n")] = 0;
      pclose(f);
    }
    snprintf(g_preload, sizeof g_preload, "%s:%s:%s", asan, ubsan, lib);
  }
}

/* Starts region_fail <name> under the preload library; extra env entries may be NULL. */
static pid_t spawn_app(const char *name, const char *extra1, const char *extra2,
                       const char *extra3) {
  pid_t pid = fork();
  if (pid == 0) {
    char e[8][1100];
    snprintf(e[0], sizeof e[0], "PATH=/usr/bin:/bin");
    snprintf(e[1], sizeof e[1], "LD_LIBRARY_PATH=%s", g_fake);
    snprintf(e[2], sizeof e[2], "LD_PRELOAD=%s", g_preload);
    snprintf(e[3], sizeof e[3], "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s", g_path);
    snprintf(e[4], sizeof e[4], "CUDA_DEVICE_MEMORY_LIMIT=64m");
    snprintf(e[5], sizeof e[5], "FAKE_NVML_CONFIG=/nonexistent");
    snprintf(e[6], sizeof e[6], "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0");
    char *envp[12] = {e[0], e[1], e[2], e[3], e[4], e[5], e[6]};
    int n = 7;
    if (extra1) envp[n++] = (char *)extra1;
    if (extra2) envp[n++] = (char *)extra2;
    if (extra3) envp[n++] = (char *)extra3;
    envp[n] = NULL;
    char *argv[] = {g_app, (char *)name, NULL};
    execve(g_app, argv, envp);
    _exit(127);
  }
  return pid;
}

/* Waits at most `limit_s` for the app; kills it after that (it hung). Exit status, -1 if hung. */
static int wait_app(pid_t pid, double limit_s, double *took) {
  double t0 = now_s();
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      *took = now_s() - t0;
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    if (now_s() - t0 > limit_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      *took = now_s() - t0;
      return -1;
    }
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
}

static uint64_t region_used0(void) {
  struct vgpu_region_map m;
  if (vgpu_region_open_existing(&m, g_path, false) != VGPU_REGION_OK) return UINT64_MAX;
  uint64_t u = vgpu_region_used(&m, 0);
  vgpu_region_close(&m);
  return u;
}

static void stoppedHolder_beforeRegistration_allocFailsSafe_forkExitProceed(void) {
  fresh_region("before.cache");
  pid_t holder = start_stopped_holder();
  double took = 0;
  int rc = wait_app(spawn_app("stopped_holder", NULL, NULL, NULL), 20, &took);
  EXPECT_EQ_U(rc, 0);
  EXPECT(took < 8.0); /* one bounded wait (3 s) per refused call, and exit does not wait */
  fprintf(stderr, "  application with a stopped holder finished in %.2f s (rc %d)\n", took, rc);
  resume_holder(holder);
  rc = wait_app(spawn_app("after_resume", NULL, NULL, NULL), 20, &took);
  EXPECT_EQ_U(rc, 0);
  EXPECT(took < 2.0);
  EXPECT_EQ_U(region_used0(), 0);
}

static void stoppedHolder_afterRegistration_allocFailsSafe_freeForkExitProceed(void) {
  fresh_region("after.cache");
  int to_app[2], from_app[2];
  if (pipe(to_app) != 0 || pipe(from_app) != 0) abort();
  char in[32], out[32];
  snprintf(in, sizeof in, "SYNC_IN=%d", to_app[0]);
  snprintf(out, sizeof out, "SYNC_OUT=%d", from_app[1]);
  pid_t app = spawn_app("stopped_holder", "REGISTER_FIRST=1", in, out);
  close(to_app[0]);
  close(from_app[1]);
  char ch = 0;
  EXPECT(read(from_app[0], &ch, 1) == 1 && ch == 'r');
  EXPECT_EQ_U(region_used0(), 1u << 20);
  pid_t holder = start_stopped_holder();
  EXPECT(write(to_app[1], "g", 1) == 1);
  double took = 0;
  int rc = wait_app(app, 20, &took);
  EXPECT_EQ_U(rc, 0);
  EXPECT(took < 8.0);
  fprintf(stderr, "  registered application with a stopped holder finished in %.2f s (rc %d)\n",
          took, rc);
  /* It could not free its slot (the slot lock is held) but emptied it on exit. */
  EXPECT_EQ_U(region_used0(), 0);
  resume_holder(holder);
  rc = wait_app(spawn_app("after_resume", NULL, NULL, NULL), 20, &took);
  EXPECT_EQ_U(rc, 0);
  EXPECT_EQ_U(region_used0(), 0);
  close(to_app[1]);
  close(from_app[0]);
}

int main(int argc, char **argv) {
  if (!mkdtemp(g_dir)) return 1;
  find_build();
  struct stat st;
  if (stat(g_app, &st) != 0) {
    fprintf(stderr, "%s missing: build the preload programs first (make all)\n", g_app);
    printf("region_stopped: 0 passed, 1 failed\n");
    return 1;
  }
  static const struct unit_case cases[] = {
      CASE(stoppedHolder_beforeRegistration_allocFailsSafe_forkExitProceed),
      CASE(stoppedHolder_afterRegistration_allocFailsSafe_freeForkExitProceed),
  };
  int rc = unit_run("region_stopped", cases, sizeof cases / sizeof cases[0], argc, argv);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd) != 0) rc = 1;
  return rc;
}

/*
 * adopt_test.c — a stripped environment adopts the container's region (src/config_adopt.c):
 * what counts as a stripped environment, which file is the container's region, what is read from
 * it (any HAMi-core layout), and every way a tenant can make the directory unusable, each of
 * which must end in the fail-safe limits, never in "unlimited". The real preload runs are in
 * test/run_adopt.sh. Run: libvgpu/build/unit/adopt_test
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tools/fixtures.h"
#include "region.h"
#include "vgpu.h"
#include "vgpu_unit.h"

static char g_dir[] = "/tmp/vgpu-adopt-XXXXXX";
static char g_hook[300];

static void fresh_hook(void) {
  char cmd[700];
  snprintf(g_hook, sizeof g_hook, "%s/hook", g_dir);
  snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", g_hook, g_hook);
  if (system(cmd) != 0) abort();
}

static const char *in_hook(const char *name) {
  static char p[4][400];
  static int next;
  char *s = p[next++ % 4];
  snprintf(s, 400, "%s/%s", g_hook, name);
  return s;
}

/* A libvgpu region with these limits (what the container's first process writes). */
static void make_region(const char *path, uint64_t mem0, uint64_t sm0) {
  struct vgpu_region_map m;
  struct vgpu_region_init in;
  memset(&in, 0, sizeof in);
  in.device_num = 1;
  in.limit[0] = mem0;
  in.sm_limit[0] = sm0;
  for (int d = 1; d < VGPU_MAX_DEVICES; d++) in.sm_limit[d] = 100;
  if (vgpu_region_open(&m, path, &in) != VGPU_REGION_OK) abort();
  vgpu_region_close(&m);
}

static const char *g_env[8][2];
static const char *fake_get(const char *name) {
  for (int i = 0; i < 8 && g_env[i][0]; i++)
    if (strcmp(g_env[i][0], name) == 0) return g_env[i][1];
  return NULL;
}
static void parse_with(struct vgpu_config *cfg, const char *k1, const char *v1) {
  memset(g_env, 0, sizeof g_env);
  g_env[0][0] = k1;
  g_env[0][1] = v1;
  vgpu_config_parse(cfg, fake_get);
}

static void strippedEnv_meansNoNonEmptyLimitVariable(void) {
  struct vgpu_config c;
  parse_with(&c, NULL, NULL);
  EXPECT(!c.env_has_limits);
  parse_with(&c, "CUDA_DEVICE_MEMORY_SHARED_CACHE", "/x.cache");
  EXPECT(!c.env_has_limits && c.cache_path_from_env);
  parse_with(&c, "CUDA_DEVICE_MEMORY_LIMIT", ""); /* "VAR=" clears a variable */
  EXPECT(!c.env_has_limits);
  parse_with(&c, "CUDA_DEVICE_MEMORY_LIMIT_15", "1g");
  EXPECT(c.env_has_limits);
  parse_with(&c, "CUDA_DEVICE_SM_LIMIT", "0");
  EXPECT(c.env_has_limits);
  parse_with(&c, "CUDA_DEVICE_SM_LIMIT_3", "50");
  EXPECT(c.env_has_limits);
}

static void oneRegion_adoptedWithItsLimits(void) {
  fresh_hook();
  make_region(in_hook("a1b2.cache"), 3ull << 30, 30);
  /* What a HAMi directory may hold besides: side files, hidden files, the library. */
  close(open(in_hook("a1b2.cache.degraded"), O_CREAT | O_WRONLY, 0644));
  close(open(in_hook(".tmp.cache"), O_CREAT | O_WRONLY, 0644));
  close(open(in_hook("libvgpu.so"), O_CREAT | O_WRONLY, 0644));
  struct vgpu_adopted a;
  EXPECT(vgpu_adopt_scan(g_hook, &a) == VGPU_ADOPT_OK);
  EXPECT(strcmp(a.path, in_hook("a1b2.cache")) == 0);
  EXPECT_EQ_U(a.mem_limit[0], 3ull << 30);
  EXPECT_EQ_U(a.sm_limit[0], 30);
  struct vgpu_config c;
  parse_with(&c, NULL, NULL);
  vgpu_config_adopt(&c, g_hook);
  EXPECT(c.adopted && !c.no_shared_region);
  EXPECT(strcmp(c.cache_path, in_hook("a1b2.cache")) == 0);
  EXPECT_EQ_U(c.mem_limit[0], 3ull << 30);
  EXPECT_EQ_U(c.mem_limit[1], 0);
  EXPECT_EQ_U(c.sm_limit[0], 30);
  EXPECT_EQ_U(c.sm_limit[1], 100); /* the region's "none" */
  /* With a limit variable, the environment's contract as before: nothing adopted. */
  parse_with(&c, "CUDA_DEVICE_MEMORY_LIMIT", "8g");
  vgpu_config_adopt(&c, g_hook);
  EXPECT(!c.adopted && !c.no_shared_region);
  EXPECT_EQ_U(c.mem_limit[0], 8ull << 30);
  EXPECT(strcmp(c.cache_path, "/tmp/cudevshr.cache") == 0);
}

/* The limits of every HAMi-core layout, read through the one layout table. */
static void oldLayout_limitsRead(void) {
  static const fx_layout_t layouts[] = {FX_L0A, FX_L0B, FX_V1_1, FX_V1_1_BROKEN, FX_V1_2};
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
    fx_spec_t s;
    memset(&s, 0, sizeof s);
    s.layout = layouts[i];
    s.device_num = 2;
    s.limit[0] = 1ull << 30;
    s.limit[1] = 2ull << 30;
    s.sm_limit[0] = 40;
    s.sem_value = 1;
    fresh_hook();
    EXPECT(fx_write(in_hook("old.cache"), &s) == 0);
    struct vgpu_adopted a;
    EXPECT(vgpu_adopt_scan(g_hook, &a) == VGPU_ADOPT_OK);
    EXPECT_EQ_U(a.mem_limit[0], 1ull << 30);
    EXPECT_EQ_U(a.mem_limit[1], 2ull << 30);
    EXPECT_EQ_U(a.sm_limit[0], 40);
  }
}

/* "<x>.cache" of another layout and libvgpu's "<x>-libvgpu-v1.2.cache" beside it: the latter. */
static void altPair_theLibraryFileWins(void) {
  fresh_hook();
  make_region(in_hook("x-libvgpu-v1.2.cache"), 5ull << 20, 0);
  fx_spec_t s;
  memset(&s, 0, sizeof s);
  s.layout = FX_L0A;
  s.limit[0] = 7ull << 20;
  EXPECT(fx_write(in_hook("x.cache"), &s) == 0);
  struct vgpu_adopted a;
  EXPECT(vgpu_adopt_scan(g_hook, &a) == VGPU_ADOPT_OK);
  EXPECT(strcmp(a.path, in_hook("x-libvgpu-v1.2.cache")) == 0);
  EXPECT_EQ_U(a.mem_limit[0], 5ull << 20);
}

static void expect_unusable(const char *what, const char *why_part) {
  struct vgpu_adopted a;
  uint64_t t0 = vgpu_now_monotonic_ns();
  int rc = vgpu_adopt_scan(g_hook, &a);
  if (rc != VGPU_ADOPT_UNUSABLE || !strstr(a.why, why_part)) {
    fprintf(stderr, "  %s: rc=%d why=%s\n", what, rc, a.why);
    unit_failed_checks++;
  }
  EXPECT(vgpu_now_monotonic_ns() - t0 < 2 * vgpu_region_wait_ns); /* never hangs */
  struct vgpu_config c;
  parse_with(&c, NULL, NULL);
  vgpu_config_adopt(&c, g_hook);
  EXPECT(c.no_shared_region && !c.adopted);
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
    EXPECT_EQ_U(c.mem_limit[d], VGPU_FAILSAFE_MEM_LIMIT);
    EXPECT_EQ_U(c.sm_limit[d], VGPU_FAILSAFE_SM_LIMIT);
  }
  EXPECT_EQ_U(c.mem_failsafe_mask, 0xffff);
}

static void tenantMadeItUnusable_failSafe(void) {
  vgpu_region_wait_ns = 200000000ull; /* 200 ms: the bound a half-created file is waited for */
  fresh_hook();
  make_region(in_hook("a.cache"), 1ull << 30, 0);
  make_region(in_hook("b.cache"), 0, 0); /* a second one, without limits */
  expect_unusable("two regions", "2 region files");
  fresh_hook();
  make_region(in_hook("unlimited-elsewhere.cache"), 0, 0);
  if (rename(in_hook("unlimited-elsewhere.cache"), "/tmp/vgpu-adopt-target.cache") != 0) abort();
  if (symlink("/tmp/vgpu-adopt-target.cache", in_hook("a.cache")) != 0) abort();
  expect_unusable("symlink", "symbolic link");
  unlink("/tmp/vgpu-adopt-target.cache");
  fresh_hook();
  if (mkfifo(in_hook("a.cache"), 0666) != 0) abort();
  expect_unusable("fifo", "not a regular file");
  fresh_hook();
  if (mkdir(in_hook("a.cache"), 0755) != 0) abort();
  expect_unusable("directory", "not a regular file");
  fresh_hook();
  close(open(in_hook("a.cache"), O_CREAT | O_WRONLY, 0644)); /* empty: a creator died, or a tenant */
  expect_unusable("empty file", "not a region");
  fresh_hook();
  {
    int fd = open(in_hook("a.cache"), O_CREAT | O_WRONLY, 0644);
    char junk[4096];
    memset(junk, 0x5a, sizeof junk);
    if (write(fd, junk, sizeof junk) != (ssize_t)sizeof junk) abort();
    close(fd);
  }
  expect_unusable("garbage", "not a region");
  fresh_hook();
  {
    int fd = open(in_hook("big.cache"), O_CREAT | O_WRONLY, 0644);
    if (ftruncate(fd, (off_t)VGPU_MAX_REGION_FILE_SIZE + 1) != 0) abort();
    close(fd);
  }
  expect_unusable("too large", "too large");
  vgpu_region_wait_ns = VGPU_LOCK_WAIT_NS;
}

/* The listing bound: 512 entries ("." and ".." included) are read, one more is unusable. */
static void entryBound_atAndPastTheLimit(void) {
  fresh_hook();
  make_region(in_hook("a.cache"), 1ull << 30, 0);
  for (int i = 0; i < 509; i++) {
    char name[32];
    snprintf(name, sizeof name, "side%d", i);
    close(open(in_hook(name), O_CREAT | O_WRONLY, 0644));
  }
  struct vgpu_adopted a;
  EXPECT(vgpu_adopt_scan(g_hook, &a) == VGPU_ADOPT_OK); /* 509 + a.cache + . + .. = 512 */
  close(open(in_hook("side-one-more"), O_CREAT | O_WRONLY, 0644));
  expect_unusable("513 entries", "more than 512 entries");
}

/* No directory, a link or a file where HAMi mounts one, or no *.cache in it: nothing adopted. */
static void noRegion_nothingAdopted(void) {
  struct vgpu_adopted a;
  struct vgpu_config c;
  fresh_hook();
  EXPECT(vgpu_adopt_scan(g_hook, &a) == VGPU_ADOPT_NONE);
  EXPECT(vgpu_adopt_scan(in_hook("missing"), &a) == VGPU_ADOPT_NONE);
  make_region(in_hook("r.cache"), 1ull << 30, 0);
  if (symlink(g_hook, in_hook("link")) != 0) abort();
  EXPECT(vgpu_adopt_scan(in_hook("link"), &a) == VGPU_ADOPT_NONE); /* never followed */
  EXPECT(vgpu_adopt_scan(in_hook("r.cache"), &a) == VGPU_ADOPT_NONE);
  fresh_hook();
  parse_with(&c, NULL, NULL);
  vgpu_config_adopt(&c, g_hook);
  EXPECT(!c.adopted && !c.no_shared_region && c.mem_limit[0] == 0 && c.sm_limit[0] == 100);
  EXPECT(strcmp(c.cache_path, "/tmp/cudevshr.cache") == 0);
}

/* A region being created (its creator holds the init lock) is read once it is complete. */
static void beingCreated_waitedFor(void) {
  fresh_hook();
  const char *p = in_hook("new.cache");
  int go[2];
  if (pipe(go) != 0) abort();
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(p, O_RDWR | O_CREAT, 0666);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = (off_t)sizeof(vgpu_region_t)};
    if (fd < 0 || fcntl(fd, F_SETLK, &fl) != 0) _exit(1);
    if (write(go[1], "x", 1) != 1) _exit(1);
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    fl.l_type = F_UNLCK;
    fcntl(fd, F_SETLK, &fl);
    close(fd);
    make_region(p, 9ull << 20, 0); /* as a creator finishing its file */
    _exit(0);
  }
  char c;
  if (read(go[0], &c, 1) != 1) abort();
  struct vgpu_adopted a;
  EXPECT(vgpu_adopt_scan(g_hook, &a) == VGPU_ADOPT_OK);
  EXPECT_EQ_U(a.mem_limit[0], 9ull << 20);
  waitpid(pid, NULL, 0);
}

static void cleanup_dir(void) {
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
}

static void setup_dir(void) {
  if (!mkdtemp(g_dir)) abort();
}

UNIT_MAIN("adopt_test", CASE(setup_dir), CASE(strippedEnv_meansNoNonEmptyLimitVariable),
          CASE(oneRegion_adoptedWithItsLimits), CASE(oldLayout_limitsRead),
          CASE(altPair_theLibraryFileWins), CASE(tenantMadeItUnusable_failSafe),
          CASE(entryBound_atAndPastTheLimit), CASE(noRegion_nothingAdopted),
          CASE(beingCreated_waitedFor), CASE(cleanup_dir))

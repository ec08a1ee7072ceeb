/*
 * shrreg_tool_test_kit.c — helpers of shrreg-tool's CLI test (shrreg_tool_test.h): running the
 * tool, reading its JSON, fixture paths, real processes in every state, mapping a region.
 */
#include "shrreg_tool_test.h"

int g_pass, g_fail;
const char *g_tool;
char g_dir[256];

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
void run_as(run_t *r, uid_t uid, const char *env_cache, const char *const *args) {
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
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core); /* a tool killed by a signal leaves no core file behind */
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
  r->sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  r->rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  slurp(outp, r->out, sizeof r->out);
  slurp(errp, r->err, sizeof r->err);
}

/* Evaluates a Python expression over the parsed JSON `d`; returns its str() or "<invalid>". */
const char *jq(const char *json, const char *expr) {
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

int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

char *fx_path(const char *name) {
  static char paths[8][300];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, 300, "%s/%s", g_dir, name);
  return p;
}

/* A process that lives until killed; returns its pid. */
pid_t spawn_sleeper(void) {
  pid_t p = fork();
  if (p == 0) {
    for (;;) pause();
  }
  return p;
}

void reap(pid_t p) {
  kill(p, SIGKILL);
  waitpid(p, NULL, 0);
}

/* A pid that belonged to a process which has exited and been reaped. */
pid_t dead_pid(void) {
  pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, NULL, 0);
  return p;
}

/* A zombie: exited, not reaped until reap(). */
pid_t zombie_pid(void) {
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

uint64_t start_ticks_of(pid_t p) {
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

fx_spec_t base_spec(fx_layout_t l) {
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

void map_region(const char *path, uint8_t **base, size_t *size) {
  int fd = open(path, O_RDWR);
  struct stat st;
  fstat(fd, &st);
  *size = (size_t)st.st_size;
  *base = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
}

int sem_value_of(const char *path, size_t off) {
  uint8_t *b;
  size_t sz;
  int v = -1;
  map_region(path, &b, &sz);
  sem_getvalue((sem_t *)(b + off), &v);
  munmap(b, sz);
  return v;
}

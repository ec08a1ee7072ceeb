/*
 * coord.c — allocation stress coordinator. Starts PROCS worker processes (worker.c) under
 * LD_PRELOAD=libvgpu.so, all sharing one region file and one memory limit, SIGKILLs KILLS of them
 * at random moments, and checks:
 *   1. never over the limit: the region's used bytes, sampled every ~2 ms under the reservation
 *      lock (so the sum is a consistent cut), never exceed the limit;
 *   2. no deadlock: every survivor finishes its run and reports within a grace period;
 *   3. exact count: after the run the region converges to exactly the survivors' slots, each
 *      holding exactly the data bytes the worker says it still holds (killed workers' slots are
 *      swept by the survivors' heartbeats).
 * Usage: coord <libvgpu.so> <worker> <fake-lib-dir> <procs> <threads> <seconds> <kills> <limit>
 * Last line: "stress: ... PASS" or "stress: ... FAIL (...)"; exit status 0 only on PASS.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "region.h"
#include "vgpu.h"

#define MAX_PROCS 256

static pid_t g_pid[MAX_PROCS];
static int g_killed[MAX_PROCS];
static int g_exited[MAX_PROCS];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void reap(int procs) {
  int st;
  pid_t p;
  while ((p = waitpid(-1, &st, WNOHANG)) > 0)
    for (int i = 0; i < procs; i++)
      if (g_pid[i] == p) g_exited[i] = WIFEXITED(st) ? 1 + WEXITSTATUS(st) : -WTERMSIG(st);
}

static int fail(const char *why) {
  printf("stress: FAIL (%s)\n", why);
  fflush(stdout);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 9) {
    fprintf(stderr, "usage: %s <libvgpu.so> <worker> <fake-dir> <procs> <threads> <seconds> <kills> <limit-bytes>\n", argv[0]);
    return 2;
  }
  const char *lib = argv[1], *worker = argv[2], *fakedir = argv[3];
  int procs = atoi(argv[4]), threads = atoi(argv[5]), seconds = atoi(argv[6]), kills = atoi(argv[7]);
  uint64_t limit = strtoull(argv[8], NULL, 10);
  if (procs < 1 || procs > MAX_PROCS) return 2;
  char dir[] = "/tmp/vgpu-stress-XXXXXX";
  if (!mkdtemp(dir)) return 2;
  char cache[256], env_cache[300], env_limit[64], env_preload[4200], env_ld[4200];
  snprintf(cache, sizeof cache, "%s/vgpu.cache", dir);
  snprintf(env_cache, sizeof env_cache, "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s", cache);
  snprintf(env_limit, sizeof env_limit, "CUDA_DEVICE_MEMORY_LIMIT=%llu", (unsigned long long)limit);
  snprintf(env_preload, sizeof env_preload, "LD_PRELOAD=%s", lib);
  snprintf(env_ld, sizeof env_ld, "LD_LIBRARY_PATH=%s", fakedir);
  char *envp[] = {env_cache, env_limit, env_preload, env_ld, "FAKE_NVML_CONFIG=/nonexistent",
                  "LIBVGPU_CONTEXT_SIZE=0", "LIBCUDA_LOG_LEVEL=0", "PATH=/usr/bin:/bin", NULL};
  char sthreads[16], sseconds[16];
  snprintf(sthreads, sizeof sthreads, "%d", threads);
  snprintf(sseconds, sizeof sseconds, "%d", seconds);
  srand((unsigned)getpid());
  for (int i = 0; i < procs; i++) {
    char seed[16];
    snprintf(seed, sizeof seed, "%d", i + 1);
    pid_t p = fork();
    if (p == 0) {
      char *args[] = {(char *)worker, dir, sthreads, sseconds, seed, NULL};
      execve(worker, args, envp);
      _exit(127);
    }
    g_pid[i] = p;
  }

  /* The first worker creates the region. */
  struct vgpu_region_map m;
  double t0 = now_s();
  while (vgpu_region_open_existing(&m, cache, true) != VGPU_REGION_OK) {
    if (now_s() - t0 > 30) return fail("region never created");
    usleep(2000);
  }
  double end = t0 + seconds;
  double kill_every = kills > 0 ? (double)seconds / (kills + 1) : 1e9;
  double next_kill = t0 + kill_every;
  int killed = 0;
  unsigned long samples = 0, over = 0;
  uint64_t max_used = 0;
  while (now_s() < end) {
    bool mutex = vgpu_region_reserve_lock(&m);
    uint64_t used = vgpu_region_used(&m, 0);
    vgpu_region_reserve_unlock(&m, mutex);
    samples++;
    if (used > max_used) max_used = used;
    if (used > limit) over++;
    if (killed < kills && now_s() >= next_kill) {
      int alive = 0;
      for (int i = 0; i < procs; i++) alive += !g_killed[i];
      if (alive > 1) {
        int pick = rand() % procs;
        while (g_killed[pick]) pick = (pick + 1) % procs;
        kill(g_pid[pick], SIGKILL);
        g_killed[pick] = 1;
        killed++;
      }
      next_kill += kill_every;
    }
    reap(procs);
    usleep(2000);
  }

  /* Survivors report within a grace period, or something is stuck. */
  uint64_t held[MAX_PROCS] = {0}, ok = 0, oom = 0, frees = 0;
  int reported = 0, survivors = 0;
  for (int i = 0; i < procs; i++) survivors += !g_killed[i];
  double grace = now_s() + 60;
  while (reported < survivors && now_s() < grace) {
    reported = 0;
    for (int i = 0; i < procs; i++) {
      if (g_killed[i]) continue;
      char path[512];
      snprintf(path, sizeof path, "%s/held.%d", dir, (int)g_pid[i]);
      FILE *f = fopen(path, "r");
      if (!f) continue;
      unsigned long long h, a, o, fr;
      if (fscanf(f, "%llu %llu %llu %llu", &h, &a, &o, &fr) == 4) {
        held[i] = h;
        reported++;
      }
      fclose(f);
    }
    reap(procs);
    usleep(10000);
  }
  for (int i = 0; i < procs; i++) {
    if (g_killed[i]) continue;
    char path[512];
    snprintf(path, sizeof path, "%s/held.%d", dir, (int)g_pid[i]);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    unsigned long long h, a, o, fr;
    if (fscanf(f, "%llu %llu %llu %llu", &h, &a, &o, &fr) == 4) {
      ok += a;
      oom += o;
      frees += fr;
    }
    fclose(f);
  }
  char why[256] = "";
  if (reported < survivors)
    snprintf(why, sizeof why, "deadlock or crash: %d of %d survivors never finished", survivors - reported, survivors);

  /* Convergence: live slots == survivors, each with exactly its held data bytes. */
  double c0 = now_s();
  int converged = 0, live = 0, mismatched = 0, foreign = 0;
  while (!why[0] && now_s() - c0 < 30) {
    live = mismatched = foreign = 0;
    vgpu_region_lock(&m);
    for (int s = 0; s < VGPU_MAX_PROCS; s++) {
      vgpu_proc_slot_t *sl = &m.r->procs[s];
      if (sl->status == 0 || sl->pid == 0) continue;
      live++;
      int who = -1;
      for (int i = 0; i < procs; i++)
        if (g_pid[i] == sl->pid) who = i;
      if (who < 0 || g_killed[who]) foreign++;
      else if (sl->used[0].data_size != held[who]) mismatched++;
    }
    vgpu_region_unlock(&m);
    if (live == survivors && mismatched == 0 && foreign == 0) {
      converged = 1;
      break;
    }
    reap(procs);
    usleep(50000);
  }
  double converge_ms = (now_s() - c0) * 1000;
  uint64_t final_used = vgpu_region_used(&m, 0);
  if (!why[0] && !converged)
    snprintf(why, sizeof why, "no convergence in 30 s: %d live slots for %d survivors, %d mismatched, %d dead", live, survivors, mismatched, foreign);
  if (!why[0] && over) snprintf(why, sizeof why, "%lu of %lu samples over the limit", over, samples);

  for (int i = 0; i < procs; i++)
    if (!g_killed[i]) kill(g_pid[i], SIGTERM);
  double w0 = now_s();
  for (;;) {
    reap(procs);
    int pending = 0;
    for (int i = 0; i < procs; i++) pending += g_exited[i] == 0;
    if (!pending || now_s() - w0 > 30) break;
    usleep(10000);
  }
  int bad_exit = 0;
  for (int i = 0; i < procs; i++) {
    if (g_exited[i] == 0) kill(g_pid[i], SIGKILL);
    if (!g_killed[i] && g_exited[i] != 1) bad_exit++;
  }
  if (!why[0] && bad_exit) snprintf(why, sizeof why, "%d survivors did not exit 0 on SIGTERM", bad_exit);
  vgpu_region_close(&m);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", dir);

  printf("stress: %d procs x %d threads x %d s, limit %llu MiB: %llu allocs ok, %llu refused at the limit, %llu frees;"
         " %d SIGKILLed; %lu samples, max used %.1f MiB (%.2f%% of limit), %lu over; converged to %d survivors in %.0f ms,"
         " final used %.1f MiB\n",
         procs, threads, seconds, (unsigned long long)(limit >> 20), (unsigned long long)ok,
         (unsigned long long)oom, (unsigned long long)frees, killed, samples, max_used / 1048576.0,
         100.0 * (double)max_used / (double)limit, over, survivors, converge_ms, final_used / 1048576.0);
  if (why[0]) return fail(why);
  printf("stress: PASS\n");
  return 0;
}

/*
 * region_liveness.c — what <proc_root>/<pid>/stat says about a recorded process; see region.h.
 * Split from region.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "region_internal.h"
#include "vgpu.h"

/* ---- liveness */

enum vgpu_liveness vgpu_proc_liveness(const char *proc_root, int pid, uint64_t recorded_start,
                                      uint64_t *start) {
  char path[4200], buf[1024];
  if (start) *start = 0;
  if (pid <= 0) return VGPU_LIVE_NO_PID;
  if ((size_t)snprintf(path, sizeof path, "%s/%d/stat", proc_root, pid) >= sizeof path)
    return VGPU_LIVE_UNKNOWN;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? VGPU_LIVE_GONE : VGPU_LIVE_UNKNOWN;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return n == 0 ? VGPU_LIVE_GONE : VGPU_LIVE_UNKNOWN;
  buf[n] = 0;
  /* The command name (field 2) may hold spaces and parentheses: fields restart after the last
   * ')'. */
  const char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ' || p[2] == 0) return VGPU_LIVE_UNKNOWN;
  char state = p[2];
  p += 2; /* field 3 (state); starttime is field 22 */
  int field = 3;
  for (; field < 22 && *p; p++)
    if (*p == ' ') field++;
  uint64_t found = field == 22 ? strtoull(p, NULL, 10) : 0;
  if (start) *start = found;
  if (state == 'Z' || state == 'X' || state == 'x') return VGPU_LIVE_ZOMBIE;
  if (recorded_start != 0 && found != 0 && found != recorded_start) return VGPU_LIVE_REUSED;
  return VGPU_LIVE_ALIVE;
}

const char *vgpu_liveness_name(enum vgpu_liveness l) {
  switch (l) {
    case VGPU_LIVE_ALIVE: return "alive";
    case VGPU_LIVE_GONE: return "gone";
    case VGPU_LIVE_ZOMBIE: return "zombie";
    case VGPU_LIVE_REUSED: return "pid-reused";
    case VGPU_LIVE_UNKNOWN: return "unknown";
    case VGPU_LIVE_NO_PID: return "no-pid";
  }
  return "unknown";
}

int vgpu_proc_stat(pid_t pid, uint64_t *start_ticks) {
  uint64_t start = 0;
  switch (vgpu_proc_liveness("/proc", (int)pid, 0, &start)) {
    case VGPU_LIVE_ALIVE:
      if (start == 0) return -1; /* no start time: cannot tell a reused pid */
      if (start_ticks) *start_ticks = start;
      return 1;
    case VGPU_LIVE_GONE:
    case VGPU_LIVE_ZOMBIE:
    case VGPU_LIVE_NO_PID: return 0;
    default: return -1;
  }
}


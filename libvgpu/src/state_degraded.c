/*
 * state_degraded.c — see state_degraded.h.
 *
 * Why the alternate file, and refusing when it fails too: a process that counted in a region of
 * its own got the container's whole limit, so N processes started after the tenant replaced the
 * region file by a symlink (or a FIFO, a directory, a file of another version, a full disk) held
 * N x the limit (issue 35, route 12: 3 x (context + 3 GiB) under a 4 GiB limit). Every process of
 * the container now takes the same way to the same alternate file, so they share one limit; a
 * tenant who spoils that file too gets every allocation on a limited device refused. Only a
 * missing directory still counts per process: no file can be shared there, and with HAMi's mount
 * the tenant cannot remove the directory (a path in a missing directory comes from the process's
 * own environment, whose limits it sets anyway).
 */
#include "state_degraded.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vgpu.h"

static int g_degraded_logged;

void vgpu_region_alt_path(const char *path, char *out, size_t cap) {
  size_t n = strlen(path);
  if (n > 6 && strcmp(path + n - 6, ".cache") == 0)
    snprintf(out, cap, "%.*s-libvgpu-v%d.%d.cache", (int)(n - 6), path, VGPU_REGION_MAJOR, VGPU_REGION_MINOR);
  else
    snprintf(out, cap, "%s-libvgpu-v%d.%d", path, VGPU_REGION_MAJOR, VGPU_REGION_MINOR);
}

bool vgpu_degraded_can_share(int rc, int err) { return !(rc == VGPU_REGION_E_IO && err == ENOENT); }

void vgpu_degraded_failsafe(struct vgpu_region_init *init) {
  for (int d = 0; d < VGPU_MAX_DEVICES; d++)
    if (init->limit[d]) init->limit[d] = 1;
}

static void record_degraded(const char *cache_path, const char *cause) {
  char side[4200];
  snprintf(side, sizeof side, "%s.degraded", cache_path);
  int fd = open(side, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ftruncate(fd, 0) == 0) {
    char line[160];
    int n = snprintf(line, sizeof line, "libvgpu-degraded v1 cause=%s pid=%d time=%lld\n", cause, (int)getpid(),
                     (long long)time(NULL));
    if (n > 0 && write(fd, line, (size_t)n) != n) { /* best effort: the stderr line is the record */
    }
  }
  close(fd);
}

static void log_line(const char *path, const char *cause, const char *what, const char *fix, const char *alt,
                     enum vgpu_degraded_outcome outcome) {
  if (__atomic_exchange_n(&g_degraded_logged, 1, __ATOMIC_ACQ_REL)) return;
  if (outcome == VGPU_DEGRADED_SHARED)
    VGPU_LOG_ERROR("shared region %s unusable (%s: %s); DEGRADED: using %s instead, shared by the "
                   "container's processes (one limit; HAMi's monitor does not read it); fix: %s",
                   path, cause, what, alt, fix);
  else if (outcome == VGPU_DEGRADED_REFUSED)
    VGPU_LOG_ERROR("shared region %s unusable (%s: %s)%s%s; DEGRADED: every allocation on a device with a "
                   "memory limit is refused (fail safe: a region of its own would give this process the "
                   "container's whole limit); fix: %s",
                   path, cause, what, alt ? " and so is " : "", alt ? alt : "", fix);
  else
    VGPU_LOG_ERROR("shared region %s unusable (%s: %s); DEGRADED: limits are enforced for this "
                   "process and its children only, not container-wide; fix: %s",
                   path, cause, what, fix);
  record_degraded(path, cause);
}

void vgpu_degraded_log(const char *path, const char *cause, const char *what, const char *fix,
                       enum vgpu_degraded_outcome outcome) {
  log_line(path, cause, what, fix, NULL, outcome);
}

void vgpu_degraded_explain(const char *path, int rc, int err, const char *alt, enum vgpu_degraded_outcome outcome) {
  char what[4400], dir[4096];
  const char *cause, *fix;
  snprintf(dir, sizeof dir, "%s", path);
  struct stat st;
  if (rc == VGPU_REGION_E_NOT_REGULAR && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
    cause = "symlink";
    snprintf(what, sizeof what, "the path is a symbolic link, which is never followed");
    fix = "remove the link so libvgpu can create a regular file there";
  } else if (rc == VGPU_REGION_E_NOT_REGULAR) {
    cause = "not-regular";
    snprintf(what, sizeof what, "the path is not a regular file (FIFO, socket, device or directory)");
    fix = "remove it so libvgpu can create a regular file there";
  } else if (rc == VGPU_REGION_E_NOSPACE) {
    cause = "no-space";
    snprintf(what, sizeof what, "cannot reserve the file's %llu bytes: %s", (unsigned long long)VGPU_REGION_FILE_SIZE,
             strerror(err));
    fix = "free space (or quota) on the filesystem holding the cache directory";
  } else if (rc == VGPU_REGION_E_LOCK) {
    cause = "no-locks";
    snprintf(what, sizeof what, "the filesystem does not support record locks: %s", strerror(err));
    fix = "put the cache on a local filesystem (tmpfs, ext4, xfs)";
  } else if (rc == VGPU_REGION_E_IO && err == ENOENT) {
    cause = "dir-missing";
    snprintf(what, sizeof what, "directory %s does not exist", dirname(dir));
    fix = "mount the cache directory (HAMi: the vgpu hook directory) or point "
          "CUDA_DEVICE_MEMORY_SHARED_CACHE into an existing writable directory";
  } else if (rc == VGPU_REGION_E_VERSION) {
    cause = "version";
    snprintf(what, sizeof what, "a file of another layout, left untouched");
    fix = "delete the old cache file once no process uses it";
  } else {
    cause = "unopenable";
    snprintf(what, sizeof what, "cannot open or map it: %s", strerror(err));
    fix = "make the cache directory and file readable and writable by the container's user";
  }
  log_line(path, cause, what, fix, alt, outcome);
}

/*
 * vgpu-install: the libvgpu installer DaemonSet's only process.
 *
 *   vgpu-install --to=DIR [--preload] [--wait] FILE[:NAME]...
 *
 * Copies each FILE into DIR under NAME (default: its base name), e.g.
 * /opt/vgpu/lib/libvgpu.so:libvgpu.so.v2.7.0 for a device plugin that mounts a versioned name. Each copy is written to a temporary file in DIR,
 * fsync'ed and renamed over the old name, so a process that already mapped the old libvgpu.so
 * keeps its (unlinked) copy and no process ever maps a half-written library: copying over the
 * file in place would truncate pages under running CUDA programs and crash them.
 * --preload also writes DIR/ld.so.preload naming DIR/libvgpu.so (HAMi's device plugin mounts that
 * file as /etc/ld.so.preload). --wait then sleeps until SIGTERM/SIGINT, so the DaemonSet pod
 * stays Running and a new image version re-installs on rollout.
 * Exit codes: 0 ok, 1 I/O error, 2 bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Writes `len` bytes from `src_fd` (or `data` when src_fd < 0) to dir/name atomically. */
static int install_atomically(const char *dir, const char *name, int src_fd, const char *data,
                              size_t len, mode_t mode) {
  char tmp[PATH_MAX], dst[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s/.%s.vgpu-install.%ld", dir, name, (long)getpid()) >= (int)sizeof tmp ||
      snprintf(dst, sizeof dst, "%s/%s", dir, name) >= (int)sizeof dst) {
    fprintf(stderr, "vgpu-install: path too long: %s/%s\n", dir, name);
    return -1;
  }
  int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (out < 0) {
    fprintf(stderr, "vgpu-install: cannot create %s: %s\n", tmp, strerror(errno));
    return -1;
  }
  int rc = 0;
  if (src_fd >= 0) {
    char buf[1 << 16];
    for (;;) {
      ssize_t n = read(src_fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) { rc = -1; break; }
      if (n == 0) break;
      if (write_all(out, buf, (size_t)n) != 0) { rc = -1; break; }
    }
  } else if (write_all(out, data, len) != 0) {
    rc = -1;
  }
  if (rc == 0 && (fchmod(out, mode) != 0 || fsync(out) != 0)) rc = -1;
  if (close(out) != 0) rc = -1;
  if (rc == 0 && rename(tmp, dst) != 0) rc = -1;
  if (rc != 0) {
    fprintf(stderr, "vgpu-install: cannot install %s: %s\n", dst, strerror(errno));
    unlink(tmp);
    return -1;
  }
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  printf("vgpu-install: installed %s\n", dst);
  return 0;
}

int main(int argc, char **argv) {
  const char *to = NULL;
  int preload = 0, wait_forever = 0, first_file = argc;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--to=", 5) == 0) to = argv[i] + 5;
    else if (strcmp(argv[i], "--preload") == 0) preload = 1;
    else if (strcmp(argv[i], "--wait") == 0) wait_forever = 1;
    else if (argv[i][0] == '-') {
      fprintf(stderr, "vgpu-install: unknown option %s\n", argv[i]);
      return 2;
    } else { first_file = i; break; }
  }
  if (to == NULL || to[0] != '/' || first_file >= argc) {
    fprintf(stderr, "usage: vgpu-install --to=/ABSOLUTE/DIR [--preload] [--wait] FILE[:NAME]...\n");
    return 2;
  }
  if (mkdir(to, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "vgpu-install: cannot create %s: %s\n", to, strerror(errno));
    return 1;
  }
  /* Block the stop signals before anything else so none is lost between install and wait. */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigprocmask(SIG_BLOCK, &stop, NULL);

  const char *library = NULL;
  for (int i = first_file; i < argc; i++) {
    char src[PATH_MAX];
    if (snprintf(src, sizeof src, "%s", argv[i]) >= (int)sizeof src) {
      fprintf(stderr, "vgpu-install: path too long: %s\n", argv[i]);
      return 2;
    }
    /* FILE:NAME — the colon must come after the last slash, so paths with colons still work. */
    const char *name = NULL;
    char *colon = strrchr(src, ':');
    if (colon != NULL && colon > strrchr(src, '/')) {
      *colon = '\0';
      name = colon + 1;
    }
    if (name == NULL) name = basename(src);
    if (name[0] == '\0' || strchr(name, '/') != NULL || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
      fprintf(stderr, "vgpu-install: bad target name in %s\n", argv[i]);
      return 2;
    }
    int fd = open(src, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      fprintf(stderr, "vgpu-install: cannot read %s: %s\n", src, fd < 0 ? strerror(errno) : "not a regular file");
      return 1;
    }
    int rc = install_atomically(to, name, fd, NULL, 0, st.st_mode & 0755);
    close(fd);
    if (rc != 0) return 1;
    if (strcmp(name, "libvgpu.so") == 0) library = name;
  }
  if (preload) {
    if (library == NULL) {
      fprintf(stderr, "vgpu-install: --preload needs a file installed as libvgpu.so\n");
      return 2;
    }
    char line[PATH_MAX + 16];
    int n = snprintf(line, sizeof line, "%s/libvgpu.so\n", to);
    if (install_atomically(to, "ld.so.preload", -1, line, (size_t)n, 0644) != 0) return 1;
  }
  fflush(stdout);
  if (wait_forever) {
    int sig = 0;
    sigwait(&stop, &sig);
    printf("vgpu-install: signal %d, exiting\n", sig);
  }
  return 0;
}

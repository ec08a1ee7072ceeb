/*
 * config_adopt.c — the process's configuration: the environment (config.c) and, for a process
 * started without the container's environment, the limits of the container's region (README
 * "Limits survive a stripped environment").
 *
 * sshd sessions, `su -`, daemons that clear their environment and Docker-in-Docker start processes
 * without CUDA_DEVICE_MEMORY_LIMIT* / CUDA_DEVICE_SM_LIMIT*; where libvgpu is loaded anyway (HAMi
 * mounts /etc/ld.so.preload) such a process used to run unlimited. HAMi bind-mounts the container's
 * own directory of the node (<hook path>/vgpu/containers/<pod>_<container>/) onto VGPU_HOOK_DIR in
 * the container, and the container's region is the one `*.cache` file there. A process with no
 * limit variable at all adopts that region: its path and the limits it holds.
 *
 * Everything in the directory is tenant-written: the directory and the file are opened without
 * following links and without blocking, the file's type is checked before and after opening, the
 * listing and every read are bounded. A region that is there but cannot be used (not a regular
 * file, unreadable, not a region, several candidates, too many entries) never means "unlimited":
 * the process gets the fail-safe limits in a process-local region.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "region.h"
#include "vgpu.h"

#define ADOPT_MAX_ENTRIES 512     /* directory entries looked at; more: unusable */
#define ADOPT_DIRENT_BUF 4096
#define ADOPT_MAX_CANDIDATES 4
#define ADOPT_NAME_MAX 255
#define ADOPT_RETRY_NS 10000000ull /* a region being created: look again after 10 ms */

struct dirent64_raw { /* getdents64(2); the glibc wrapper is newer than the library's floor */
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

static bool is_candidate(const char *name, size_t len) {
  return len > 6 && len <= ADOPT_NAME_MAX && name[0] != '.' && strcmp(name + len - 6, ".cache") == 0;
}

static int unusable(struct vgpu_adopted *out, const char *fmt, const char *arg) {
  snprintf(out->why, sizeof out->why, fmt, arg);
  return VGPU_ADOPT_UNUSABLE;
}

/* Lists the candidates; returns their count, or -1 with out->why set. */
static int list_candidates(int dfd, char names[ADOPT_MAX_CANDIDATES][ADOPT_NAME_MAX + 1],
                           struct vgpu_adopted *out) {
  _Alignas(8) char buf[ADOPT_DIRENT_BUF];
  int entries = 0, found = 0;
  for (;;) {
    long n = syscall(SYS_getdents64, dfd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      unusable(out, "cannot list it: %s", strerror(errno));
      return -1;
    }
    if (n == 0) return found;
    for (long off = 0; off < n;) {
      const struct dirent64_raw *d = (const struct dirent64_raw *)(void *)(buf + off);
      size_t room = (size_t)(n - off), head = offsetof(struct dirent64_raw, d_name);
      if (room <= head || d->d_reclen <= head || d->d_reclen > room) {
        unusable(out, "%s", "its listing is malformed");
        return -1;
      }
      size_t len = strnlen(d->d_name, d->d_reclen - head);
      off += d->d_reclen;
      if (++entries > ADOPT_MAX_ENTRIES) {
        snprintf(out->why, sizeof out->why, "it holds more than %d entries", ADOPT_MAX_ENTRIES);
        return -1;
      }
      if (!is_candidate(d->d_name, len)) continue;
      if (found < ADOPT_MAX_CANDIDATES) memcpy(names[found], d->d_name, len + 1);
      found++;
    }
  }
}

/* "<x>-libvgpu-v1.2.cache" beside "<x>.cache": the file libvgpu uses when <x>.cache has another
 * layout (state.c alt_path). Returns the index of the one to use, or -1. */
static int alt_of_pair(char names[ADOPT_MAX_CANDIDATES][ADOPT_NAME_MAX + 1]) {
  char alt[ADOPT_NAME_MAX + 64];
  for (int i = 0; i < 2; i++) {
    size_t n = strlen(names[i]);
    snprintf(alt, sizeof alt, "%.*s-libvgpu-v%d.%d.cache", (int)(n - 6), names[i],
             VGPU_REGION_MAJOR, VGPU_REGION_MINOR);
    if (strcmp(alt, names[1 - i]) == 0) return 1 - i;
  }
  return -1;
}

static bool read_fully(int fd, void *dst, size_t len, off_t off) {
  ssize_t n;
  do {
    n = pread(fd, dst, len, off);
  } while (n < 0 && errno == EINTR);
  return n == (ssize_t)len;
}

/* Takes a read lock on the init range: a creator holds the write lock until the header is
 * complete (libvgpu and HAMi-core alike). Bounded by `deadline`; false only when a holder kept it
 * that long (a filesystem without record locks is read without one). */
static bool init_read_lock(int fd, uint64_t deadline) {
  struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0,
                     .l_len = (off_t)sizeof(vgpu_region_t)};
  while (fcntl(fd, F_SETLK, &fl) != 0) {
    if (errno != EAGAIN && errno != EACCES && errno != EINTR) return true;
    if (vgpu_now_monotonic_ns() >= deadline) return false;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return true;
}

static void init_unlock(int fd) {
  struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = 0,
                     .l_len = (off_t)sizeof(vgpu_region_t)};
  fcntl(fd, F_SETLK, &fl);
}

/* Reads the limits of the region open at `fd` (any layout HAMi-core ever wrote). */
static int read_limits(int fd, struct vgpu_adopted *out) {
  uint64_t deadline = vgpu_now_monotonic_ns() + vgpu_region_wait_ns;
  for (;;) {
    struct stat st;
    uint8_t head[12];
    const char *why = "the file changed while it was read";
    bool locked = init_read_lock(fd, deadline);
    const vgpu_layout_t *lay = NULL;
    if (locked && fstat(fd, &st) == 0 && (uint64_t)st.st_size <= VGPU_MAX_REGION_FILE_SIZE) {
      why = "file too small to be a region";
      if (st.st_size >= (off_t)sizeof head && read_fully(fd, head, sizeof head, 0))
        lay = vgpu_detect_layout(head, (size_t)st.st_size, &why);
    } else if (locked) {
      why = "file too large to be a region";
    } else {
      why = "its init lock stayed held (a creator stopped half-way?)";
    }
    bool ok = lay && (uint64_t)st.st_size >= lay->off_sm_limit + sizeof out->sm_limit &&
              read_fully(fd, out->mem_limit, sizeof out->mem_limit, (off_t)lay->off_limit) &&
              read_fully(fd, out->sm_limit, sizeof out->sm_limit, (off_t)lay->off_sm_limit);
    if (locked) init_unlock(fd);
    if (ok) return VGPU_ADOPT_OK;
    /* A creator between open(O_CREAT) and taking its init lock: look again for a while. */
    if (!locked || vgpu_now_monotonic_ns() >= deadline) return unusable(out, "not a region: %s", why);
    struct timespec ts = {0, (long)ADOPT_RETRY_NS};
    nanosleep(&ts, NULL);
  }
}

int vgpu_adopt_scan(const char *hook_dir, struct vgpu_adopted *out) {
  memset(out, 0, sizeof *out);
  int dfd = open(hook_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (dfd < 0) {
    /* No directory (not a HAMi container), or a link or file where HAMi mounts one (then HAMi
     * did not mount it: a mount point cannot be replaced from inside the container). */
    if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) return VGPU_ADOPT_NONE;
    return unusable(out, "cannot open the directory: %s", strerror(errno));
  }
  char names[ADOPT_MAX_CANDIDATES][ADOPT_NAME_MAX + 1];
  int n = list_candidates(dfd, names, out);
  int pick = n == 1 ? 0 : (n == 2 ? alt_of_pair(names) : -1);
  int rc = VGPU_ADOPT_NONE;
  if (n < 0) {
    rc = VGPU_ADOPT_UNUSABLE;
  } else if (n > 0) {
    snprintf(out->path, sizeof out->path, "%s/%s", hook_dir, names[0]);
    if (pick < 0) {
      char count[16];
      snprintf(count, sizeof count, "%d", n);
      rc = unusable(out, "%s region files (*.cache) where there is one per container", count);
    } else {
      snprintf(out->path, sizeof out->path, "%s/%s", hook_dir, names[pick]);
      rc = VGPU_ADOPT_UNUSABLE;
      struct stat before, st;
      if (fstatat(dfd, names[pick], &before, AT_SYMLINK_NOFOLLOW) != 0) {
        unusable(out, "cannot stat it: %s", strerror(errno));
      } else if (!S_ISREG(before.st_mode)) {
        unusable(out, "%s", S_ISLNK(before.st_mode) ? "it is a symbolic link" : "not a regular file");
      } else {
        int fd = openat(dfd, names[pick], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
          unusable(out, "cannot open it: %s", strerror(errno));
        } else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != before.st_ino ||
                   st.st_dev != before.st_dev) {
          unusable(out, "%s", "it was replaced while it was opened");
        } else {
          rc = read_limits(fd, out);
        }
        if (fd >= 0) close(fd);
      }
    }
  }
  close(dfd);
  return rc;
}

void vgpu_config_adopt(struct vgpu_config *cfg, const char *hook_dir) {
  if (cfg->env_has_limits) return; /* the environment's contract, as before */
  struct vgpu_adopted a;
  int rc = vgpu_adopt_scan(hook_dir, &a);
  if (rc == VGPU_ADOPT_NONE) return; /* no region and no limits: unlimited, as before */
  if (cfg->cache_path_from_env && strcmp(cfg->cache_path, a.path) != 0)
    VGPU_LOG_WARN("CUDA_DEVICE_MEMORY_SHARED_CACHE=\"%.256s\" without any limit variable: ignored; "
                  "the container's region in %s is used",
                  cfg->cache_path, hook_dir);
  if (rc == VGPU_ADOPT_OK) {
    snprintf(cfg->cache_path, sizeof cfg->cache_path, "%s", a.path);
    for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
      cfg->mem_limit[d] = a.mem_limit[d];
      cfg->sm_limit[d] = a.sm_limit[d] == 0 || a.sm_limit[d] > 100 ? 100 : a.sm_limit[d];
    }
    cfg->adopted = true;
    VGPU_LOG_INFO("no limit variable in the environment: using the container's region %s and its "
                  "limits",
                  a.path);
    return;
  }
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) {
    cfg->mem_limit[d] = VGPU_FAILSAFE_MEM_LIMIT;
    cfg->sm_limit[d] = VGPU_FAILSAFE_SM_LIMIT;
  }
  cfg->mem_failsafe_mask = cfg->sm_failsafe_mask = (1u << VGPU_MAX_DEVICES) - 1;
  cfg->no_shared_region = true; /* never the default path either: a tenant may have made it */
  VGPU_LOG_ERROR("no limit variable in the environment, and the container's region in %s cannot be "
                 "used (%s): every allocation is refused and the SM share is 1%% (fail safe); fix: "
                 "start the process with the container's environment, or repair %s",
                 hook_dir, a.why, hook_dir);
}

static struct vgpu_config g_config;
static pthread_once_t g_config_once = PTHREAD_ONCE_INIT;

static const char *real_getenv(const char *name) { return getenv(name); }

static void config_init(void) {
  /* The log level first, so parse errors of the other variables honour it. */
  const char *lv = getenv("LIBCUDA_LOG_LEVEL");
  uint64_t v = 0;
  if (lv && vgpu_parse_uint(lv, &v) == VGPU_PARSE_OK && v <= 4) vgpu_log_level = (int)v;
  vgpu_config_parse(&g_config, real_getenv);
  vgpu_log_level = g_config.log_level;
  /* Before any region is opened: closing the scanned file drops this process's record locks on
   * it, which must not be any it holds. */
  vgpu_config_adopt(&g_config, VGPU_HOOK_DIR);
}

const struct vgpu_config *vgpu_config_get(void) {
  pthread_once(&g_config_once, config_init);
  return &g_config;
}

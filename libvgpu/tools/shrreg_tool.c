/*
 * shrreg-tool — inspect and repair a container's shared region from inside the container.
 *
 * Runs in a tenant container with no JVM: reads every region layout HAMi-core ever wrote (L0a, L0b,
 * v1.1, the mislabelled v1.1-broken, v1.2 with or without our extension block), writes only v1.1 and
 * v1.2. Process liveness is judged in the tool's own pid namespace from the slot's container pid
 * (HAMi semantics); `--host` switches to the recorded host pids for use from the node.
 *
 * The region bytes, the layout table, the reader, liveness and the slot-table lock are the
 * library's (src/region.c, linked in statically): this file is the command line, the judgement of
 * what to change and the output.
 *
 * Threading: single-threaded. Slot-table edits (cleanup) happen under the region's slot lock.
 * A SIGBUS from a file that shrinks under the mapping is turned into an I/O error, not a crash.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "region.h"
#include "vgpu.h"

#ifndef SHRREG_TOOL_VERSION
#define SHRREG_TOOL_VERSION "0.1.0"
#endif

/* Exit codes: distinct per failure class so scripts can branch on them. */
enum {
  EXIT_OK = 0,
  EXIT_FAILED = 1,         /* the operation ran but found a problem it could not fix */
  EXIT_USAGE = 2,          /* bad arguments */
  EXIT_NO_FILE = 3,        /* region file missing */
  EXIT_PERMISSION = 4,     /* permission denied */
  EXIT_BAD_LAYOUT = 5,     /* not a region / unknown layout or version */
  EXIT_READ_ONLY = 6,      /* layout the tool never writes (L0a, L0b, v1.1-broken) */
  EXIT_HOLDER_ALIVE = 7,   /* force-unlock refused: the holder is alive or cannot be judged */
  EXIT_LOCK_BUSY = 8,      /* cleanup could not take the slot-table lock in time */
  EXIT_IO = 9,             /* I/O error, or the file changed under us */
  EXIT_CHANGED = 10,       /* --expect-inode: the path no longer names the file the caller judged */
  EXIT_BAD_SEMAPHORE = 11  /* the region's slot-table semaphore is not a usable semaphore */
};

#define DEFAULT_CACHE_PATH "/tmp/cudevshr.cache"
#define LOCK_TIMEOUT_MS 3000
#define DEFAULT_OBSERVE_MS 2000

/* ---------------------------------------------------------------------------------------------- */
/* Options */

typedef enum { CMD_NONE, CMD_INSPECT, CMD_VERSION, CMD_SET_SM, CMD_SET_MEM, CMD_CLEANUP, CMD_UNLOCK, CMD_HELP } command_t;

typedef struct {
  command_t cmd;
  const char *file;
  const char *proc_root;
  int device; /* -1: all */
  int json;
  int host_pids;
  int npids;            /* --pids: slots the caller judged dead (node-side use) */
  int pids[VGPU_MAX_PROCS];
  int64_t pid_hostpids[VGPU_MAX_PROCS]; /* -1: not given */
  int64_t pid_starts[VGPU_MAX_PROCS];   /* -1: not given */
  int holder;           /* --holder: the dead holder the caller judged, 0 when not given */
  int observe_ms;
  int lock_timeout_ms;
  int set_dev;
  uint64_t set_value;
  int expect_inode;     /* --expect-inode given: the open fd must be exactly this file */
  uint64_t expect_dev;
  uint64_t expect_ino;
} options_t;

static const char *g_prog = "shrreg-tool";

static void usage(FILE *out) {
  fprintf(out,
          "Usage: shrreg-tool [--file PATH] [--json] COMMAND\n"
          "Inspect or repair this container's GPU shared region (HAMi-core / libvgpu).\n"
          "\n"
          "Commands:\n"
          "  --inspect [--device N]     show devices, limits, usage, processes, lock (default)\n"
          "  --version                  tool, library and region versions\n"
          "  --set-sm-limit DEV PCT     set device DEV's SM limit to PCT (0-100, 0 or 100 = none)\n"
          "  --set-mem-limit DEV SIZE   set device DEV's memory limit (bytes; k/m/g/t or Ki/Mi/Gi/Ti\n"
          "                             suffix; 0 = unlimited)\n"
          "  --cleanup [--device N]     drop slots of processes that are gone (optionally only those\n"
          "                             holding memory on device N)\n"
          "  --force-unlock [--device N]  release the slot-table lock of a dead holder; refuses while\n"
          "                             the holder is alive\n"
          "  --help                     this text\n"
          "\n"
          "Options:\n"
          "  --file PATH        region file (default: $CUDA_DEVICE_MEMORY_SHARED_CACHE, else %s)\n"
          "  --json             machine-readable output\n"
          "  --host             judge liveness by recorded host pids (when run on the node)\n"
          "  --pids P[:H[:T]],...  --cleanup: free exactly these container pids' slots (the node-side\n"
          "                     `vgpu-exporter cleanup` judged them dead); with H (recorded host pid)\n"
          "                     and T (recorded start ticks) only if the slot is still unchanged\n"
          "  --holder PID       --force-unlock: release only if PID holds the lock; the caller has\n"
          "                     judged PID dead in the container's pid namespace\n"
          "  --proc-root DIR    procfs to judge liveness from (default /proc)\n"
          "  --observe-ms MS    how long --force-unlock watches a lock with no recorded holder (default %d)\n"
          "  --lock-timeout-ms MS  how long --cleanup waits for the slot-table lock (default %d)\n"
          "  --expect-inode DEV:INO  act only if --file opens (without following a symlink) the regular,\n"
          "                     singly linked file with this st_dev:st_ino (the node-side caller's\n"
          "                     verdict was taken on that file); otherwise exit 10 and change nothing\n"
          "\n"
          "Exit codes: 0 ok, 1 problem found, 2 bad arguments, 3 file missing, 4 permission denied,\n"
          "5 unknown layout, 6 layout is read-only, 7 lock holder alive, 8 lock busy, 9 I/O error,\n"
          "10 the file is not the one --expect-inode names, 11 the region's slot-table semaphore is\n"
          "corrupt (--cleanup and --force-unlock refuse to use it; nothing changed).\n",
          DEFAULT_CACHE_PATH, DEFAULT_OBSERVE_MS, LOCK_TIMEOUT_MS);
}

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", g_prog);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return code;
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  unsigned long long v;
  if (s == NULL || *s == '\0' || !isdigit((unsigned char)*s)) return -1;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0') return -1;
  *out = v;
  return 0;
}

static int parse_int_range(const char *s, int lo, int hi, int *out) {
  uint64_t v;
  if (parse_u64(s, &v) != 0 || v < (uint64_t)lo || v > (uint64_t)hi) return -1;
  *out = (int)v;
  return 0;
}

/* Sizes: plain bytes, k/m/g/t (HAMi's CUDA_DEVICE_MEMORY_LIMIT style) or Ki/Mi/Gi/Ti, all binary. */
static int parse_size(const char *s, uint64_t *out) {
  char digits[32];
  size_t n = 0;
  const char *suffix;
  uint64_t v;
  unsigned shift = 0;
  if (s == NULL) return -1;
  while (isdigit((unsigned char)s[n])) n++;
  if (n == 0 || n >= sizeof digits) return -1;
  memcpy(digits, s, n);
  digits[n] = '\0';
  if (parse_u64(digits, &v) != 0) return -1;
  suffix = s + n;
  if (*suffix != '\0') {
    switch (tolower((unsigned char)suffix[0])) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      case 't': shift = 40; break;
      default: return -1;
    }
    suffix++;
    if (*suffix == 'i' || *suffix == 'I') suffix++;
    if (*suffix == 'b' || *suffix == 'B') suffix++;
    if (*suffix != '\0') return -1;
  }
  if (shift > 0 && v > (UINT64_MAX >> shift)) return -1;
  *out = v << shift;
  return 0;
}

static int set_command(options_t *o, command_t c) {
  if (o->cmd != CMD_NONE && o->cmd != c) return -1;
  o->cmd = c;
  return 0;
}

static int parse_args(int argc, char **argv, options_t *o) {
  int i;
  memset(o, 0, sizeof *o);
  o->device = -1;
  o->observe_ms = DEFAULT_OBSERVE_MS;
  o->lock_timeout_ms = LOCK_TIMEOUT_MS;
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    command_t c = CMD_NONE;
    if (strcmp(a, "--inspect") == 0 || strcmp(a, "--print") == 0) c = CMD_INSPECT;
    else if (strcmp(a, "--version") == 0) c = CMD_VERSION;
    else if (strcmp(a, "--cleanup") == 0) c = CMD_CLEANUP;
    else if (strcmp(a, "--force-unlock") == 0) c = CMD_UNLOCK;
    else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) c = CMD_HELP;
    else if (strcmp(a, "--set-sm-limit") == 0 || strcmp(a, "--set-mem-limit") == 0) {
      int is_sm = a[6] == 's';
      if (i + 2 >= argc) return fail(EXIT_USAGE, "%s needs DEV and %s", a, is_sm ? "PCT" : "SIZE");
      if (parse_int_range(argv[i + 1], 0, VGPU_MAX_DEVICES - 1, &o->set_dev) != 0)
        return fail(EXIT_USAGE, "%s: device '%s' is not an index 0-%d", a, argv[i + 1], VGPU_MAX_DEVICES - 1);
      if (is_sm) {
        int pct;
        if (parse_int_range(argv[i + 2], 0, 100, &pct) != 0)
          return fail(EXIT_USAGE, "--set-sm-limit: '%s' is not a percentage 0-100", argv[i + 2]);
        o->set_value = (uint64_t)pct;
      } else if (parse_size(argv[i + 2], &o->set_value) != 0) {
        return fail(EXIT_USAGE, "--set-mem-limit: '%s' is not a size (e.g. 4096m, 8Gi, 1073741824)", argv[i + 2]);
      }
      c = is_sm ? CMD_SET_SM : CMD_SET_MEM;
      i += 2;
    } else if (strcmp(a, "--device") == 0) {
      if (i + 1 >= argc || parse_int_range(argv[i + 1], 0, VGPU_MAX_DEVICES - 1, &o->device) != 0)
        return fail(EXIT_USAGE, "--device needs an index 0-%d", VGPU_MAX_DEVICES - 1);
      i++;
      continue;
    } else if (strcmp(a, "--file") == 0 || strcmp(a, "-f") == 0) {
      if (i + 1 >= argc || argv[i + 1][0] == '\0') return fail(EXIT_USAGE, "--file needs a path");
      o->file = argv[++i];
      continue;
    } else if (strcmp(a, "--proc-root") == 0) {
      if (i + 1 >= argc || argv[i + 1][0] == '\0') return fail(EXIT_USAGE, "--proc-root needs a directory");
      o->proc_root = argv[++i];
      continue;
    } else if (strcmp(a, "--observe-ms") == 0) {
      if (i + 1 >= argc || parse_int_range(argv[i + 1], 0, 600000, &o->observe_ms) != 0)
        return fail(EXIT_USAGE, "--observe-ms needs milliseconds 0-600000");
      i++;
      continue;
    } else if (strcmp(a, "--lock-timeout-ms") == 0) {
      if (i + 1 >= argc || parse_int_range(argv[i + 1], 0, 600000, &o->lock_timeout_ms) != 0)
        return fail(EXIT_USAGE, "--lock-timeout-ms needs milliseconds 0-600000");
      i++;
      continue;
    } else if (strcmp(a, "--json") == 0) {
      o->json = 1;
      continue;
    } else if (strcmp(a, "--pids") == 0) {
      char *list;
      char *tok;
      char *save = NULL;
      if (i + 1 >= argc) return fail(EXIT_USAGE, "--pids needs a comma-separated list of container pids");
      list = strdup(argv[++i]);
      if (list == NULL) return fail(EXIT_IO, "out of memory");
      for (tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        /* PID[:HOSTPID[:START_TICKS]]: the slot as the caller saw it; freed only if unchanged. */
        char *f1 = strchr(tok, ':');
        int bad = 0;
        uint64_t v;
        if (o->npids >= VGPU_MAX_PROCS) {
          int rc = fail(EXIT_USAGE, "--pids: more than %d entries", VGPU_MAX_PROCS);
          free(list);
          return rc;
        }
        o->pid_hostpids[o->npids] = -1;
        o->pid_starts[o->npids] = -1;
        if (f1 != NULL) {
          char *f2;
          *f1++ = '\0';
          f2 = strchr(f1, ':');
          if (f2 != NULL) *f2++ = '\0';
          if (parse_u64(f1, &v) != 0 || v > INT32_MAX) bad = 1;
          else o->pid_hostpids[o->npids] = (int64_t)v;
          if (f2 != NULL) {
            if (parse_u64(f2, &v) != 0 || v > INT64_MAX) bad = 1;
            else o->pid_starts[o->npids] = (int64_t)v;
          }
        }
        if (bad || parse_int_range(tok, 1, INT32_MAX, &o->pids[o->npids]) != 0) {
          int rc = fail(EXIT_USAGE, "--pids: '%s' is not a pid", tok); /* tok lives in list: report first */
          free(list);
          return rc;
        }
        o->npids++;
      }
      free(list);
      if (o->npids == 0) return fail(EXIT_USAGE, "--pids needs at least one pid");
      continue;
    } else if (strcmp(a, "--holder") == 0) {
      if (i + 1 >= argc || parse_int_range(argv[i + 1], 1, INT32_MAX, &o->holder) != 0)
        return fail(EXIT_USAGE, "--holder needs a pid");
      i++;
      continue;
    } else if (strcmp(a, "--host") == 0) {
      o->host_pids = 1;
      continue;
    } else if (strcmp(a, "--expect-inode") == 0) {
      char buf[64];
      char *colon;
      if (i + 1 >= argc || strlen(argv[i + 1]) >= sizeof buf)
        return fail(EXIT_USAGE, "--expect-inode needs DEV:INO (decimal st_dev and st_ino)");
      memcpy(buf, argv[i + 1], strlen(argv[i + 1]) + 1);
      colon = strchr(buf, ':');
      if (colon == NULL) return fail(EXIT_USAGE, "--expect-inode needs DEV:INO (decimal st_dev and st_ino)");
      *colon = '\0';
      if (parse_u64(buf, &o->expect_dev) != 0 || parse_u64(colon + 1, &o->expect_ino) != 0)
        return fail(EXIT_USAGE, "--expect-inode needs DEV:INO (decimal st_dev and st_ino)");
      o->expect_inode = 1;
      i++;
      continue;
    } else {
      return fail(EXIT_USAGE, "unknown argument '%s' (try --help)", a);
    }
    if (set_command(o, c) != 0) return fail(EXIT_USAGE, "one command at a time ('%s' conflicts)", a);
  }
  if (o->cmd == CMD_NONE) o->cmd = CMD_INSPECT;
  if (o->npids > 0 && o->cmd != CMD_CLEANUP) return fail(EXIT_USAGE, "--pids applies to --cleanup only");
  if (o->holder != 0 && o->cmd != CMD_UNLOCK) return fail(EXIT_USAGE, "--holder applies to --force-unlock only");
  if (o->device >= 0 && o->cmd != CMD_INSPECT && o->cmd != CMD_CLEANUP && o->cmd != CMD_UNLOCK)
    return fail(EXIT_USAGE, "--device applies to --inspect, --cleanup and --force-unlock only");
  if (o->file == NULL) {
    const char *env = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
    o->file = (env != NULL && env[0] != '\0') ? env : DEFAULT_CACHE_PATH;
  }
  if (o->proc_root == NULL) o->proc_root = "/proc";
  return EXIT_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* Process liveness: the library's judgement of <proc_root>/<pid>/stat */

typedef enum vgpu_liveness liveness_t;

/* ---------------------------------------------------------------------------------------------- */
/* The mapped region */

typedef struct {
  const char *path;
  struct vgpu_region_view v; /* the library's multi-layout view */
} region_t;

static sigjmp_buf g_bus_jmp;
static volatile sig_atomic_t g_bus_armed;
/* For the SIGBUS path: the region mapped now (to tell "shrank" from "could not get a page"), and
 * the region whose lock this process holds (released there, so a fault never strands the lock). */
static region_t *volatile g_mapped;
static region_t *volatile g_held;

static void on_sigbus(int sig) {
  (void)sig;
  if (g_bus_armed) siglongjmp(g_bus_jmp, 1);
  _exit(EXIT_IO);
}

static int errno_exit(int e) {
  if (e == ENOENT || e == ENOTDIR) return EXIT_NO_FILE;
  if (e == EACCES || e == EPERM || e == EROFS) return EXIT_PERMISSION;
  return EXIT_IO;
}

/* A copy of the options, taken before any command opens the region (for --expect-inode). */
static options_t g_expect_opts;
static const options_t *g_expect;

static int region_open(region_t *r, const char *path, int rw) {
  struct stat st;
  const char *why = NULL;
  int nofollow = (g_expect != NULL && g_expect->expect_inode) ? O_NOFOLLOW : 0;
  int fd;
  int rc;
  memset(r, 0, sizeof *r);
  r->path = path;
  r->v.map.fd = -1;
  /* O_NONBLOCK: a FIFO planted at the path must not hang the tool. O_NOFOLLOW when the node-side
   * caller names the file it judged: a tenant may have swapped the path for a link since. */
  fd = open(path, (rw ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | nofollow);
  if (fd < 0 && nofollow && errno == ELOOP)
    return fail(EXIT_CHANGED, "%s: is now a symbolic link, not the file the caller judged; nothing changed", path);
  if (fd < 0) {
    int e = errno;
    int code = errno_exit(e);
    if (code == EXIT_NO_FILE)
      return fail(code, "%s: no such region file (set --file or CUDA_DEVICE_MEMORY_SHARED_CACHE; the file "
                        "appears after the container's first CUDA/NVML call)", path);
    if (code == EXIT_PERMISSION)
      return fail(code, "%s: permission denied opening %s (%s)", path, rw ? "read-write" : "read-only", strerror(e));
    return fail(code, "%s: %s", path, strerror(e));
  }
  r->v.map.fd = fd;
  if (fstat(fd, &st) != 0) return fail(EXIT_IO, "%s: %s", path, strerror(errno));
  if (nofollow && (!S_ISREG(st.st_mode) || st.st_nlink != 1 || (uint64_t)st.st_dev != g_expect->expect_dev ||
                   (uint64_t)st.st_ino != g_expect->expect_ino))
    return fail(EXIT_CHANGED,
                "%s: not the file the caller judged (expected %llu:%llu, found %llu:%llu, %s, %lu link(s)); "
                "nothing changed",
                path, (unsigned long long)g_expect->expect_dev, (unsigned long long)g_expect->expect_ino,
                (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                S_ISREG(st.st_mode) ? "regular" : "not regular", (unsigned long)st.st_nlink);
  rc = vgpu_region_view_map(&r->v, fd, rw, &why);
  if (r->v.base != NULL) g_mapped = r;
  switch (rc) {
    case VGPU_VIEW_OK: return EXIT_OK;
    case VGPU_VIEW_E_NOT_REGULAR: return fail(EXIT_BAD_LAYOUT, "%s: not a regular file", path);
    case VGPU_VIEW_E_TOO_SMALL:
      return fail(EXIT_BAD_LAYOUT, "%s: %zu bytes is too small to be a region", path, r->v.size);
    case VGPU_VIEW_E_TOO_LARGE:
      return fail(EXIT_BAD_LAYOUT, "%s: %zu bytes is too large to be a region", path, r->v.size);
    case VGPU_VIEW_E_MMAP: {
      int e = errno;
      return fail(errno_exit(e) == EXIT_PERMISSION ? EXIT_PERMISSION : EXIT_IO, "%s: mmap: %s", path, strerror(e));
    }
    case VGPU_VIEW_E_LAYOUT:
      return fail(EXIT_BAD_LAYOUT, "%s: unknown layout: %s (%zu bytes)", path, why, r->v.size);
    default: return fail(EXIT_IO, "%s: %s", path, strerror(errno));
  }
}

static void region_close(region_t *r) {
  if (g_mapped == r) g_mapped = NULL;
  vgpu_region_view_close(&r->v);
}

static void copy_clean(char *dst, size_t cap, const char *src, size_t max) {
  size_t i;
  size_t o = 0;
  for (i = 0; i < max && src[i] != '\0' && o + 1 < cap; i++) {
    unsigned char c = (unsigned char)src[i];
    dst[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  }
  dst[o] = '\0';
}

/* ---------------------------------------------------------------------------------------------- */
/* Snapshot: what --inspect shows and --cleanup decides on */

typedef struct vgpu_slot_usage dev_usage_t;
typedef struct vgpu_slot_view slot_view_t;

typedef struct {
  int index;
  char uuid[VGPU_UUID_LEN + 1];
  uint64_t limit;
  uint64_t sm_limit;
  uint64_t used;      /* live slots only, as HAMi's monitor sums */
  uint64_t dead_used; /* held by slots whose process is gone */
  int tasks;
} dev_view_t;

typedef enum vgpu_lock_state lock_state_t;
typedef struct vgpu_lock_view lock_view_t;

typedef struct {
  struct vgpu_view_header h;
  int raw_device_num;
  int device_count; /* shown devices */
  int inferred_devices;
  dev_view_t dev[VGPU_MAX_DEVICES];
  slot_view_t *slots;
  int nslots;
  int running, suspended, dead, torn;
  lock_view_t lock;
} snapshot_t;

static int live_pid_of(const options_t *o, const slot_view_t *s) { return o->host_pids ? s->hostpid : s->pid; }

static int device_in_use(const slot_view_t *s, int d) {
  return s->dev[d].total != 0 || s->dev[d].monitor != 0 || s->dev[d].sm_util != 0;
}

static void read_lock(const region_t *r, const options_t *o, lock_view_t *lk);

static int take_snapshot(const region_t *r, const options_t *o, snapshot_t *snap) {
  int attempt;
  int d;
  int i;
  memset(snap, 0, sizeof *snap);
  vgpu_region_view_header(&r->v, &snap->h);
  snap->raw_device_num = snap->h.device_num > (uint64_t)INT32_MAX ? INT32_MAX : (int)snap->h.device_num;
  snap->slots = calloc(VGPU_MAX_PROCS, sizeof *snap->slots);
  if (snap->slots == NULL) return fail(EXIT_IO, "out of memory");

  /* Devices: device_num once NVML has run; extra devices only where slots record usage (limits
   * are no evidence: CUDA_DEVICE_MEMORY_LIMIT fills all 16 entries). Before NVML ran, device 0
   * stands in when it has a limit. */
  snap->device_count = vgpu_region_view_device_num(&r->v);
  if (snap->device_count == 0 && (vgpu_region_view_limit(&r->v, false, 0) != 0 || vgpu_region_view_limit(&r->v, true, 0) != 0)) {
    snap->inferred_devices = 1;
    snap->device_count = 1;
  }

  /* Slot pass, redone once when proc_num moved (a compaction raced us). */
  for (attempt = 0; attempt < 2; attempt++) {
    int n = vgpu_region_view_proc_num(&r->v);
    snap->nslots = 0;
    for (i = 0; i < n; i++) {
      slot_view_t *s = &snap->slots[snap->nslots];
      int j;
      int dup = 0;
      vgpu_region_view_read_slot(&r->v, i, s);
      if (s->pid == 0) continue;
      for (j = 0; j < snap->nslots; j++)
        if (snap->slots[j].pid == s->pid) dup = 1;
      if (dup) continue;
      snap->nslots++;
    }
    if (vgpu_region_view_proc_num(&r->v) == n) break;
  }
  for (i = 0; i < snap->nslots; i++) {
    slot_view_t *s = &snap->slots[i];
    s->live = vgpu_proc_liveness(o->proc_root, live_pid_of(o, s), s->start_ticks, NULL);
    if (vgpu_liveness_dead(s->live)) snap->dead++;
    else if (s->status == VGPU_SLOT_SUSPENDED) snap->suspended++;
    else if (s->status == VGPU_SLOT_RUNNING) snap->running++;
    if (s->torn) snap->torn++;
    for (d = 0; d < VGPU_MAX_DEVICES; d++)
      if (device_in_use(s, d) && d >= snap->device_count) {
        snap->device_count = d + 1;
        snap->inferred_devices = 1;
      }
  }
  for (d = 0; d < snap->device_count; d++) {
    dev_view_t *dv = &snap->dev[d];
    dv->index = d;
    copy_clean(dv->uuid, sizeof dv->uuid, vgpu_region_view_uuid(&r->v, d), VGPU_UUID_LEN);
    dv->limit = vgpu_region_view_limit(&r->v, false, d);
    dv->sm_limit = vgpu_region_view_limit(&r->v, true, d);
    for (i = 0; i < snap->nslots; i++) {
      const slot_view_t *s = &snap->slots[i];
      if (!device_in_use(s, d) && snap->device_count > 1) continue;
      dv->tasks++;
      if (vgpu_liveness_dead(s->live)) dv->dead_used += s->dev[d].total;
      else if (s->status != 0) dv->used += s->dev[d].total;
    }
  }
  read_lock(r, o, &snap->lock);
  return EXIT_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* Lock state */

/* Lock state as the library judges it (see vgpu_region_view_lock_state), liveness from --proc-root. */
static void read_lock(const region_t *r, const options_t *o, lock_view_t *lk) {
  vgpu_region_view_lock_state(&r->v, o->proc_root, vgpu_now_realtime_ns(), lk);
}

static const char *lock_state_name(lock_state_t s) {
  switch (s) {
    case VGPU_LOCK_FREE: return "UNLOCKED";
    case VGPU_LOCK_HELD: return "LOCKED";
    case VGPU_LOCK_STALE_RECORD: return "LOCKED (holder gone)";
    case VGPU_LOCK_LOST: return "LOCKED (no holder recorded)";
  }
  return "UNKNOWN";
}

static const char *lock_state_key(lock_state_t s) {
  switch (s) {
    case VGPU_LOCK_FREE: return "unlocked";
    case VGPU_LOCK_HELD: return "locked";
    case VGPU_LOCK_STALE_RECORD: return "holder_gone";
    case VGPU_LOCK_LOST: return "no_holder_recorded";
  }
  return "unknown";
}

/* ---------------------------------------------------------------------------------------------- */
/* JSON writer: enough for flat objects and arrays, with string escaping */

typedef struct {
  FILE *f;
  int depth;
  int first[16];
} jw_t;

static void jw_raw_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20 || c >= 0x7f) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

static void jw_pre(jw_t *w, const char *key) {
  if (!w->first[w->depth]) fputc(',', w->f);
  w->first[w->depth] = 0;
  if (key != NULL) {
    jw_raw_str(w->f, key);
    fputc(':', w->f);
  }
}
static void jw_open(jw_t *w, const char *key, char c) {
  jw_pre(w, key);
  fputc(c, w->f);
  w->first[++w->depth] = 1;
}
static void jw_close(jw_t *w, char c) {
  w->depth--;
  fputc(c, w->f);
  if (w->depth == 0) fputc('\n', w->f);
}
static void jw_i64(jw_t *w, const char *k, int64_t v) { jw_pre(w, k); fprintf(w->f, "%" PRId64, v); }
static void jw_u64(jw_t *w, const char *k, uint64_t v) { jw_pre(w, k); fprintf(w->f, "%" PRIu64, v); }
static void jw_str(jw_t *w, const char *k, const char *v) { jw_pre(w, k); if (v) jw_raw_str(w->f, v); else fputs("null", w->f); }
static void jw_bool(jw_t *w, const char *k, int v) { jw_pre(w, k); fputs(v ? "true" : "false", w->f); }
static void jw_null(jw_t *w, const char *k) { jw_pre(w, k); fputs("null", w->f); }

/* ---------------------------------------------------------------------------------------------- */
/* --inspect */

static const char *status_name(int status) {
  switch (status) {
    case VGPU_SLOT_RUNNING: return "ACTIVE";
    case VGPU_SLOT_SUSPENDED: return "SUSPENDED";
    case VGPU_SLOT_FREE: return "EXITED";
  }
  return "UNKNOWN";
}

static void fmt_mb(char *buf, size_t cap, uint64_t bytes) {
  snprintf(buf, cap, "%" PRIu64 " MB", bytes >> 20);
}

static void print_ext_json(jw_t *w, const region_t *r) {
  char tmp[VGPU_CONTAINER_NAME_LEN + 1];
  int d;
  if (r->v.map.ext == NULL) {
    jw_null(w, "extension");
    return;
  }
  jw_open(w, "extension", '{');
  jw_i64(w, "major", r->v.map.ext->major);
  jw_i64(w, "minor", r->v.map.ext->minor);
  jw_u64(w, "generation", __atomic_load_n(&r->v.map.ext->generation, __ATOMIC_ACQUIRE));
  jw_u64(w, "created_ns", r->v.map.ext->created_ns);
  copy_clean(tmp, sizeof tmp, r->v.map.ext->lib_version, VGPU_LIB_VERSION_LEN);
  jw_str(w, "lib_version", tmp);
  copy_clean(tmp, sizeof tmp, r->v.map.ext->pod_uid, VGPU_POD_UID_LEN);
  jw_str(w, "pod_uid", tmp);
  copy_clean(tmp, sizeof tmp, r->v.map.ext->container_name, VGPU_CONTAINER_NAME_LEN);
  jw_str(w, "container_name", tmp);
  jw_open(w, "devices", '[');
  for (d = 0; r->v.ext_has_devices && d < VGPU_MAX_DEVICES; d++) {
    const vgpu_ext_device_t *e = &r->v.map.ext->devices[d];
    if (e->launches_total == 0 && e->oom_rejections == 0 && e->throttled_ns == 0 && e->busy_ns == 0) continue;
    jw_open(w, NULL, '{');
    jw_i64(w, "index", d);
    jw_u64(w, "oom_rejections", e->oom_rejections);
    jw_u64(w, "oom_rejected_bytes", e->oom_rejected_bytes);
    jw_u64(w, "throttled_ns", e->throttled_ns);
    jw_u64(w, "launches_delayed", e->launches_delayed);
    jw_u64(w, "launches_total", e->launches_total);
    jw_u64(w, "busy_ns", e->busy_ns);
    jw_u64(w, "limiter_window_ppm", e->limiter_window_ppm);
    jw_close(w, '}');
  }
  jw_close(w, ']');
  jw_close(w, '}');
}

static void print_lock_json(jw_t *w, const lock_view_t *lk) {
  jw_open(w, "lock", '{');
  jw_str(w, "state", lock_state_key(lk->state));
  if (lk->has_sem) jw_i64(w, "semaphore_value", lk->sem_value);
  else jw_null(w, "semaphore_value");
  jw_bool(w, "semaphore_valid", lk->sem_valid);
  if (!lk->sem_valid) jw_str(w, "semaphore_problem", lk->sem_invalid_why);
  if (lk->holder_pid != 0) {
    jw_i64(w, "holder_pid", lk->holder_pid);
    jw_str(w, "holder_source", lk->holder_source);
    jw_str(w, "holder_liveness", vgpu_liveness_name(lk->holder_live));
  } else {
    jw_null(w, "holder_pid");
  }
  if (lk->held_ns != 0) jw_u64(w, "held_ms", lk->held_ns / 1000000);
  if (lk->record_lock_pid != 0) jw_i64(w, "record_lock_pid", lk->record_lock_pid);
  jw_close(w, '}');
}

static void print_inspect_json(const region_t *r, const snapshot_t *s, const options_t *o) {
  jw_t w = {stdout, 0, {1}};
  int d;
  int i;
  jw_open(&w, NULL, '{');
  jw_str(&w, "file", r->path);
  jw_u64(&w, "file_size", r->v.size);
  jw_str(&w, "layout", r->v.lay->label);
  if (s->h.major >= 0) {
    jw_open(&w, "version", '{');
    jw_i64(&w, "major", s->h.major);
    jw_i64(&w, "minor", s->h.minor);
    jw_close(&w, '}');
  } else {
    jw_null(&w, "version");
  }
  jw_u64(&w, "owner_pid", s->h.owner_pid);
  jw_i64(&w, "device_num", s->raw_device_num);
  jw_i64(&w, "proc_num", s->h.proc_num);
  jw_i64(&w, "utilization_switch", s->h.utilization_switch);
  jw_i64(&w, "recent_kernel", s->h.recent_kernel);
  jw_i64(&w, "priority", s->h.priority);
  if (s->h.has_last_kernel) jw_u64(&w, "last_kernel_time", s->h.last_kernel_time);
  else jw_null(&w, "last_kernel_time");
  jw_str(&w, "liveness_from", o->host_pids ? "hostpid" : "pid");
  print_lock_json(&w, &s->lock);
  jw_open(&w, "devices", '[');
  for (d = 0; d < s->device_count; d++) {
    const dev_view_t *dv = &s->dev[d];
    if (o->device >= 0 && o->device != d) continue;
    jw_open(&w, NULL, '{');
    jw_i64(&w, "index", d);
    jw_str(&w, "uuid", dv->uuid);
    jw_u64(&w, "memory_limit_bytes", dv->limit);
    jw_u64(&w, "sm_limit_percent", dv->sm_limit);
    jw_u64(&w, "used_bytes", dv->used);
    jw_u64(&w, "dead_process_bytes", dv->dead_used);
    jw_i64(&w, "tasks", dv->tasks);
    jw_close(&w, '}');
  }
  jw_close(&w, ']');
  jw_open(&w, "processes", '[');
  for (i = 0; i < s->nslots; i++) {
    const slot_view_t *sl = &s->slots[i];
    if (o->device >= 0 && !device_in_use(sl, o->device) && s->device_count > 1) continue;
    jw_open(&w, NULL, '{');
    jw_i64(&w, "slot", sl->slot);
    jw_i64(&w, "pid", sl->pid);
    jw_i64(&w, "hostpid", sl->hostpid);
    jw_i64(&w, "status", sl->status);
    jw_str(&w, "status_name", status_name(sl->status));
    jw_str(&w, "liveness", vgpu_liveness_name(sl->live));
    jw_bool(&w, "torn", sl->torn);
    if (sl->has_ext) {
      jw_u64(&w, "start_time_ticks", sl->start_ticks);
      jw_u64(&w, "heartbeat_ns", sl->heartbeat_ns);
      jw_i64(&w, "hostpid_source", sl->hostpid_source);
    }
    jw_open(&w, "devices", '[');
    for (d = 0; d < s->device_count; d++) {
      const dev_usage_t *u = &sl->dev[d];
      if (o->device >= 0 && o->device != d) continue;
      jw_open(&w, NULL, '{');
      jw_i64(&w, "index", d);
      jw_u64(&w, "used_bytes", u->total);
      jw_u64(&w, "context_bytes", u->context);
      jw_u64(&w, "module_bytes", u->module);
      jw_u64(&w, "data_bytes", u->data);
      jw_u64(&w, "monitor_used_bytes", u->monitor);
      jw_u64(&w, "sm_util", u->sm_util);
      jw_close(&w, '}');
    }
    jw_close(&w, ']');
    jw_close(&w, '}');
  }
  jw_close(&w, ']');
  print_ext_json(&w, r);
  jw_close(&w, '}');
}

static void print_task_line(const slot_view_t *sl, int d, uint64_t sm_limit) {
  char mem[32];
  fmt_mb(mem, sizeof mem, sl->dev[d].total);
  printf("    PID: %d  Host PID: %d  Memory: %s  Util: %" PRIu64 "%%  Util Limit: %" PRIu64 "%%  Status: %s  Alive: %s%s\n",
         sl->pid, sl->hostpid, mem, sl->dev[d].sm_util, sm_limit == 0 ? 100 : sm_limit, status_name(sl->status),
         vgpu_liveness_name(sl->live), sl->torn ? "  (torn read)" : "");
}

static void print_inspect_text(const region_t *r, const snapshot_t *s, const options_t *o) {
  char tmp[VGPU_CONTAINER_NAME_LEN + 1];
  char mem[32];
  int d;
  int i;
  int idle = 0;
  const lock_view_t *lk = &s->lock;
  printf("=== Shared Region Info ===\n");
  printf("File:            %s\n", r->path);
  printf("Layout:          %s (%zu bytes)\n", r->v.lay->label, r->v.size);
  if (s->h.major >= 0) printf("Version:         MAJOR=%d, MINOR=%d\n", s->h.major, s->h.minor);
  else printf("Version:         none (pre-1.1 layout)\n");
  if (r->v.map.ext != NULL) {
    copy_clean(tmp, sizeof tmp, r->v.map.ext->lib_version, VGPU_LIB_VERSION_LEN);
    printf("Library:         %s (extension %u.%u)\n", tmp[0] ? tmp : "libvgpu", r->v.map.ext->major, r->v.map.ext->minor);
    copy_clean(tmp, sizeof tmp, r->v.map.ext->pod_uid, VGPU_POD_UID_LEN);
    printf("Pod UID:         %s\n", tmp[0] ? tmp : "-");
    copy_clean(tmp, sizeof tmp, r->v.map.ext->container_name, VGPU_CONTAINER_NAME_LEN);
    printf("Container:       %s\n", tmp[0] ? tmp : "-");
  } else {
    printf("Library:         HAMi-core or older libvgpu (no extension block)\n");
  }
  printf("Processes:       %d (%d running, %d suspended, %d gone)%s\n", s->nslots, s->running, s->suspended, s->dead,
         s->torn ? "  [some slots changed while read]" : "");
  printf("Lock Status:     %s\n", lock_state_name(lk->state));
  if (!lk->sem_valid) printf("Lock Semaphore:  CORRUPT (%s): --cleanup and --force-unlock refuse it\n", lk->sem_invalid_why);
  if (lk->holder_pid != 0) {
    printf("Lock Holder State: %s (from %s)", vgpu_liveness_name(lk->holder_live), lk->holder_source);
    if (lk->held_ns != 0) printf(", held %.1f s", (double)lk->held_ns / 1e9);
    printf("\n");
    printf("Lock Holder:     %d\n", lk->holder_pid);
  } else {
    printf("Lock Holder:     none\n");
  }
  if (lk->record_lock_pid != 0) printf("Record Lock:     held by %d (kernel-managed, released if it dies)\n", lk->record_lock_pid);
  printf("Util Switch:     %d   Recent Kernel: %d   Priority: %d\n", s->h.utilization_switch, s->h.recent_kernel, s->h.priority);
  if (s->h.has_last_kernel && s->h.last_kernel_time != 0) {
    time_t t = (time_t)s->h.last_kernel_time;
    struct tm tmv;
    char when[32];
    gmtime_r(&t, &tmv);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    printf("Last Kernel:     %s\n", when);
  }
  if (s->inferred_devices) printf("Devices:         %d (device_num is %d; the others inferred from limits/usage)\n", s->device_count, s->raw_device_num);
  for (d = 0; d < s->device_count; d++) {
    const dev_view_t *dv = &s->dev[d];
    if (o->device >= 0 && o->device != d) continue;
    printf("Device %d:%s%s\n", d, dv->uuid[0] ? " " : "", dv->uuid);
    if (dv->limit == 0) printf("  Total Memory:    unlimited\n");
    else {
      fmt_mb(mem, sizeof mem, dv->limit);
      printf("  Total Memory:    %s\n", mem);
    }
    fmt_mb(mem, sizeof mem, dv->used);
    printf("  Used Memory:     %s\n", mem);
    if (dv->dead_used != 0) {
      fmt_mb(mem, sizeof mem, dv->dead_used);
      printf("  Held By Gone:    %s (run --cleanup)\n", mem);
    }
    if (dv->sm_limit == 0 || dv->sm_limit >= 100) printf("  SM Limit:        none\n");
    else printf("  SM Limit:        %" PRIu64 "%%\n", dv->sm_limit);
    printf("  Task Count:      %d\n", dv->tasks);
    printf("  Tasks:\n");
    for (i = 0; i < s->nslots; i++) {
      const slot_view_t *sl = &s->slots[i];
      if (!device_in_use(sl, d) && s->device_count > 1) continue;
      print_task_line(sl, d, dv->sm_limit);
    }
  }
  if (o->device < 0) {
    for (i = 0; i < s->nslots; i++) {
      const slot_view_t *sl = &s->slots[i];
      int used = 0;
      for (d = 0; d < s->device_count; d++) used |= device_in_use(sl, d);
      if (used || s->device_count == 1) continue;
      if (!idle++) printf("Tasks without device usage:\n");
      printf("    PID: %d  Host PID: %d  Status: %s  Alive: %s\n", sl->pid, sl->hostpid, status_name(sl->status), vgpu_liveness_name(sl->live));
    }
  }
}

static int cmd_inspect(const options_t *o) {
  region_t r;
  snapshot_t s;
  int rc = region_open(&r, o->file, 0);
  if (rc != EXIT_OK) {
    region_close(&r);
    return rc;
  }
  rc = take_snapshot(&r, o, &s);
  if (rc == EXIT_OK && o->device >= 0 && o->device >= s.device_count)
    rc = fail(EXIT_USAGE, "--device %d: the region has %d device(s)", o->device, s.device_count);
  if (rc == EXIT_OK) {
    if (o->json) print_inspect_json(&r, &s, o);
    else print_inspect_text(&r, &s, o);
  }
  free(s.slots);
  region_close(&r);
  return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* --version */

static void loaded_library(char *out, size_t cap) {
  FILE *f = fopen("/proc/self/maps", "re");
  char line[PATH_MAX + 128];
  out[0] = '\0';
  if (f == NULL) return;
  while (fgets(line, sizeof line, f) != NULL) {
    char *p = strchr(line, '/');
    if (p != NULL && strstr(p, "libvgpu") != NULL) {
      p[strcspn(p, "\n")] = '\0';
      snprintf(out, cap, "%s", p);
      break;
    }
  }
  fclose(f);
}

static int cmd_version(const options_t *o) {
  region_t r;
  char lib[PATH_MAX];
  char tmp[VGPU_LIB_VERSION_LEN + 1];
  struct vgpu_view_header h;
  int rc;
  loaded_library(lib, sizeof lib);
  rc = region_open(&r, o->file, 0);
  if (rc == EXIT_OK && r.v.lay == NULL) rc = EXIT_BAD_LAYOUT;
  if (rc == EXIT_OK) vgpu_region_view_header(&r.v, &h);
  if (o->json) {
    jw_t w = {stdout, 0, {1}};
    jw_open(&w, NULL, '{');
    jw_str(&w, "tool_version", SHRREG_TOOL_VERSION);
    jw_i64(&w, "abi_major", VGPU_REGION_MAJOR);
    jw_i64(&w, "abi_minor", VGPU_REGION_MINOR);
    jw_u64(&w, "abi_struct_size", sizeof(vgpu_region_t));
    if (lib[0]) jw_str(&w, "loaded_library", lib);
    else jw_null(&w, "loaded_library");
    jw_str(&w, "file", o->file);
    if (rc == EXIT_OK) {
      jw_str(&w, "layout", r.v.lay->label);
      if (h.major >= 0) {
        jw_i64(&w, "region_major", h.major);
        jw_i64(&w, "region_minor", h.minor);
      }
      if (r.v.map.ext != NULL) {
        copy_clean(tmp, sizeof tmp, r.v.map.ext->lib_version, VGPU_LIB_VERSION_LEN);
        jw_str(&w, "library_version", tmp);
      } else {
        jw_null(&w, "library_version");
      }
    } else {
      jw_null(&w, "layout");
    }
    jw_close(&w, '}');
  } else {
    printf("shrreg-tool %s\n", SHRREG_TOOL_VERSION);
    printf("shrreg size: %zu, version %d.%d\n", sizeof(vgpu_region_t), VGPU_REGION_MAJOR, VGPU_REGION_MINOR);
    printf("library loaded in this process: %s\n", lib[0] ? lib : "none");
    if (rc == EXIT_OK) {
      if (h.major >= 0)
        printf("region: %s: layout %s, version %d.%d\n", o->file, r.v.lay->label, h.major, h.minor);
      else printf("region: %s: layout %s, no version fields\n", o->file, r.v.lay->label);
      if (r.v.map.ext != NULL) {
        copy_clean(tmp, sizeof tmp, r.v.map.ext->lib_version, VGPU_LIB_VERSION_LEN);
        printf("library that created the region: %s\n", tmp[0] ? tmp : "libvgpu (unnamed)");
      } else {
        printf("library that created the region: HAMi-core or older libvgpu (no extension block)\n");
      }
    } else {
      printf("region: %s: not readable (see the error above)\n", o->file);
    }
  }
  region_close(&r);
  /* The versions of the tool are always printed; a missing region is reported but is not an error here. */
  return rc == EXIT_NO_FILE ? EXIT_OK : rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* Writers */

static int open_for_write(region_t *r, const options_t *o) {
  int rc = region_open(r, o->file, 1);
  if (rc != EXIT_OK) return rc;
  if (r->v.lay == NULL) return EXIT_BAD_LAYOUT;
  if (!r->v.lay->writable)
    return fail(EXIT_READ_ONLY, "%s: layout %s is read-only for this tool (only v1.1 and v1.2 are written; "
                                "upgrade the library in this container and recreate the region)", o->file, r->v.lay->label);
  return EXIT_OK;
}

static int check_device_arg(const region_t *r, int dev) {
  int n = vgpu_region_view_device_num(&r->v);
  if (n > 0 && dev >= n) return fail(EXIT_USAGE, "device %d: the region has %d device(s)", dev, n);
  return EXIT_OK;
}

static int cmd_set_limit(const options_t *o) {
  region_t r;
  int rc = open_for_write(&r, o);
  int sm = o->cmd == CMD_SET_SM;
  uint64_t old;
  if (rc == EXIT_OK) rc = check_device_arg(&r, o->set_dev);
  if (rc != EXIT_OK) {
    region_close(&r);
    return rc;
  }
  old = vgpu_region_view_set_limit(&r.v, sm, o->set_dev, o->set_value);
  if (o->json) {
    jw_t w = {stdout, 0, {1}};
    jw_open(&w, NULL, '{');
    jw_str(&w, "field", sm ? "sm_limit" : "limit");
    jw_i64(&w, "device", o->set_dev);
    jw_u64(&w, "old", old);
    jw_u64(&w, "new", o->set_value);
    jw_close(&w, '}');
  } else if (sm) {
    printf("device %d: SM limit %" PRIu64 "%% -> %" PRIu64 "%%%s\n", o->set_dev, old, o->set_value,
           o->set_value == 0 || o->set_value >= 100 ? " (no limit)" : "");
    if (r.v.map.ext == NULL)
      printf("note: HAMi-core reads the SM limit once per process; processes started before this change keep the old one\n");
  } else {
    uint64_t used = vgpu_region_used(&r.v.map, o->set_dev);
    printf("device %d: memory limit %" PRIu64 " -> %" PRIu64 " bytes%s\n", o->set_dev, old, o->set_value, o->set_value == 0 ? " (unlimited)" : "");
    if (o->set_value != 0 && used > o->set_value)
      printf("warning: %" PRIu64 " bytes are already in use; further allocations will fail until usage drops\n", used);
  }
  region_close(&r);
  return EXIT_OK;
}

/* The library's slot lock without its dead-owner recovery: a holder this tool judges gone is left
 * to --force-unlock, an explicit decision. The region stays registered for the SIGBUS path. */
static int lock_acquire(region_t *r, int timeout_ms) {
  if (!vgpu_region_lock_no_recovery_for(&r->v.map, (uint64_t)timeout_ms * 1000000ull, NULL)) return -1;
  g_held = r;
  return 0;
}

static void lock_release(region_t *r) {
  g_held = NULL;
  vgpu_region_unlock(&r->v.map);
}

/* The semaphore's bytes are tenant-written: judged before anything locks or posts it. */
static int check_semaphore(const region_t *r, const options_t *o) {
  lock_view_t lk;
  read_lock(r, o, &lk);
  if (lk.sem_valid) return EXIT_OK;
  return fail(EXIT_BAD_SEMAPHORE,
              "%s: the slot-table semaphore is corrupt (%s); refusing to lock or release it, nothing "
              "changed. Fix: once no process of the container uses the region, delete the file "
              "(or restart the container); its processes create a fresh one",
              o->file, lk.sem_invalid_why);
}

typedef struct {
  int slot, pid, hostpid;
  liveness_t why;
  uint64_t bytes;
} dropped_t;

static int cmd_cleanup(const options_t *o) {
  region_t r;
  dropped_t *dropped;
  int ndropped = 0;
  int kept_unknown = 0;
  int freed_empty = 0;
  int i;
  int n;
  int rc = open_for_write(&r, o);
  if (rc == EXIT_OK && o->device >= 0) rc = check_device_arg(&r, o->device);
  if (rc != EXIT_OK) {
    region_close(&r);
    return rc;
  }
  rc = check_semaphore(&r, o);
  if (rc != EXIT_OK) {
    region_close(&r);
    return rc;
  }
  dropped = calloc(VGPU_MAX_PROCS, sizeof *dropped);
  if (dropped == NULL) {
    region_close(&r);
    return fail(EXIT_IO, "out of memory");
  }
  if (lock_acquire(&r, o->lock_timeout_ms) != 0) {
    lock_view_t lk;
    read_lock(&r, o, &lk);
    free(dropped);
    region_close(&r);
    if (lk.holder_pid != 0)
      return fail(EXIT_LOCK_BUSY, "slot-table lock busy for %d ms: held by pid %d (%s)%s", o->lock_timeout_ms,
                  lk.holder_pid, vgpu_liveness_name(lk.holder_live),
                  vgpu_liveness_dead(lk.holder_live) ? "; the holder is gone: run --force-unlock first" : "; try again later");
    return fail(EXIT_LOCK_BUSY, "slot-table lock busy for %d ms with no holder recorded; if it stays so, run --force-unlock",
                o->lock_timeout_ms);
  }
  if (!r.v.map.sem_held) {
    /* The bytes turned bad between the check and the lock (the library then takes the record
     * lock only, which HAMi-core processes sharing the file do not honour): change nothing. */
    lock_release(&r);
    free(dropped);
    rc = check_semaphore(&r, o);
    region_close(&r);
    return rc != EXIT_OK ? rc : fail(EXIT_BAD_SEMAPHORE, "%s: the slot-table semaphore was not usable when locking; nothing changed", o->file);
  }
  /* One generation period (odd while it runs) around the whole pass, not one per freed slot. */
  vgpu_region_generation_begin(&r.v.map);
  n = vgpu_region_view_proc_num(&r.v);
  for (i = 0; i < n; i++) {
    slot_view_t s;
    int pid;
    int d;
    vgpu_region_view_read_slot(&r.v, i, &s);
    if (s.pid == 0) continue;
    if (o->device >= 0 && !device_in_use(&s, o->device)) continue;
    pid = live_pid_of(o, &s);
    if (o->npids > 0) {
      int k;
      int listed = 0;
      for (k = 0; k < o->npids; k++) {
        if (o->pids[k] != s.pid) continue;
        /* A slot that changed since the caller judged it (re-registered by a new process with the
         * same container pid) is not the one the caller saw: keep it. */
        if (o->pid_hostpids[k] >= 0 && o->pid_hostpids[k] != s.hostpid) continue;
        if (o->pid_starts[k] >= 0 && s.has_ext && (uint64_t)o->pid_starts[k] != s.start_ticks) continue;
        listed = 1;
      }
      if (!listed) continue;
      s.live = VGPU_LIVE_GONE;
    } else {
      s.live = vgpu_proc_liveness(o->proc_root, pid, s.start_ticks, NULL);
      /* A fresh heartbeat means the owner lives in another pid namespace sharing the file. */
      if (vgpu_liveness_dead(s.live) && vgpu_heartbeat_fresh(s.heartbeat_ns, vgpu_now_realtime_ns()))
        s.live = VGPU_LIVE_UNKNOWN;
    }
    if (!vgpu_liveness_dead(s.live)) {
      if (s.live == VGPU_LIVE_UNKNOWN || s.live == VGPU_LIVE_NO_PID) kept_unknown++;
      continue;
    }
    dropped[ndropped].slot = i;
    dropped[ndropped].pid = s.pid;
    dropped[ndropped].hostpid = s.hostpid;
    dropped[ndropped].why = s.live;
    for (d = 0; d < VGPU_MAX_DEVICES; d++) dropped[ndropped].bytes += s.dev[d].total;
    ndropped++;
    vgpu_region_clear_slot(&r.v.map, i); /* in place: slots never move */
  }
  freed_empty = n - vgpu_region_trim_slots(&r.v.map);
  n -= freed_empty;
  vgpu_region_generation_end(&r.v.map);
  lock_release(&r);
  if (o->json) {
    jw_t w = {stdout, 0, {1}};
    jw_open(&w, NULL, '{');
    jw_open(&w, "dropped", '[');
    for (i = 0; i < ndropped; i++) {
      jw_open(&w, NULL, '{');
      jw_i64(&w, "slot", dropped[i].slot);
      jw_i64(&w, "pid", dropped[i].pid);
      jw_i64(&w, "hostpid", dropped[i].hostpid);
      jw_str(&w, "reason", vgpu_liveness_name(dropped[i].why));
      jw_u64(&w, "used_bytes", dropped[i].bytes);
      jw_close(&w, '}');
    }
    jw_close(&w, ']');
    jw_i64(&w, "trailing_slots_trimmed", freed_empty);
    jw_i64(&w, "kept_unjudgeable", kept_unknown);
    jw_i64(&w, "proc_num", n);
    jw_close(&w, '}');
  } else {
    for (i = 0; i < ndropped; i++)
      printf("dropped slot %d: pid %d (host pid %d) %s, held %" PRIu64 " MB\n", dropped[i].slot, dropped[i].pid,
             dropped[i].hostpid, vgpu_liveness_name(dropped[i].why), dropped[i].bytes >> 20);
    if (freed_empty) printf("trimmed %d free slot(s) from the end of the table\n", freed_empty);
    if (kept_unknown) printf("kept %d slot(s) whose process could not be judged (pid not visible or unreadable)\n", kept_unknown);
    printf("cleanup: %d dead process slot(s) freed, slot table now %d entries\n", ndropped, n);
  }
  free(dropped);
  region_close(&r);
  return EXIT_OK;
}

static int cmd_force_unlock(const options_t *o) {
  region_t r;
  lock_view_t lk;
  int rc = open_for_write(&r, o);
  const char *action = NULL;
  if (rc == EXIT_OK && o->device >= 0) rc = check_device_arg(&r, o->device);
  if (rc != EXIT_OK) {
    region_close(&r);
    return rc;
  }
  rc = check_semaphore(&r, o);
  if (rc != EXIT_OK) {
    region_close(&r);
    return rc;
  }
  read_lock(&r, o, &lk);
  if (o->holder != 0) {
    if (lk.holder_pid != o->holder) {
      region_close(&r);
      if (lk.holder_pid == 0) return fail(EXIT_FAILED, "--holder %d: no holder is recorded now; nothing released", o->holder);
      return fail(EXIT_HOLDER_ALIVE, "--holder %d: the lock is now recorded as held by pid %d; nothing released", o->holder, lk.holder_pid);
    }
    /* The caller saw this holder's namespace; our own /proc cannot, so trust it. */
    lk.state = VGPU_LOCK_STALE_RECORD;
    lk.holder_live = VGPU_LIVE_GONE;
  }
  switch (lk.state) {
    case VGPU_LOCK_FREE:
      action = "nothing to unlock: the slot-table lock is free";
      break;
    case VGPU_LOCK_HELD:
      region_close(&r);
      if (lk.holder_live == VGPU_LIVE_UNKNOWN)
        return fail(EXIT_HOLDER_ALIVE, "refusing: lock holder pid %d cannot be judged from this pid namespace "
                                       "(its /proc entry is unreadable); run where the holder is visible", lk.holder_pid);
      if (lk.held_ns != 0)
        return fail(EXIT_HOLDER_ALIVE, "refusing: lock holder pid %d is alive (held %.1f s); unlocking would let two "
                                       "processes edit the slot table at once. Find out why it is stuck, or stop it first",
                    lk.holder_pid, (double)lk.held_ns / 1e9);
      return fail(EXIT_HOLDER_ALIVE, "refusing: lock holder pid %d is alive; unlocking would let two processes edit the "
                                     "slot table at once. Find out why it is stuck, or stop it first", lk.holder_pid);
    case VGPU_LOCK_STALE_RECORD:
      /* Clears only records that still name this holder; posts only a semaphore that is down. */
      vgpu_region_release_stale_lock(&r.v.map, lk.holder_pid);
      action = "released the lock of a holder that is gone";
      break;
    case VGPU_LOCK_LOST: {
      /* Watch: a live holder publishes itself within microseconds of taking the semaphore, and
       * HAMi holders keep it for milliseconds. Down and unowned for the whole window = lost post. */
      int waited = 0;
      while (waited < o->observe_ms) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
        waited += 10;
        read_lock(&r, o, &lk);
        if (lk.state != VGPU_LOCK_LOST) break;
      }
      if (lk.state == VGPU_LOCK_FREE) {
        action = "nothing to unlock: the lock was released while watching";
        break;
      }
      if (lk.state != VGPU_LOCK_LOST) {
        region_close(&r);
        return fail(EXIT_HOLDER_ALIVE, "refusing: a holder (pid %d) took the lock while watching; it is in use", lk.holder_pid);
      }
      vgpu_region_release_stale_lock(&r.v.map, 0); /* posts only if still down */
      action = "released a semaphore that stayed down with no holder recorded (lost post after a killed holder)";
      break;
    }
  }
  if (o->json) {
    jw_t w = {stdout, 0, {1}};
    jw_open(&w, NULL, '{');
    jw_str(&w, "result", action);
    jw_str(&w, "previous_state", lock_state_key(lk.state));
    if (lk.holder_pid != 0) jw_i64(&w, "previous_holder_pid", lk.holder_pid);
    jw_close(&w, '}');
  } else {
    printf("%s", action);
    if (lk.holder_pid != 0 && lk.state == VGPU_LOCK_STALE_RECORD) printf(" (pid %d, %s)", lk.holder_pid, vgpu_liveness_name(lk.holder_live));
    printf("\n");
    if (o->device >= 0) printf("note: the slot-table lock covers all devices of the region\n");
  }
  region_close(&r);
  return EXIT_OK;
}

/* ---------------------------------------------------------------------------------------------- */

int shrreg_tool_main(int argc, char **argv);

int shrreg_tool_main(int argc, char **argv) {
  options_t o;
  struct sigaction sa;
  int rc;
  g_expect = NULL;
  rc = parse_args(argc, argv, &o);
  if (rc != EXIT_OK) return rc;
  g_expect_opts = o;
  g_expect = &g_expect_opts;
  if (o.cmd == CMD_HELP) {
    usage(stdout);
    return EXIT_OK;
  }
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigbus;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, NULL);
  if (sigsetjmp(g_bus_jmp, 1) != 0) {
    region_t *held = g_held;
    region_t *mapped = g_mapped;
    struct stat st;
    volatile int released = 0; /* set between sigsetjmp and a possible second longjmp */
    g_bus_armed = 0;
    if (held != NULL) {
      /* The lock's page is mapped (taking the lock touched it); if releasing faults anyway, the
       * lock stays with this dead process and the others' dead-holder recovery takes over. */
      if (sigsetjmp(g_bus_jmp, 1) == 0) {
        g_bus_armed = 1;
        lock_release(held);
        released = 1;
      }
      g_bus_armed = 0;
    }
    if (mapped != NULL && stat(mapped->path, &st) == 0 && (uint64_t)st.st_size < (uint64_t)mapped->v.size)
      return fail(EXIT_IO, "%s: the file shrank while it was read (recreated?); run again", o.file);
    return fail(EXIT_IO,
                "%s: a page of the region could not be read or written (SIGBUS: a hole of a sparse file "
                "on a full filesystem, or an I/O error)%s",
                o.file, held == NULL ? "" : released ? "; the region lock was released" : "; the region lock could not be released");
  }
  g_bus_armed = 1;
  switch (o.cmd) {
    case CMD_INSPECT: rc = cmd_inspect(&o); break;
    case CMD_VERSION: rc = cmd_version(&o); break;
    case CMD_SET_SM:
    case CMD_SET_MEM: rc = cmd_set_limit(&o); break;
    case CMD_CLEANUP: rc = cmd_cleanup(&o); break;
    case CMD_UNLOCK: rc = cmd_force_unlock(&o); break;
    default: rc = EXIT_USAGE; break;
  }
  g_bus_armed = 0;
  fflush(stdout);
  return rc;
}

#ifndef SHRREG_TOOL_NO_MAIN
int main(int argc, char **argv) { return shrreg_tool_main(argc, argv); }
#endif

/*
 * shrreg-tool's command line: usage text, error reporting and option parsing (tools/shrreg_tool.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shrreg_tool.h"

static const char *g_prog = "shrreg-tool";

void usage(FILE *out) {
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

int fail(int code, const char *fmt, ...) {
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

int parse_args(int argc, char **argv, options_t *o) {
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

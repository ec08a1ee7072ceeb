/*
 * shrreg_tool.h — shrreg-tool's private header: the units of the tool (tools/shrreg_*.c) share the
 * exit codes, the options, the mapped region and its snapshot, and the JSON writer through it.
 * Nothing outside tools/ (and the tool's in-process fuzzer) includes it.
 *
 *   shrreg_tool.c     entry point: SIGBUS recovery and command dispatch
 *   shrreg_args.c     command line: usage, errors, option parsing
 *   shrreg_region.c   the mapped region: open (--expect-inode), snapshot, lock state
 *   shrreg_json.c     the JSON writer
 *   shrreg_inspect.c  read-only commands: --inspect, --version
 *   shrreg_repair.c   writers: --set-*-limit, --cleanup, --force-unlock
 */
#ifndef VGPU_SHRREG_TOOL_H
#define VGPU_SHRREG_TOOL_H

#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

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

int shrreg_tool_main(int argc, char **argv);

/* shrreg_args.c */
void usage(FILE *out);
int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int parse_args(int argc, char **argv, options_t *o);

/* ---------------------------------------------------------------------------------------------- */
/* Process liveness: the library's judgement of <proc_root>/<pid>/stat */

typedef enum vgpu_liveness liveness_t;

/* ---------------------------------------------------------------------------------------------- */
/* The mapped region */

typedef struct {
  const char *path;
  struct vgpu_region_view v; /* the library's multi-layout view */
} region_t;

/* shrreg_region.c: the SIGBUS path's state (the jump buffer armed around the command, the region
 * mapped now and the region whose lock this process holds), and the --expect-inode verdict. */
extern sigjmp_buf g_bus_jmp;
extern volatile sig_atomic_t g_bus_armed;
extern region_t *volatile g_mapped;
extern region_t *volatile g_held;
extern options_t g_expect_opts;
extern const options_t *g_expect;

int region_open(region_t *r, const char *path, int rw);
void region_close(region_t *r);
void copy_clean(char *dst, size_t cap, const char *src, size_t max);

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

int live_pid_of(const options_t *o, const slot_view_t *s);
int device_in_use(const slot_view_t *s, int d);
int take_snapshot(const region_t *r, const options_t *o, snapshot_t *snap);
void read_lock(const region_t *r, const options_t *o, lock_view_t *lk);
const char *lock_state_name(lock_state_t s);
const char *lock_state_key(lock_state_t s);

/* ---------------------------------------------------------------------------------------------- */
/* JSON writer: enough for flat objects and arrays, with string escaping */

typedef struct {
  FILE *f;
  int depth;
  int first[16];
} jw_t;

/* shrreg_json.c */
void jw_open(jw_t *w, const char *key, char c);
void jw_close(jw_t *w, char c);
void jw_i64(jw_t *w, const char *k, int64_t v);
void jw_u64(jw_t *w, const char *k, uint64_t v);
void jw_str(jw_t *w, const char *k, const char *v);
void jw_bool(jw_t *w, const char *k, int v);
void jw_null(jw_t *w, const char *k);

/* shrreg_inspect.c */
int cmd_inspect(const options_t *o);
int cmd_version(const options_t *o);

/* shrreg_repair.c */
int cmd_set_limit(const options_t *o);
int cmd_cleanup(const options_t *o);
int cmd_force_unlock(const options_t *o);
void lock_release(region_t *r);

#endif /* VGPU_SHRREG_TOOL_H */

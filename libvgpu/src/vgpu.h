/*
 * vgpu.h — internal declarations shared by libvgpu's translation units: logging, configuration,
 * the reentrancy guard and the export marker. Nothing here is part of an ABI.
 *
 * Threading: configuration is parsed once (vgpu_config_get() is safe from any thread after the
 * first call); logging is a single write(2) per line and needs no lock.
 */
#ifndef VGPU_VGPU_H
#define VGPU_VGPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vgpu/vgpu_region.h"

#define VGPU_EXPORT __attribute__((visibility("default")))
/* Code on the dlsym path may run inside a sanitizer runtime's own start-up, before its shadow
 * memory exists: it must not be instrumented (matters only for the ASan/UBSan test build). */
#define VGPU_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))
#define VGPU_LIB_VERSION "libvgpu 0.1.0"

/* ---- logging (HAMi-compatible levels: LIBCUDA_LOG_LEVEL 0 errors, 2 default, 3 info, 4 debug) */
enum vgpu_log_level {
  VGPU_LEVEL_ERROR = 0,
  VGPU_LEVEL_WARN = 1,
  VGPU_LEVEL_MSG = 2,
  VGPU_LEVEL_INFO = 3,
  VGPU_LEVEL_DEBUG = 4,
};
extern int vgpu_log_level;
void vgpu_log(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define VGPU_LOG(level, ...)                                                                       \
  do {                                                                                             \
    if ((level) <= vgpu_log_level) vgpu_log((level), __FILE__, __LINE__, __VA_ARGS__);            \
  } while (0)
#define VGPU_LOG_ERROR(...) VGPU_LOG(VGPU_LEVEL_ERROR, __VA_ARGS__)
#define VGPU_LOG_WARN(...) VGPU_LOG(VGPU_LEVEL_WARN, __VA_ARGS__)
#define VGPU_LOG_MSG(...) VGPU_LOG(VGPU_LEVEL_MSG, __VA_ARGS__)
#define VGPU_LOG_INFO(...) VGPU_LOG(VGPU_LEVEL_INFO, __VA_ARGS__)
#define VGPU_LOG_DEBUG(...) VGPU_LOG(VGPU_LEVEL_DEBUG, __VA_ARGS__)

/* ---- configuration (environment, HAMi-core contract) */
enum vgpu_util_policy { VGPU_POLICY_DEFAULT = 0, VGPU_POLICY_FORCE = 1, VGPU_POLICY_DISABLE = 2 };

enum vgpu_parse_status {
  VGPU_PARSE_OK = 0,
  VGPU_PARSE_EMPTY,
  VGPU_PARSE_LEADING_ZERO, /* strict decimal only: "050" */
  VGPU_PARSE_NOT_DECIMAL,  /* not a number HAMi-core reads whole: "-1", " 5", "abc", "08", "0x" */
  VGPU_PARSE_BAD_SUFFIX,   /* "10x", "1mb", "5 m", "50%" (HAMi-core would drop the tail) */
  VGPU_PARSE_OVERFLOW,
};
/* Parses a memory size the way HAMi-core reads one (strtoul base 0, then a one-letter suffix):
 * decimal, octal with a leading 0 ("0100m" = 64 MiB), hex with 0x; optional last character
 * k/K m/M g/G (powers of 1024), bytes without. Refused, where HAMi-core would silently read
 * something else: signs, blanks, any character HAMi-core would ignore ("1mb", "08"), overflow. */
enum vgpu_parse_status vgpu_parse_size(const char *s, uint64_t *out);
/* The same number syntax without a suffix (SM percentages: HAMi-core would scale "1k" to 1024). */
enum vgpu_parse_status vgpu_parse_hami_uint(const char *s, uint64_t *out);
/* Parses a plain decimal integer (no suffix, no leading zero): log level, priority, device ids. */
enum vgpu_parse_status vgpu_parse_uint(const char *s, uint64_t *out);
const char *vgpu_parse_status_str(enum vgpu_parse_status st);

/* What a limit that cannot be parsed becomes when no valid limit of the same kind is set: the
 * smallest limit the region can express (0 means "unlimited" there, for HAMi's readers too). */
#define VGPU_FAILSAFE_MEM_LIMIT 1ull /* bytes: every real allocation is refused */
#define VGPU_FAILSAFE_SM_LIMIT 1ull  /* percent */

struct vgpu_config {
  uint64_t mem_limit[VGPU_MAX_DEVICES]; /* bytes, 0 = unlimited */
  uint64_t sm_limit[VGPU_MAX_DEVICES];  /* percent, 100 = unlimited */
  char cache_path[4096];
  int log_level;
  enum vgpu_util_policy util_policy;
  int priority;
  uint64_t context_size; /* LIBVGPU_CONTEXT_SIZE: at least this many bytes per context */
  bool context_size_set;  /* a non-zero LIBVGPU_CONTEXT_SIZE was given */
  /* Pure pass-through. Never set from the environment (a tenant could set it): HAMi's device
   * plugin honours CUDA_DISABLE_CONTROL by not mounting the library at all. */
  bool disabled;
  uint32_t mem_failsafe_mask; /* devices whose memory limit came from an unparsable value */
  uint32_t sm_failsafe_mask;  /* devices whose SM limit came from an unparsable value */
  char pod_uid[VGPU_POD_UID_LEN];
  char container_name[VGPU_CONTAINER_NAME_LEN];
  bool env_has_limits;      /* some CUDA_DEVICE_MEMORY_LIMIT* / CUDA_DEVICE_SM_LIMIT* is set */
  bool cache_path_from_env; /* CUDA_DEVICE_MEMORY_SHARED_CACHE is set */
  bool adopted;             /* limits and path come from the container's region (no limit vars) */
  bool no_shared_region;    /* fail safe: the container's region is unusable; count locally */
};
/* Reads the environment once; later calls return the same object. Never fails. */
const struct vgpu_config *vgpu_config_get(void);
/* Test hook: parse a config from a getenv-like function without touching the cached one. */
void vgpu_config_parse(struct vgpu_config *cfg, const char *(*get)(const char *name));

/* ---- a stripped environment (config_adopt.c): with no limit variable at all, the container's
 * region in the directory HAMi mounts (HAMi: ${HOOK_PATH}/vgpu, one *.cache) gives the path and
 * the limits. Fixed at build time (make HOOK_DIR=...), never from the environment: a tenant sets
 * its own environment. */
#ifndef VGPU_HOOK_DIR
#define VGPU_HOOK_DIR "/usr/local/vgpu"
#endif
enum { VGPU_ADOPT_NONE = 0, VGPU_ADOPT_OK = 1, VGPU_ADOPT_UNUSABLE = 2 };
struct vgpu_adopted {
  char path[4096];                      /* the region (OK), or the file found (UNUSABLE) */
  uint64_t mem_limit[VGPU_MAX_DEVICES]; /* as the region holds them (OK) */
  uint64_t sm_limit[VGPU_MAX_DEVICES];
  char why[160]; /* UNUSABLE: why */
};
/* Looks for the container's region in `hook_dir`: NONE (no directory, or no *.cache in it), OK
 * (exactly one, a region of any HAMi-core layout: its limits), UNUSABLE (there, but not usable). */
int vgpu_adopt_scan(const char *hook_dir, struct vgpu_adopted *out);
/* Applies the scan to a parsed config with no limit variable: OK adopts path and limits, UNUSABLE
 * sets the fail-safe limits and no_shared_region. Logs what it did. */
void vgpu_config_adopt(struct vgpu_config *cfg, const char *hook_dir);

/* ---- reentrancy guard: calls the real driver makes back into exported names pass straight
 * through (libcuda may call its own exported symbols through the PLT). */
extern __thread int vgpu_hook_depth __attribute__((tls_model("initial-exec")));
#define VGPU_GUARD_ENTER() (vgpu_hook_depth++ == 0)
#define VGPU_GUARD_LEAVE() (vgpu_hook_depth--)

/* ---- time */
uint64_t vgpu_now_realtime_ns(void);
uint64_t vgpu_now_monotonic_ns(void);

#endif /* VGPU_VGPU_H */

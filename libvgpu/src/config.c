/*
 * config.c — the environment contract of HAMi-core, parsed once.
 *
 * Numbers are read as HAMi-core reads them (strtoul base 0 plus a one-letter suffix), so a value
 * that works with HAMi-core gives the same limit here, octal and hex included. A value HAMi-core
 * would only partly read ("1mb" is 1 byte there, "08" is 0 = unlimited, an overflow is unlimited)
 * is refused with one Error line naming the variable, the value and the fix, and never lifts a
 * limit: the device gets the most restrictive valid limit of the same kind, or the fail-safe limit
 * (VGPU_FAILSAFE_*) when there is none. As in HAMi-core, a per-device value of 0 means "use the
 * global value". Knobs a tenant can set in its own environment never switch enforcement off
 * (README "Who may set what").
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "vgpu.h"

__thread int vgpu_hook_depth __attribute__((tls_model("initial-exec")));

uint64_t vgpu_now_realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t vgpu_now_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *vgpu_parse_status_str(enum vgpu_parse_status st) {
  switch (st) {
    case VGPU_PARSE_OK: return "ok";
    case VGPU_PARSE_EMPTY: return "empty value";
    case VGPU_PARSE_LEADING_ZERO: return "leading zero; write the number without it";
    case VGPU_PARSE_NOT_DECIMAL:
      return "not a number (decimal, 0-prefixed octal or 0x hex; no sign or blanks)";
    case VGPU_PARSE_BAD_SUFFIX:
      return "trailing characters HAMi-core would ignore (a size takes one suffix k, m or g)";
    case VGPU_PARSE_OVERFLOW: return "too large for 64 bits";
  }
  return "?";
}

static int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 99;
}

/* Reads digits in `base` from p; returns the position after them (== p when there are none). */
static const char *read_digits(const char *p, unsigned base, uint64_t *v, bool *overflow) {
  for (; digit_value(*p) < (int)base; p++) {
    uint64_t d = (uint64_t)digit_value(*p);
    if (*v > (UINT64_MAX - d) / base) *overflow = true;
    else *v = *v * base + d;
  }
  return p;
}

/* HAMi-core's number: strtoul(s, &end, 0) that consumes everything but an optional suffix. */
static enum vgpu_parse_status parse_hami_number(const char *s, const char **end, uint64_t *out) {
  if (!s || !*s) return VGPU_PARSE_EMPTY;
  if (!isdigit((unsigned char)s[0])) return VGPU_PARSE_NOT_DECIMAL;
  uint64_t v = 0;
  bool overflow = false;
  const char *p;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    p = read_digits(s + 2, 16, &v, &overflow);
    if (p == s + 2) return VGPU_PARSE_NOT_DECIMAL; /* "0x": strtoul reads only the 0 */
  } else if (s[0] == '0') {
    p = read_digits(s + 1, 8, &v, &overflow);
    if (isdigit((unsigned char)*p)) return VGPU_PARSE_NOT_DECIMAL; /* "08": octal stops at 8 */
  } else {
    p = read_digits(s, 10, &v, &overflow);
  }
  if (overflow) return VGPU_PARSE_OVERFLOW;
  *end = p;
  *out = v;
  return VGPU_PARSE_OK;
}

enum vgpu_parse_status vgpu_parse_uint(const char *s, uint64_t *out) {
  if (!s || !*s) return VGPU_PARSE_EMPTY;
  if (s[0] == '0' && isdigit((unsigned char)s[1])) return VGPU_PARSE_LEADING_ZERO;
  if (!isdigit((unsigned char)s[0]) || (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')))
    return VGPU_PARSE_NOT_DECIMAL;
  uint64_t v = 0;
  bool overflow = false;
  const char *p = read_digits(s, 10, &v, &overflow);
  if (overflow) return VGPU_PARSE_OVERFLOW;
  if (*p) return VGPU_PARSE_BAD_SUFFIX;
  *out = v;
  return VGPU_PARSE_OK;
}

enum vgpu_parse_status vgpu_parse_hami_uint(const char *s, uint64_t *out) {
  const char *end = NULL;
  uint64_t v = 0;
  enum vgpu_parse_status st = parse_hami_number(s, &end, &v);
  if (st != VGPU_PARSE_OK) return st;
  if (*end) return VGPU_PARSE_BAD_SUFFIX;
  *out = v;
  return VGPU_PARSE_OK;
}

enum vgpu_parse_status vgpu_parse_size(const char *s, uint64_t *out) {
  const char *end = NULL;
  uint64_t v = 0;
  enum vgpu_parse_status st = parse_hami_number(s, &end, &v);
  if (st != VGPU_PARSE_OK) return st;
  unsigned shift = 0;
  if (*end) {
    switch (*end) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: return VGPU_PARSE_BAD_SUFFIX;
    }
    if (end[1]) return VGPU_PARSE_BAD_SUFFIX;
  }
  if (shift && v > (UINT64_MAX >> shift)) return VGPU_PARSE_OVERFLOW;
  *out = v << shift;
  return VGPU_PARSE_OK;
}

/* One limit variable: unset, a valid value (0 included) or a value that could not be parsed. */
enum limit_state { LIMIT_UNSET, LIMIT_VALID, LIMIT_INVALID };

static enum limit_state read_limit(const char *(*get)(const char *), const char *name, bool size,
                                   uint64_t *out) {
  const char *v = get(name);
  if (!v || !*v) return LIMIT_UNSET; /* "VAR=" clears a variable (HAMi-core: 0, no limit) */
  enum vgpu_parse_status st = size ? vgpu_parse_size(v, out) : vgpu_parse_hami_uint(v, out);
  if (st == VGPU_PARSE_OK) {
    if (v[0] == '0' && v[1]) /* octal or hex: HAMi-core reads it so too, but say what it means */
      VGPU_LOG_WARN("%s=\"%.64s\" is read as %llu (octal/hex, as HAMi-core reads it)", name, v,
                    (unsigned long long)*out);
    return LIMIT_VALID;
  }
  VGPU_LOG_ERROR("invalid %s=\"%.64s\": %s; this does NOT lift the limit: the most restrictive "
                 "valid limit applies (none valid: %s)",
                 name, v, vgpu_parse_status_str(st),
                 size ? "every allocation is refused" : "a 1% SM share");
  return LIMIT_INVALID;
}

/* Resolves the limits of one kind. `none` is the value meaning "no limit" (0 bytes / 100 %);
 * values above `none` for SM also mean no limit. Returns the mask of fail-safe devices. */
static uint32_t resolve_limits(const char *(*get)(const char *), const char *global_name, bool size,
                               uint64_t none, uint64_t failsafe, uint64_t *limit) {
  uint64_t g = 0, per[VGPU_MAX_DEVICES] = {0};
  enum limit_state gs = read_limit(get, global_name, size, &g), ps[VGPU_MAX_DEVICES];
  uint64_t most_restrictive = 0; /* 0: no valid limiting value seen */
  bool have_restrictive = false;
  if (gs == LIMIT_VALID && g != 0 && (size || g < none)) {
    most_restrictive = g;
    have_restrictive = true;
  }
  for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
    char name[64];
    snprintf(name, sizeof name, "%s_%d", global_name, i);
    ps[i] = read_limit(get, name, size, &per[i]);
    if (ps[i] == LIMIT_VALID && per[i] != 0 && (size || per[i] < none) &&
        (!have_restrictive || per[i] < most_restrictive)) {
      most_restrictive = per[i];
      have_restrictive = true;
    }
  }
  uint64_t fallback = have_restrictive ? most_restrictive : failsafe;
  uint32_t failsafe_mask = 0;
  for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
    uint64_t v;
    bool fs = false;
    if (ps[i] == LIMIT_VALID && per[i] != 0) v = per[i];           /* the device's own limit */
    else if (ps[i] == LIMIT_INVALID) v = fallback, fs = true;      /* never lifted */
    else if (gs == LIMIT_VALID && g != 0) v = g;                   /* unset or 0: the global */
    else if (gs == LIMIT_INVALID) v = fallback, fs = true;
    else v = none;
    if (!size && (v == 0 || v > none)) v = none; /* HAMi: SM 0 or >= 100 is no limit */
    limit[i] = v;
    if (fs) failsafe_mask |= 1u << i;
  }
  return failsafe_mask;
}

/* Whether any limit variable is set (non-empty), global or per device, memory or SM. */
static bool env_has_limit_variable(const char *(*get)(const char *)) {
  static const char *const kinds[] = {"CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_SM_LIMIT"};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    for (int i = -1; i < VGPU_MAX_DEVICES; i++) {
      char name[64];
      if (i < 0) snprintf(name, sizeof name, "%s", kinds[k]);
      else snprintf(name, sizeof name, "%s_%d", kinds[k], i);
      const char *v = get(name);
      if (v && *v) return true;
    }
  }
  return false;
}

static void copy_env(char *dst, size_t cap, const char *v) {
  if (!v) return;
  snprintf(dst, cap, "%s", v);
}

void vgpu_config_parse(struct vgpu_config *cfg, const char *(*get)(const char *name)) {
  memset(cfg, 0, sizeof *cfg);
  uint64_t v = 0;

  cfg->log_level = VGPU_LEVEL_MSG;
  const char *lv = get("LIBCUDA_LOG_LEVEL");
  if (lv) {
    if (vgpu_parse_uint(lv, &v) == VGPU_PARSE_OK && v <= 4) {
      cfg->log_level = (int)v;
    } else {
      VGPU_LOG_ERROR("invalid LIBCUDA_LOG_LEVEL=\"%.16s\": expected 0..4; using 2", lv);
    }
  }

  cfg->mem_failsafe_mask =
      resolve_limits(get, "CUDA_DEVICE_MEMORY_LIMIT", true, 0, VGPU_FAILSAFE_MEM_LIMIT, cfg->mem_limit);
  cfg->sm_failsafe_mask =
      resolve_limits(get, "CUDA_DEVICE_SM_LIMIT", false, 100, VGPU_FAILSAFE_SM_LIMIT, cfg->sm_limit);

  const char *path = get("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  cfg->cache_path_from_env = path && *path;
  snprintf(cfg->cache_path, sizeof cfg->cache_path, "%s",
           cfg->cache_path_from_env ? path : "/tmp/cudevshr.cache");
  cfg->env_has_limits = env_has_limit_variable(get);

  /* force only tightens; disable would let a tenant switch its SM limit off: ignored. */
  const char *pol = get("GPU_CORE_UTILIZATION_POLICY");
  cfg->util_policy = VGPU_POLICY_DEFAULT;
  if (pol && strcasecmp(pol, "force") == 0) cfg->util_policy = VGPU_POLICY_FORCE;
  if (pol && strcasecmp(pol, "disable") == 0)
    VGPU_LOG_WARN("GPU_CORE_UTILIZATION_POLICY=disable ignored: a container cannot switch its own "
                  "SM limit off; following the region's utilization switch");

  cfg->priority = 1;
  const char *prio = get("CUDA_TASK_PRIORITY");
  if (prio) {
    if (vgpu_parse_uint(prio, &v) == VGPU_PARSE_OK && v <= 1000) {
      cfg->priority = (int)v;
    } else {
      VGPU_LOG_ERROR("invalid CUDA_TASK_PRIORITY=\"%.16s\": expected 0..1000; using 1", prio);
    }
  }

  /* A lower bound only: a context is charged max(this, what NVML measured), so 0 or a small
   * value cannot hide context memory (README "Who may set what"). */
  const char *cs = get("LIBVGPU_CONTEXT_SIZE");
  if (cs) {
    enum vgpu_parse_status st = vgpu_parse_size(cs, &v);
    if (st == VGPU_PARSE_OK && v > 0) {
      cfg->context_size = v;
      cfg->context_size_set = true;
    } else if (st != VGPU_PARSE_OK) {
      VGPU_LOG_ERROR("invalid LIBVGPU_CONTEXT_SIZE=\"%.64s\": %s; contexts are measured", cs,
                     vgpu_parse_status_str(st));
    }
  }

  if (get("CUDA_DISABLE_CONTROL"))
    VGPU_LOG_INFO("CUDA_DISABLE_CONTROL is the device plugin's switch (it then does not mount "
                  "libvgpu); the library itself keeps enforcing");
  cfg->disabled = false;

  copy_env(cfg->pod_uid, sizeof cfg->pod_uid, get("VGPU_POD_UID"));
  copy_env(cfg->container_name, sizeof cfg->container_name, get("VGPU_CONTAINER_NAME"));
}

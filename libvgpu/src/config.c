/*
 * config.c — the environment contract of HAMi-core, parsed once, strictly.
 *
 * HAMi-core parses sizes with strtoul(s, 0) and looks only at the last character for a suffix,
 * so "0100m" is octal (64 MiB), "1mb" is 1 byte and an overflow becomes "unlimited". We refuse
 * every such value with an Error line naming the variable, the value and the fix, and fall back
 * to the next source (per-device -> global -> unlimited), the same fallback HAMi uses for unset.
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
    case VGPU_PARSE_LEADING_ZERO:
      return "leading zero (HAMi-core would read it as octal); write the number without it";
    case VGPU_PARSE_NOT_DECIMAL: return "not a decimal number (no sign, blanks, hex or octal)";
    case VGPU_PARSE_BAD_SUFFIX: return "unknown suffix (use k, m or g, or none for bytes)";
    case VGPU_PARSE_OVERFLOW: return "too large for 64 bits";
  }
  return "?";
}

static enum vgpu_parse_status parse_digits(const char *s, const char **end, uint64_t *out) {
  if (!s || !*s) return VGPU_PARSE_EMPTY;
  if (!isdigit((unsigned char)s[0])) return VGPU_PARSE_NOT_DECIMAL;
  if (s[0] == '0' && isdigit((unsigned char)s[1])) return VGPU_PARSE_LEADING_ZERO;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) return VGPU_PARSE_NOT_DECIMAL;
  uint64_t v = 0;
  const char *p = s;
  for (; isdigit((unsigned char)*p); p++) {
    uint64_t d = (uint64_t)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return VGPU_PARSE_OVERFLOW;
    v = v * 10 + d;
  }
  *end = p;
  *out = v;
  return VGPU_PARSE_OK;
}

enum vgpu_parse_status vgpu_parse_uint(const char *s, uint64_t *out) {
  const char *end = NULL;
  uint64_t v = 0;
  enum vgpu_parse_status st = parse_digits(s, &end, &v);
  if (st != VGPU_PARSE_OK) return st;
  if (*end) return VGPU_PARSE_BAD_SUFFIX;
  *out = v;
  return VGPU_PARSE_OK;
}

enum vgpu_parse_status vgpu_parse_size(const char *s, uint64_t *out) {
  const char *end = NULL;
  uint64_t v = 0;
  enum vgpu_parse_status st = parse_digits(s, &end, &v);
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

/* Returns true and sets *out when `name` holds a valid value; logs and returns false otherwise. */
static bool env_size(const char *(*get)(const char *), const char *name, bool size, uint64_t *out) {
  const char *v = get(name);
  if (!v) return false;
  enum vgpu_parse_status st = size ? vgpu_parse_size(v, out) : vgpu_parse_uint(v, out);
  if (st == VGPU_PARSE_OK) return true;
  VGPU_LOG_ERROR("invalid %s=\"%.64s\": %s; value ignored", name, v, vgpu_parse_status_str(st));
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

  uint64_t global_mem = 0, global_sm = 100;
  if (env_size(get, "CUDA_DEVICE_MEMORY_LIMIT", true, &v)) global_mem = v;
  if (env_size(get, "CUDA_DEVICE_SM_LIMIT", false, &v)) global_sm = v;
  for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
    char name[64];
    snprintf(name, sizeof name, "CUDA_DEVICE_MEMORY_LIMIT_%d", i);
    cfg->mem_limit[i] = env_size(get, name, true, &v) ? v : global_mem;
    snprintf(name, sizeof name, "CUDA_DEVICE_SM_LIMIT_%d", i);
    uint64_t sm = env_size(get, name, false, &v) ? v : global_sm;
    cfg->sm_limit[i] = (sm == 0 || sm > 100) ? 100 : sm; /* HAMi: 0/unset/>=100 = no limit */
  }

  const char *path = get("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  snprintf(cfg->cache_path, sizeof cfg->cache_path, "%s",
           (path && *path) ? path : "/tmp/cudevshr.cache");

  const char *pol = get("GPU_CORE_UTILIZATION_POLICY");
  cfg->util_policy = VGPU_POLICY_DEFAULT;
  if (pol && strcasecmp(pol, "force") == 0) cfg->util_policy = VGPU_POLICY_FORCE;
  if (pol && strcasecmp(pol, "disable") == 0) cfg->util_policy = VGPU_POLICY_DISABLE;

  cfg->priority = 1;
  const char *prio = get("CUDA_TASK_PRIORITY");
  if (prio) {
    if (vgpu_parse_uint(prio, &v) == VGPU_PARSE_OK && v <= 1000) {
      cfg->priority = (int)v;
    } else {
      VGPU_LOG_ERROR("invalid CUDA_TASK_PRIORITY=\"%.16s\": expected 0..1000; using 1", prio);
    }
  }

  if (env_size(get, "LIBVGPU_CONTEXT_SIZE", true, &v)) {
    cfg->context_size = v;
    cfg->context_size_set = true;
  }

  const char *dis = get("CUDA_DISABLE_CONTROL");
  cfg->disabled = dis && (strcasecmp(dis, "true") == 0 || strcmp(dis, "1") == 0);

  copy_env(cfg->pod_uid, sizeof cfg->pod_uid, get("VGPU_POD_UID"));
  copy_env(cfg->container_name, sizeof cfg->container_name, get("VGPU_CONTAINER_NAME"));
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
}

const struct vgpu_config *vgpu_config_get(void) {
  pthread_once(&g_config_once, config_init);
  return &g_config;
}

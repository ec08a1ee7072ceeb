/*
 * env_fuzz.c — libFuzzer harness for libvgpu's environment parser: vgpu_parse_size,
 * vgpu_parse_uint and the whole vgpu_config_parse over a fake environment decoded from the input.
 * Input: NUL-free "NAME=VALUE" records separated by '\n' (names are taken from the real contract
 * when the record starts with a digit selector, so the fuzzer reaches every variable quickly).
 * Invariants checked besides "no crash / no sanitizer report": a parsed size is what strtoull
 * (HAMi-core's reader) makes of the same digits, limits stay in their documented ranges, a device
 * whose limit came from an unparsable value is never unlimited, strings stay NUL-terminated.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu.h"

static const char *const k_names[] = {
    "CUDA_DEVICE_MEMORY_LIMIT",   "CUDA_DEVICE_SM_LIMIT",         "CUDA_DEVICE_MEMORY_LIMIT_0",
    "CUDA_DEVICE_MEMORY_LIMIT_15", "CUDA_DEVICE_SM_LIMIT_3",      "CUDA_DEVICE_MEMORY_SHARED_CACHE",
    "LIBCUDA_LOG_LEVEL",          "GPU_CORE_UTILIZATION_POLICY",  "CUDA_TASK_PRIORITY",
    "LIBVGPU_CONTEXT_SIZE",       "CUDA_DISABLE_CONTROL",         "VGPU_POD_UID",
    "VGPU_CONTAINER_NAME",
};
#define N_NAMES (sizeof k_names / sizeof k_names[0])
#define MAX_VARS 32

static char *g_keys[MAX_VARS];
static char *g_vals[MAX_VARS];
static int g_n;

static const char *fake_getenv(const char *name) {
  for (int i = g_n - 1; i >= 0; i--)
    if (strcmp(g_keys[i], name) == 0) return g_vals[i];
  return NULL;
}

static void check(int cond, const char *what) {
  if (!cond) {
    fprintf(stderr, "env_fuzz: invariant broken: %s\n", what);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size + 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  buf[size] = 0;

  /* 1. the raw input as one value */
  uint64_t v = 0;
  enum vgpu_parse_status st = vgpu_parse_size(buf, &v);
  check(vgpu_parse_status_str(st) != NULL, "status string");
  if (st == VGPU_PARSE_OK && size > 0 && strlen(buf) == size) {
    char last = buf[size - 1];
    if (last >= '0' && last <= '9') { /* no suffix: the value is what strtoull reads, all of it */
      char *end = NULL;
      check(strtoull(buf, &end, 0) == v && *end == 0, "size without suffix = strtoull");
    }
  }
  st = vgpu_parse_uint(buf, &v);
  if (st == VGPU_PARSE_OK) {
    char again[32];
    snprintf(again, sizeof again, "%llu", (unsigned long long)v);
    check(strcmp(again, buf) == 0, "uint round-trips");
  }

  /* 2. records as an environment */
  g_n = 0;
  char *save = NULL;
  for (char *rec = strtok_r(buf, "\n", &save); rec && g_n < MAX_VARS;
       rec = strtok_r(NULL, "\n", &save)) {
    char *eq = strchr(rec, '=');
    if (!eq) continue;
    *eq = 0;
    const char *key = rec;
    if (rec[0] >= '0' && rec[0] <= '9' && rec[1] == 0) key = k_names[(size_t)(rec[0] - '0') % N_NAMES];
    else if (rec[0] >= 'a' && rec[0] <= 'd' && rec[1] == 0) key = k_names[10 + (size_t)(rec[0] - 'a') % 3];
    g_keys[g_n] = (char *)key;
    g_vals[g_n] = eq + 1;
    g_n++;
  }
  struct vgpu_config cfg;
  vgpu_config_parse(&cfg, fake_getenv);
  check(cfg.log_level >= 0 && cfg.log_level <= 4, "log level 0..4");
  check(cfg.priority >= 0 && cfg.priority <= 1000, "priority 0..1000");
  for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
    check(cfg.sm_limit[i] >= 1 && cfg.sm_limit[i] <= 100, "sm limit 1..100");
    if (cfg.mem_failsafe_mask & (1u << i)) check(cfg.mem_limit[i] != 0, "unparsable memory limit lifts nothing");
    if (cfg.sm_failsafe_mask & (1u << i)) check(cfg.sm_limit[i] < 100, "unparsable SM limit lifts nothing");
  }
  check(!cfg.disabled, "the environment never disables enforcement");
  check(memchr(cfg.cache_path, 0, sizeof cfg.cache_path) != NULL, "cache path terminated");
  check(memchr(cfg.pod_uid, 0, sizeof cfg.pod_uid) != NULL, "pod uid terminated");
  check(memchr(cfg.container_name, 0, sizeof cfg.container_name) != NULL, "container terminated");
  free(buf);
  return 0;
}

/*
 * env_parse_test.c — the environment contract: what HAMi-core accepts correctly we accept the same
 * way; what it mis-parses (octal, hex, junk suffixes, overflow) we refuse; per-device values
 * override the global one; unset/0/>100 SM limits mean "no limit".
 * Run: make -C libvgpu build/unit/env_parse_test && libvgpu/build/unit/env_parse_test
 */
#include "vgpu.h"
#include "vgpu_unit.h"

static void parse_size_table_matchesContract(void) {
  static const struct {
    const char *in;
    enum vgpu_parse_status st;
    uint64_t out;
  } t[] = {
      {"0", VGPU_PARSE_OK, 0},
      {"1", VGPU_PARSE_OK, 1},
      {"1024", VGPU_PARSE_OK, 1024},
      {"1k", VGPU_PARSE_OK, 1024},
      {"1K", VGPU_PARSE_OK, 1024},
      {"3000m", VGPU_PARSE_OK, 3000ull << 20},
      {"3000M", VGPU_PARSE_OK, 3000ull << 20},
      {"80g", VGPU_PARSE_OK, 80ull << 30},
      {"17179869184", VGPU_PARSE_OK, 17179869184ull},
      {"18446744073709551615", VGPU_PARSE_OK, UINT64_MAX},
      {"0100m", VGPU_PARSE_LEADING_ZERO, 0},
      {"00", VGPU_PARSE_LEADING_ZERO, 0},
      {"0x100", VGPU_PARSE_NOT_DECIMAL, 0},
      {"-1", VGPU_PARSE_NOT_DECIMAL, 0},
      {"+5", VGPU_PARSE_NOT_DECIMAL, 0},
      {" 5", VGPU_PARSE_NOT_DECIMAL, 0},
      {"m", VGPU_PARSE_NOT_DECIMAL, 0},
      {"", VGPU_PARSE_EMPTY, 0},
      {"5 ", VGPU_PARSE_BAD_SUFFIX, 0},
      {"1mb", VGPU_PARSE_BAD_SUFFIX, 0},
      {"1MiB", VGPU_PARSE_BAD_SUFFIX, 0},
      {"10x", VGPU_PARSE_BAD_SUFFIX, 0},
      {"1t", VGPU_PARSE_BAD_SUFFIX, 0},
      {"1.5g", VGPU_PARSE_BAD_SUFFIX, 0},
      {"18446744073709551616", VGPU_PARSE_OVERFLOW, 0},
      {"99999999999999999999", VGPU_PARSE_OVERFLOW, 0},
      {"17179869184g", VGPU_PARSE_OVERFLOW, 0},
      {"17179869183g", VGPU_PARSE_OK, 17179869183ull << 30},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    uint64_t v = 12345;
    enum vgpu_parse_status st = vgpu_parse_size(t[i].in, &v);
    if (st != t[i].st) fprintf(stderr, "  input \"%s\": status %d, want %d\n", t[i].in, st, t[i].st);
    EXPECT(st == t[i].st);
    if (st == VGPU_PARSE_OK) EXPECT_EQ_U(v, t[i].out);
  }
  uint64_t v = 0;
  EXPECT(vgpu_parse_size(NULL, &v) == VGPU_PARSE_EMPTY);
}

static void parse_uint_suffix_rejected(void) {
  uint64_t v = 0;
  EXPECT(vgpu_parse_uint("50", &v) == VGPU_PARSE_OK && v == 50);
  EXPECT(vgpu_parse_uint("50m", &v) == VGPU_PARSE_BAD_SUFFIX); /* HAMi would scale an SM limit */
  EXPECT(vgpu_parse_uint("050", &v) == VGPU_PARSE_LEADING_ZERO);
}

/* A tiny fake environment for vgpu_config_parse. */
static const char *const *g_env;
static const char *fake_get(const char *name) {
  size_t n = strlen(name);
  for (const char *const *e = g_env; *e; e++)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  return NULL;
}

static void config_defaults_whenUnset(void) {
  static const char *const env[] = {NULL};
  g_env = env;
  struct vgpu_config c;
  vgpu_config_parse(&c, fake_get);
  for (int i = 0; i < VGPU_MAX_DEVICES; i++) {
    EXPECT_EQ_U(c.mem_limit[i], 0);
    EXPECT_EQ_U(c.sm_limit[i], 100);
  }
  EXPECT(strcmp(c.cache_path, "/tmp/cudevshr.cache") == 0);
  EXPECT_EQ_U(c.log_level, 2);
  EXPECT_EQ_U(c.priority, 1);
  EXPECT(c.util_policy == VGPU_POLICY_DEFAULT);
  EXPECT(!c.disabled && !c.context_size_set);
}

static void config_perDevice_overridesGlobal(void) {
  static const char *const env[] = {
      "CUDA_DEVICE_MEMORY_LIMIT=1g", "CUDA_DEVICE_MEMORY_LIMIT_1=3000m",
      "CUDA_DEVICE_MEMORY_LIMIT_2=012m", /* rejected: falls back to the global 1g */
      "CUDA_DEVICE_SM_LIMIT=30", "CUDA_DEVICE_SM_LIMIT_3=0", "CUDA_DEVICE_SM_LIMIT_4=150",
      "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/x.cache", "LIBCUDA_LOG_LEVEL=0",
      "GPU_CORE_UTILIZATION_POLICY=FORCE", "CUDA_TASK_PRIORITY=0", "LIBVGPU_CONTEXT_SIZE=300m",
      "CUDA_DISABLE_CONTROL=true", "VGPU_POD_UID=abc", NULL};
  g_env = env;
  struct vgpu_config c;
  vgpu_config_parse(&c, fake_get);
  EXPECT_EQ_U(c.mem_limit[0], 1ull << 30);
  EXPECT_EQ_U(c.mem_limit[1], 3000ull << 20);
  EXPECT_EQ_U(c.mem_limit[2], 1ull << 30);
  EXPECT_EQ_U(c.mem_limit[15], 1ull << 30);
  EXPECT_EQ_U(c.sm_limit[0], 30);
  EXPECT_EQ_U(c.sm_limit[3], 100);
  EXPECT_EQ_U(c.sm_limit[4], 100);
  EXPECT(strcmp(c.cache_path, "/usr/local/vgpu/x.cache") == 0);
  EXPECT_EQ_U(c.log_level, 0);
  EXPECT(c.util_policy == VGPU_POLICY_FORCE);
  EXPECT_EQ_U(c.priority, 0);
  EXPECT(c.context_size_set && c.context_size == 300ull << 20);
  EXPECT(c.disabled);
  EXPECT(strcmp(c.pod_uid, "abc") == 0);
}

static void config_badValues_fallBackSafely(void) {
  static const char *const env[] = {"CUDA_DEVICE_MEMORY_LIMIT=0x1000", "LIBCUDA_LOG_LEVEL=9",
                                    "CUDA_TASK_PRIORITY=-1", "GPU_CORE_UTILIZATION_POLICY=disable",
                                    "CUDA_DEVICE_MEMORY_SHARED_CACHE=", NULL};
  g_env = env;
  struct vgpu_config c;
  vgpu_config_parse(&c, fake_get);
  EXPECT_EQ_U(c.mem_limit[0], 0);
  EXPECT_EQ_U(c.log_level, 2);
  EXPECT_EQ_U(c.priority, 1);
  EXPECT(c.util_policy == VGPU_POLICY_DISABLE);
  EXPECT(strcmp(c.cache_path, "/tmp/cudevshr.cache") == 0);
}

UNIT_MAIN("env_parse", CASE(parse_size_table_matchesContract), CASE(parse_uint_suffix_rejected),
          CASE(config_defaults_whenUnset), CASE(config_perDevice_overridesGlobal),
          CASE(config_badValues_fallBackSafely))

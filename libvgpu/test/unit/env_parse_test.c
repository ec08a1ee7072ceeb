/*
 * env_parse_test.c — the environment contract: numbers as HAMi-core reads them (decimal, octal,
 * hex, k/m/g suffix); what it would only partly read (junk suffixes, "08", overflow) is refused and
 * never lifts a limit (most restrictive valid limit, else the fail-safe one); per-device 0 means
 * "use the global value"; unset/0/>100 SM limits mean "no limit"; tenant knobs cannot switch
 * enforcement off. Property checks compare the parser with strtoul, HAMi-core's own reader.
 * Run: make -C libvgpu build/unit/env_parse_test && libvgpu/build/unit/env_parse_test
 */
#include <ctype.h>
#include <errno.h>

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
      {"0100m", VGPU_PARSE_OK, 64ull << 20}, /* octal, as HAMi-core reads it */
      {"00", VGPU_PARSE_OK, 0},
      {"0x100000", VGPU_PARSE_OK, 1ull << 20},
      {"0X10k", VGPU_PARSE_OK, 16ull << 10},
      {"0xffffffffffffffff", VGPU_PARSE_OK, UINT64_MAX},
      {"0x", VGPU_PARSE_NOT_DECIMAL, 0},
      {"0xg", VGPU_PARSE_NOT_DECIMAL, 0},
      {"08", VGPU_PARSE_NOT_DECIMAL, 0}, /* strtoul stops at 8: HAMi-core would read 0 */
      {"019m", VGPU_PARSE_NOT_DECIMAL, 0},
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
      {"0x10mm", VGPU_PARSE_BAD_SUFFIX, 0},
      {"18446744073709551616", VGPU_PARSE_OVERFLOW, 0},
      {"99999999999999999999", VGPU_PARSE_OVERFLOW, 0},
      {"17179869184g", VGPU_PARSE_OVERFLOW, 0},
      {"17179869183g", VGPU_PARSE_OK, 17179869183ull << 30},
      {"0x10000000000000000", VGPU_PARSE_OVERFLOW, 0},
      {"02000000000000000000000", VGPU_PARSE_OVERFLOW, 0},
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
  EXPECT(vgpu_parse_uint("50m", &v) == VGPU_PARSE_BAD_SUFFIX);
  EXPECT(vgpu_parse_uint("050", &v) == VGPU_PARSE_LEADING_ZERO);
  EXPECT(vgpu_parse_hami_uint("050", &v) == VGPU_PARSE_OK && v == 40); /* SM: octal as HAMi */
  EXPECT(vgpu_parse_hami_uint("0x32", &v) == VGPU_PARSE_OK && v == 50);
  EXPECT(vgpu_parse_hami_uint("50m", &v) == VGPU_PARSE_BAD_SUFFIX); /* HAMi would scale it */
  EXPECT(vgpu_parse_hami_uint("50%", &v) == VGPU_PARSE_BAD_SUFFIX);
}

/* Property: on random strings over the characters that matter, whenever we accept a value it is
 * exactly what HAMi-core computes (strtoul base 0 over the whole string, then the suffix), and we
 * accept every string HAMi-core reads whole without overflow. Deterministic xorshift, 200k cases. */
static void parse_size_agreesWithStrtoul_property(void) {
  static const char alphabet[] = "0123456789abcdefxXkKmMgG -+.%";
  uint64_t x = 0x9e3779b97f4a7c15ull;
  int checked_ok = 0;
  for (int n = 0; n < 200000; n++) {
    char s[24];
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int len = 1 + (int)(x % 12);
    for (int i = 0; i < len; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      /* digits far more often, so valid numbers are common */
      s[i] = (x & 3) ? "0123456789"[(x >> 8) % 10] : alphabet[(x >> 8) % (sizeof alphabet - 1)];
    }
    s[len] = 0;
    uint64_t ours = 0;
    enum vgpu_parse_status st = vgpu_parse_size(s, &ours);
    /* HAMi-core: strtoul over everything but a trailing k/m/g, which must then be all that is left */
    char body[24];
    snprintf(body, sizeof body, "%s", s);
    size_t bl = strlen(body);
    unsigned shift = 0;
    if (bl > 1 && strchr("kKmMgG", body[bl - 1])) {
      shift = strchr("kK", body[bl - 1]) ? 10 : strchr("mM", body[bl - 1]) ? 20 : 30;
      body[--bl] = 0;
    }
    errno = 0;
    char *end = NULL;
    unsigned long long h = strtoull(body, &end, 0);
    bool whole = bl > 0 && *end == 0 && errno == 0 && isdigit((unsigned char)body[0]) &&
                 !(shift && h > (UINT64_MAX >> shift));
    if (whole != (st == VGPU_PARSE_OK)) {
      fprintf(stderr, "  \"%s\": ours %d, strtoul whole=%d\n", s, st, whole);
      EXPECT(whole == (st == VGPU_PARSE_OK));
      return;
    }
    if (whole) {
      EXPECT_EQ_U(ours, (uint64_t)h << shift);
      checked_ok++;
    }
  }
  EXPECT(checked_ok > 10000); /* the generator really produces valid numbers */
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
      "CUDA_DEVICE_MEMORY_LIMIT_2=012m", /* octal as in HAMi-core: 10 MiB */
      "CUDA_DEVICE_MEMORY_LIMIT_3=0",    /* HAMi-core: 0 = the global value */
      "CUDA_DEVICE_SM_LIMIT=30", "CUDA_DEVICE_SM_LIMIT_3=0", "CUDA_DEVICE_SM_LIMIT_4=150",
      "CUDA_DEVICE_SM_LIMIT_5=20",
      "CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/x.cache", "LIBCUDA_LOG_LEVEL=0",
      "GPU_CORE_UTILIZATION_POLICY=FORCE", "CUDA_TASK_PRIORITY=0", "LIBVGPU_CONTEXT_SIZE=300m",
      "VGPU_POD_UID=abc", NULL};
  g_env = env;
  struct vgpu_config c;
  vgpu_config_parse(&c, fake_get);
  EXPECT_EQ_U(c.mem_limit[0], 1ull << 30);
  EXPECT_EQ_U(c.mem_limit[1], 3000ull << 20);
  EXPECT_EQ_U(c.mem_limit[2], 10ull << 20);
  EXPECT_EQ_U(c.mem_limit[3], 1ull << 30);
  EXPECT_EQ_U(c.mem_limit[15], 1ull << 30);
  EXPECT_EQ_U(c.sm_limit[0], 30);
  EXPECT_EQ_U(c.sm_limit[3], 30); /* per-device 0 = the global value, as in HAMi-core */
  EXPECT_EQ_U(c.sm_limit[4], 100);
  EXPECT_EQ_U(c.sm_limit[5], 20);
  EXPECT_EQ_U(c.mem_failsafe_mask, 0);
  EXPECT_EQ_U(c.sm_failsafe_mask, 0);
  EXPECT(strcmp(c.cache_path, "/usr/local/vgpu/x.cache") == 0);
  EXPECT_EQ_U(c.log_level, 0);
  EXPECT(c.util_policy == VGPU_POLICY_FORCE);
  EXPECT_EQ_U(c.priority, 0);
  EXPECT(c.context_size_set && c.context_size == 300ull << 20);
  EXPECT(strcmp(c.pod_uid, "abc") == 0);
}

/* HAMi-core's device plugin sets only per-device memory limits; 0 there means the global one,
 * and without a global one no limit (HAMi-core reads the global as 0 = unlimited). */
static void config_perDeviceZero_withoutGlobal_isUnlimited(void) {
  static const char *const env[] = {"CUDA_DEVICE_MEMORY_LIMIT_0=0", "CUDA_DEVICE_MEMORY_LIMIT_1=2g",
                                    "CUDA_DEVICE_SM_LIMIT_0=0", NULL};
  g_env = env;
  struct vgpu_config c;
  vgpu_config_parse(&c, fake_get);
  EXPECT_EQ_U(c.mem_limit[0], 0);
  EXPECT_EQ_U(c.mem_limit[1], 2ull << 30);
  EXPECT_EQ_U(c.sm_limit[0], 100);
}

/* A value that cannot be parsed never lifts a limit: the most restrictive valid limit of the same
 * kind applies to that device, the fail-safe limit when there is none. */
static void config_unparsable_neverLiftsLimit(void) {
  static const char *const env1[] = {"CUDA_DEVICE_MEMORY_LIMIT=1mb", NULL};
  g_env = env1;
  struct vgpu_config c;
  vgpu_config_parse(&c, fake_get);
  for (int i = 0; i < VGPU_MAX_DEVICES; i++) EXPECT_EQ_U(c.mem_limit[i], VGPU_FAILSAFE_MEM_LIMIT);
  EXPECT_EQ_U(c.mem_failsafe_mask, 0xffffu);

  static const char *const env2[] = {"CUDA_DEVICE_MEMORY_LIMIT_0=4g", "CUDA_DEVICE_MEMORY_LIMIT_1=3g",
                                     "CUDA_DEVICE_MEMORY_LIMIT_2=99999999999999999999",
                                     "CUDA_DEVICE_MEMORY_LIMIT_3=0", "CUDA_DEVICE_SM_LIMIT=50%",
                                     "CUDA_DEVICE_SM_LIMIT_1=40", NULL};
  g_env = env2;
  vgpu_config_parse(&c, fake_get);
  EXPECT_EQ_U(c.mem_limit[0], 4ull << 30);
  EXPECT_EQ_U(c.mem_limit[1], 3ull << 30);
  EXPECT_EQ_U(c.mem_limit[2], 3ull << 30); /* the most restrictive valid one */
  EXPECT_EQ_U(c.mem_limit[3], 0);          /* 0 = global, and there is no global */
  EXPECT_EQ_U(c.mem_failsafe_mask, 1u << 2);
  EXPECT_EQ_U(c.sm_limit[1], 40);
  EXPECT_EQ_U(c.sm_limit[0], 40); /* the global is invalid: the most restrictive valid SM limit */
  EXPECT_EQ_U(c.sm_limit[7], 40);
  EXPECT_EQ_U(c.sm_failsafe_mask, 0xffffu & ~(1u << 1));

  static const char *const env3[] = {"CUDA_DEVICE_SM_LIMIT=0x", "CUDA_DEVICE_MEMORY_LIMIT=64m",
                                     "CUDA_DEVICE_MEMORY_LIMIT_5=-1", NULL};
  g_env = env3;
  vgpu_config_parse(&c, fake_get);
  EXPECT_EQ_U(c.sm_limit[0], VGPU_FAILSAFE_SM_LIMIT);
  EXPECT_EQ_U(c.mem_limit[5], 64ull << 20);
  EXPECT_EQ_U(c.mem_limit[0], 64ull << 20);
}

/* Knobs a tenant can set in its own environment cannot switch enforcement off. */
static void config_tenantKnobs_cannotDisableEnforcement(void) {
  static const char *const env[] = {"CUDA_DEVICE_MEMORY_LIMIT=64m", "CUDA_DISABLE_CONTROL=true",
                                    "LIBVGPU_CONTEXT_SIZE=0", "GPU_CORE_UTILIZATION_POLICY=disable",
                                    NULL};
  g_env = env;
  struct vgpu_config c;
  vgpu_config_parse(&c, fake_get);
  EXPECT(!c.disabled);
  EXPECT(!c.context_size_set); /* 0: contexts are measured */
  EXPECT(c.util_policy == VGPU_POLICY_DEFAULT);
  EXPECT_EQ_U(c.mem_limit[0], 64ull << 20);
}

static void config_badValues_fallBackSafely(void) {
  static const char *const env[] = {"LIBCUDA_LOG_LEVEL=9", "CUDA_TASK_PRIORITY=-1",
                                    "CUDA_DEVICE_MEMORY_SHARED_CACHE=", "LIBVGPU_CONTEXT_SIZE=1mb",
                                    NULL};
  g_env = env;
  struct vgpu_config c;
  vgpu_config_parse(&c, fake_get);
  EXPECT_EQ_U(c.mem_limit[0], 0);
  EXPECT_EQ_U(c.log_level, 2);
  EXPECT_EQ_U(c.priority, 1);
  EXPECT(!c.context_size_set);
  EXPECT(strcmp(c.cache_path, "/tmp/cudevshr.cache") == 0);
}

UNIT_MAIN("env_parse", CASE(parse_size_table_matchesContract), CASE(parse_uint_suffix_rejected),
          CASE(parse_size_agreesWithStrtoul_property), CASE(config_defaults_whenUnset),
          CASE(config_perDevice_overridesGlobal), CASE(config_perDeviceZero_withoutGlobal_isUnlimited),
          CASE(config_unparsable_neverLiftsLimit), CASE(config_tenantKnobs_cannotDisableEnforcement),
          CASE(config_badValues_fallBackSafely))

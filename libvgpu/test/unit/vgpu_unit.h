/*
 * vgpu_unit.h — minimal test harness for libvgpu's unit tests: TEST(name) functions registered in
 * a table, EXPECT macros that record failures and keep going, and a summary line
 * "<suite>: N passed, M failed" that test/run_all.sh adds up.
 */
#ifndef VGPU_UNIT_H
#define VGPU_UNIT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_failed_checks;
#define EXPECT(cond)                                                                               \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "  %s:%d: expected %s\n", __FILE__, __LINE__, #cond);                        \
      unit_failed_checks++;                                                                        \
    }                                                                                              \
  } while (0)
#define EXPECT_EQ_U(a, b)                                                                          \
  do {                                                                                             \
    unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);                 \
    if (a_ != b_) {                                                                                \
      fprintf(stderr, "  %s:%d: expected %s == %s (%llu != %llu)\n", __FILE__, __LINE__, #a, #b,   \
              a_, b_);                                                                             \
      unit_failed_checks++;                                                                        \
    }                                                                                              \
  } while (0)

struct unit_case {
  const char *name;
  void (*fn)(void);
};

static inline int unit_run(const char *suite, const struct unit_case *cases, size_t n, int argc,
                           char **argv) {
  int pass = 0, fail = 0;
  for (size_t i = 0; i < n; i++) {
    if (argc > 1 && strstr(cases[i].name, argv[1]) == NULL) continue;
    int before = unit_failed_checks;
    cases[i].fn();
    if (unit_failed_checks == before) {
      pass++;
      printf("ok   %s\n", cases[i].name);
    } else {
      fail++;
      printf("FAIL %s\n", cases[i].name);
    }
  }
  printf("%s: %d passed, %d failed\n", suite, pass, fail);
  return fail ? 1 : 0;
}
#define UNIT_MAIN(suite, ...)                                                                      \
  int main(int argc, char **argv) {                                                                \
    static const struct unit_case cases_[] = {__VA_ARGS__};                                        \
    return unit_run(suite, cases_, sizeof cases_ / sizeof cases_[0], argc, argv);                  \
  }
#define CASE(fn) {#fn, fn}

#endif /* VGPU_UNIT_H */

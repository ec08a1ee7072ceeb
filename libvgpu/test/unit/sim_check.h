/*
 * sim_check.h — the limiter model tests' tiny framework: CHECK records a failure with its line and
 * keeps going; test_summary prints the count line the runner reads and gives the exit status.
 */
#ifndef VGPU_SIM_CHECK_H
#define VGPU_SIM_CHECK_H

#include <stdio.h>

static int g_failures, g_checks;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    g_checks++;                                            \
    if (!(cond)) {                                         \
      g_failures++;                                        \
      printf("  FAIL %s:%d: ", __FILE__, __LINE__);        \
      printf(__VA_ARGS__);                                 \
      printf("\n");                                        \
    }                                                      \
  } while (0)

static int test_summary(const char *name) {
  printf("%s: %d checks, %d failed\n", name, g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

#endif

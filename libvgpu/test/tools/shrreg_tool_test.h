/*
 * shrreg_tool_test.h — the CLI test's shared kit (shrreg_tool_test_kit.c): the pass/fail counters
 * and CHECK, running the tool (RUN, run_as), JSON queries, fixture paths, real processes in every
 * state, and region mapping. The tests are split by topic: shrreg_tool_test.c (arguments, layouts,
 * limits, permissions, hostile fields) and shrreg_tool_repair_test.c (cleanup, force-unlock, a
 * region written by libvgpu itself).
 */
#ifndef VGPU_SHRREG_TOOL_TEST_H
#define VGPU_SHRREG_TOOL_TEST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixtures.h"

extern int g_pass, g_fail;
extern const char *g_tool;
extern char g_dir[256];

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (cond) {                                                            \
      g_pass++;                                                            \
    } else {                                                               \
      g_fail++;                                                            \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                 \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
    }                                                                      \
  } while (0)

typedef struct {
  int rc;       /* exit status, -1 when killed */
  int signaled; /* killed by a signal */
  int sig;      /* that signal, 0 when none */
  char out[65536];
  char err[8192];
} run_t;

void run_as(run_t *r, uid_t uid, const char *env_cache, const char *const *args);

#define RUN(r, ...)                                       \
  do {                                                    \
    const char *const run_args_[] = {__VA_ARGS__, NULL};  \
    run_as((r), 0, NULL, run_args_);                      \
  } while (0)

const char *jq(const char *json, const char *expr);
int contains(const char *hay, const char *needle);
char *fx_path(const char *name);
pid_t spawn_sleeper(void);
void reap(pid_t p);
pid_t dead_pid(void);
pid_t zombie_pid(void);
uint64_t start_ticks_of(pid_t p);
fx_spec_t base_spec(fx_layout_t l);
void map_region(const char *path, uint8_t **base, size_t *size);
int sem_value_of(const char *path, size_t off);

/* shrreg_tool_repair_test.c */
void test_cleanup(void);
void test_force_unlock(void);
void test_libvgpu_written(const char *build);

#endif /* VGPU_SHRREG_TOOL_TEST_H */

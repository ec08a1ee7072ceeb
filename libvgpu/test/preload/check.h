/*
 * check.h — tiny assertion helpers for the preload test programs: a failed CHECK prints the
 * expression and location and exits 1, so the runner reports the case as failed.
 */
#ifndef VGPU_TEST_CHECK_H
#define VGPU_TEST_CHECK_H

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vgpu/vgpu_region.h"

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "CHECK failed %s:%d: %s\n", __FILE__, __LINE__, #cond);                      \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define CHECK_EQ_U(a, b)                                                                           \
  do {                                                                                             \
    unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);                 \
    if (a_ != b_) {                                                                                \
      fprintf(stderr, "CHECK failed %s:%d: %s == %s (%llu != %llu)\n", __FILE__, __LINE__, #a,     \
              #b, a_, b_);                                                                         \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define MiB (1ull << 20)

/* The region the library under test writes (CUDA_DEVICE_MEMORY_SHARED_CACHE), mapped read-only. */
static inline const vgpu_region_t *test_region(void) {
  static const vgpu_region_t *r;
  if (r) return r;
  const char *p = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  int fd = p ? open(p, O_RDONLY) : -1;
  if (fd < 0) return NULL;
  /* Another process may be creating it (open, then ftruncate to full size): a mapping read past
   * the file's end faults with SIGBUS, so wait until the file has its full size. */
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < (off_t)VGPU_REGION_FILE_SIZE) {
    close(fd);
    return NULL;
  }
  void *m = mmap(NULL, VGPU_REGION_FILE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  r = m == MAP_FAILED ? NULL : m;
  return r;
}

static inline const vgpu_region_ext_t *test_ext(void) {
  const vgpu_region_t *r = test_region();
  return r ? (const vgpu_region_ext_t *)((const char *)r + VGPU_EXT_OFFSET) : NULL;
}

/* Container-wide usage of a region device: sum over live slots (what HAMi's monitor computes). */
static inline unsigned long long test_used(int dev) {
  const vgpu_region_t *r = test_region();
  if (!r) return 0;
  unsigned long long sum = 0;
  int n = __atomic_load_n(&r->proc_num, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n && i < VGPU_MAX_PROCS; i++) {
    if (__atomic_load_n(&r->procs[i].status, __ATOMIC_ACQUIRE) == 0 || r->procs[i].pid == 0) continue;
    sum += __atomic_load_n(&r->procs[i].used[dev].total, __ATOMIC_ACQUIRE);
  }
  return sum;
}

/* Our own slot's usage (by pid). */
static inline unsigned long long test_my_used(int dev, int kind /* 0 ctx, 2 data, -1 total */) {
  const vgpu_region_t *r = test_region();
  if (!r) return 0;
  for (int i = 0; i < r->proc_num && i < VGPU_MAX_PROCS; i++) {
    if (r->procs[i].pid != getpid() || r->procs[i].status == 0) continue;
    const vgpu_device_memory_t *u = &r->procs[i].used[dev];
    return kind == 0 ? u->context_size : kind == 2 ? u->data_size : u->total;
  }
  return 0;
}

#endif /* VGPU_TEST_CHECK_H */

/* A thread that samples the container's usage of device 0 as fast as it can, for tests that must
 * show usage never goes above a limit while other threads or processes allocate. */
struct test_sampler {
  pthread_t thread;
  volatile int stop;
  unsigned long long limit, max;
};

static inline void *test_sampler_body(void *arg) {
  struct test_sampler *t = arg;
  while (!t->stop) {
    unsigned long long u = test_used(0);
    if (u > t->max) t->max = u;
  }
  return NULL;
}

static inline int test_sampler_start(struct test_sampler *t, unsigned long long limit) {
  t->stop = 0;
  t->limit = limit;
  t->max = 0;
  return pthread_create(&t->thread, NULL, test_sampler_body, t);
}

/* Stops the sampler: 0 when usage never went above the limit, else the highest usage seen. */
static inline unsigned long long test_sampler_stop(struct test_sampler *t) {
  t->stop = 1;
  pthread_join(t->thread, NULL);
  return t->max <= t->limit ? 0 : t->max;
}

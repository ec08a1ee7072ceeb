/*
 * worker.c — one tenant process of the allocation stress (run by coord.c under
 * LD_PRELOAD=libvgpu.so against the fake libcuda): THREADS threads allocate and free at random
 * for SECONDS, then the process writes the data bytes it still holds to <dir>/held.<pid> and
 * waits for SIGTERM, so the coordinator can compare its region slot with the truth.
 * Usage: worker <dir> <threads> <seconds> <seed>
 */
#include <cuda.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_HELD 64

static int g_seconds;
static unsigned g_seed;
static CUcontext g_ctx;
static uint64_t g_held; /* bytes the driver holds for allocations not freed, all threads */
static uint64_t g_granule; /* the device's allocation granularity */
static uint64_t g_ok, g_oom, g_frees;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What the driver holds for an allocation of `bytes`: one of at least a page is laid out in whole
 * pages of the allocation granularity (the library charges that); smaller ones share pages. */
static uint64_t held_for(size_t bytes) {
  if (bytes < g_granule) return bytes;
  return (bytes + g_granule - 1) / g_granule * g_granule;
}

static void *run(void *arg) {
  unsigned seed = g_seed * 7919u + (unsigned)(uintptr_t)arg;
  if (cuCtxSetCurrent(g_ctx) != CUDA_SUCCESS) abort();
  CUdeviceptr ptr[MAX_HELD];
  size_t size[MAX_HELD];
  int n = 0;
  double end = now_s() + g_seconds;
  while (now_s() < end) {
    if (n < MAX_HELD && (n == 0 || rand_r(&seed) % 2)) {
      size_t bytes = (size_t)(1 + rand_r(&seed) % 128) << 16; /* 64 KiB .. 8 MiB */
      CUresult rc = cuMemAlloc(&ptr[n], bytes);
      if (rc == CUDA_SUCCESS) {
        size[n++] = bytes;
        __atomic_add_fetch(&g_held, held_for(bytes), __ATOMIC_RELAXED);
        __atomic_add_fetch(&g_ok, 1, __ATOMIC_RELAXED);
      } else if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
        __atomic_add_fetch(&g_oom, 1, __ATOMIC_RELAXED);
      } else {
        fprintf(stderr, "worker %d: cuMemAlloc returned %d\n", (int)getpid(), (int)rc);
        abort();
      }
    } else if (n > 0) {
      int i = rand_r(&seed) % n;
      if (cuMemFree(ptr[i]) != CUDA_SUCCESS) abort();
      __atomic_sub_fetch(&g_held, held_for(size[i]), __ATOMIC_RELAXED);
      __atomic_add_fetch(&g_frees, 1, __ATOMIC_RELAXED);
      ptr[i] = ptr[--n];
      size[i] = size[n];
    }
  }
  return NULL; /* what is still held stays held: the coordinator checks it */
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s <dir> <threads> <seconds> <seed>\n", argv[0]);
    return 2;
  }
  int threads = atoi(argv[2]);
  g_seconds = atoi(argv[3]);
  g_seed = (unsigned)atoi(argv[4]);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, NULL); /* inherited by the threads; taken by sigwait */
  if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&g_ctx, 0) != CUDA_SUCCESS) return 3;
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
  size_t granule = 0;
  if (cuMemGetAllocationGranularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
          CUDA_SUCCESS ||
      granule == 0)
    return 3;
  g_granule = granule;
  pthread_t t[64];
  if (threads > 64) threads = 64;
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, run, (void *)(uintptr_t)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/held.%d", argv[1], (int)getpid());
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return 4;
  fprintf(f, "%llu %llu %llu %llu\n", (unsigned long long)g_held, (unsigned long long)g_ok,
          (unsigned long long)g_oom, (unsigned long long)g_frees);
  fclose(f);
  rename(tmp, path);
  int sig;
  sigwait(&term, &sig);
  return 0;
}

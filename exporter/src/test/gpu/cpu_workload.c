/*
 * cpu_workload.c — a CPU-only stand-in for workload.cu, for dry_run.sh on machines without a GPU:
 * same arguments, same region writes (the device uuid comes from FAKE_GPU_UUID), no CUDA. The fake
 * libnvidia-ml then plays the driver's part.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proof_region.h"

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s <busy|medium|idle> <cache-file> <alloc-MiB> <seconds>\n", argv[0]);
    return 1;
  }
  const char *uuid = getenv("FAKE_GPU_UUID") ? getenv("FAKE_GPU_UUID") : "GPU-fake";
  signal(SIGTERM, on_signal);
  if (proof_region_open(argv[2], uuid, 16ULL << 30) != 0 || proof_region_register() != 0) return 3;
  proof_region_set_hostpid((int)getpid());
  proof_region_add_memory((unsigned long long)strtol(argv[3], NULL, 10) << 20);
  printf("workload %s pid %d uuid %s (cpu stand-in)\n", argv[1], (int)getpid(), uuid);
  fflush(stdout);
  time_t end = time(NULL) + strtol(argv[4], NULL, 10);
  while (!g_stop && time(NULL) < end) {
    if (strcmp(argv[1], "idle") != 0) proof_region_kernel_launched();
    usleep(100 * 1000);
  }
  proof_region_unregister();
  return 0;
}

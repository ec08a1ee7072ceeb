/*
 * stripped.c — an application started without the container's environment (test/run_adopt.sh
 * runs it with `env -i`, as sshd, `su -` or a daemon that clears its environment would).
 *
 *   stripped holder MB          allocates MB MiB, prints "ready", holds it until stdin closes
 *   stripped allocs TOKEN...    in order: MB:ok / MB:oom (cuMemAlloc of MB MiB must succeed /
 *                               be refused with CUDA_ERROR_OUT_OF_MEMORY), total=MB (cuMemGetInfo's
 *                               total), used=PATH:MB (the region at PATH counts MB MiB on device 0
 *                               over its live slots: this process is counted container-wide)
 * Exit 0 when every token held.
 */
#include <cuda.h>
#include <string.h>

#include "cases.h"

static unsigned long long region_used(const char *path) {
  int fd = open(path, O_RDONLY);
  struct stat st;
  CHECK(fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(vgpu_region_t));
  const vgpu_region_t *r = mmap(NULL, sizeof *r, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  CHECK(r != MAP_FAILED);
  unsigned long long sum = 0;
  int n = __atomic_load_n(&r->proc_num, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n && i < VGPU_MAX_PROCS; i++) {
    if (__atomic_load_n(&r->procs[i].status, __ATOMIC_ACQUIRE) == 0 || r->procs[i].pid == 0) continue;
    sum += __atomic_load_n(&r->procs[i].used[0].total, __ATOMIC_ACQUIRE);
  }
  munmap((void *)r, sizeof *r);
  return sum;
}

int main(int argc, char **argv) {
  CHECK(argc >= 3);
  setup();
  if (strcmp(argv[1], "holder") == 0) {
    CUdeviceptr p;
    char c;
    CHECK(cuMemAlloc(&p, strtoull(argv[2], NULL, 10) * MiB) == CUDA_SUCCESS);
    printf("ready\n");
    fflush(stdout);
    while (read(0, &c, 1) > 0) {
    }
    CHECK(cuMemFree(p) == CUDA_SUCCESS);
    return 0;
  }
  CHECK(strcmp(argv[1], "allocs") == 0);
  for (int i = 2; i < argc; i++) {
    const char *t = argv[i];
    if (strncmp(t, "total=", 6) == 0) {
      size_t f = 0, total = 0;
      CHECK(cuMemGetInfo(&f, &total) == CUDA_SUCCESS);
      CHECK_EQ_U(total, strtoull(t + 6, NULL, 10) * MiB);
    } else if (strncmp(t, "used=", 5) == 0) {
      char path[4096];
      const char *colon = strrchr(t, ':');
      CHECK(colon != NULL && (size_t)(colon - t - 5) < sizeof path);
      memcpy(path, t + 5, (size_t)(colon - t - 5));
      path[colon - t - 5] = '\0';
      CHECK_EQ_U(region_used(path), strtoull(colon + 1, NULL, 10) * MiB);
    } else {
      char *end = NULL;
      CUdeviceptr p;
      unsigned long long mb = strtoull(t, &end, 10);
      CHECK(end != NULL && (strcmp(end, ":ok") == 0 || strcmp(end, ":oom") == 0));
      CUresult rc = cuMemAlloc(&p, mb * MiB);
      if (strcmp(end, ":ok") == 0) {
        if (rc != CUDA_SUCCESS) fprintf(stderr, "stripped: %s: cuMemAlloc returned %d\n", t, (int)rc);
        CHECK(rc == CUDA_SUCCESS);
      } else {
        if (rc != CUDA_ERROR_OUT_OF_MEMORY) fprintf(stderr, "stripped: %s: cuMemAlloc returned %d\n", t, (int)rc);
        CHECK(rc == CUDA_ERROR_OUT_OF_MEMORY);
      }
    }
  }
  return 0;
}

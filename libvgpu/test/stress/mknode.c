/*
 * mknode.c — writes a node's cache root for load and soak runs: containers [first, n) as
 * <root>/<podUID>_c<i>/vgpu.cache, each a region made by libvgpu's own opener with 1-4 devices
 * and two process slots holding some memory (pids that do not exist: the exporter's default
 * region-only metrics count them as HAMi does).
 * Usage: mknode <root> <n> [first]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "region.h"
#include "vgpu.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s <root> <n> [first]\n", argv[0]);
    return 2;
  }
  int n = atoi(argv[2]), first = argc > 3 ? atoi(argv[3]) : 0;
  mkdir(argv[1], 0755);
  for (int i = first; i < n; i++) {
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/%08x-0000-4000-8000-%012d_c%d", argv[1], i, i, i);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/vgpu.cache", dir);
    struct vgpu_region_init in;
    memset(&in, 0, sizeof in);
    in.device_num = 1 + (uint64_t)(i % 4);
    for (uint64_t d = 0; d < in.device_num; d++) {
      snprintf(in.uuids[d], sizeof in.uuids[d], "GPU-00000000-0000-0000-0000-%012llu", (unsigned long long)d);
      in.limit[d] = (8ull + (uint64_t)(i % 8)) << 30;
      in.sm_limit[d] = (uint64_t)(10 + i % 90);
    }
    in.priority = 1;
    struct vgpu_region_map m;
    if (vgpu_region_open(&m, path, &in) != VGPU_REGION_OK) {
      fprintf(stderr, "mknode: cannot create %s\n", path);
      return 1;
    }
    vgpu_region_lock(&m);
    for (int s = 0; s < 2; s++) {
      struct vgpu_slot_identity id = {.pid = 100000 + i * 2 + s, .hostpid = 200000 + i * 2 + s};
      int idx = vgpu_region_claim_slot(&m, &id);
      for (uint64_t d = 0; idx >= 0 && d < in.device_num; d++) {
        vgpu_slot_add(&m, idx, (int)d, VGPU_MEM_CONTEXT, 300ll << 20);
        vgpu_slot_add(&m, idx, (int)d, VGPU_MEM_DATA, (int64_t)(1 + i % 7) << 30);
      }
    }
    vgpu_region_unlock(&m);
    vgpu_region_close(&m);
  }
  return 0;
}

/*
 * region_write.c: writes the region of Fixtures.withExtension() through libvgpu's own structs in
 * vgpu_region.h (v1.2 layout plus extension block). LayoutAbiTest compares the file byte for byte
 * with what RegionWriter produces for the same spec, so the Java writer is proven byte-exact
 * against the C ABI, not only offset-equal. Usage: region_write <output-path>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu/vgpu_region.h"

#define GIB (1ULL << 30)

static void usage(vgpu_proc_slot_t *slot, int dev, uint64_t ctx, uint64_t module, uint64_t data,
                  uint64_t total, uint64_t monitor, uint64_t sm) {
  slot->used[dev].context_size = ctx;
  slot->used[dev].module_size = module;
  slot->used[dev].data_size = data;
  slot->used[dev].total = total;
  slot->monitorused[dev] = monitor;
  slot->device_util[dev].sm_util = sm;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <output-path>\n", argv[0]);
    return 2;
  }
  unsigned char *file = calloc(1, VGPU_REGION_FILE_SIZE);
  if (file == NULL) {
    return 1;
  }
  vgpu_region_t *r = (vgpu_region_t *)file;
  vgpu_region_ext_t *ext = (vgpu_region_ext_t *)(file + VGPU_EXT_OFFSET);

  r->major_version = VGPU_REGION_MAJOR;
  r->minor_version = VGPU_REGION_MINOR;
  r->sem[0] = 1; /* sem_init(pshared=1, value=1) on x86_64 glibc */
  r->sem_postinit[0] = 1;
  r->device_num = 2;
  strcpy(r->uuids[0], "GPU-11111111-2222-3333-4444-555555555555");
  strcpy(r->uuids[1], "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee");
  r->limit[0] = 8 * GIB;
  r->limit[1] = 4 * GIB;
  r->sm_limit[0] = 50;

  r->procs[0].pid = 101;
  r->procs[0].hostpid = 4101;
  r->procs[0].status = VGPU_SLOT_RUNNING;
  usage(&r->procs[0], 0, 300, 0, 700, 1000, 1100, 35);
  usage(&r->procs[0], 1, 10, 0, 20, 30, 0, 5);
  r->procs[2].pid = 102;
  r->procs[2].hostpid = 4102;
  r->procs[2].status = VGPU_SLOT_SUSPENDED;
  usage(&r->procs[2], 0, 100, 0, 400, 500, 0, 0);
  r->procs[3].pid = 103;
  r->procs[3].status = VGPU_SLOT_RUNNING;
  usage(&r->procs[3], 1, 1, 2, 3, 6, 0, 0);
  for (int i = 0; i < 4; i++) {
    ext->slots[i].start_time_ticks = 1000 + i;
    ext->slots[i].heartbeat_ns = 2000 + i;
    ext->slots[i].hostpid_source = i % 4;
    ext->slots[i].pid = r->procs[i].pid;
  }
  r->proc_num = 4;
  r->utilization_switch = 1;
  r->recent_kernel = 2;
  r->priority = 1;
  r->last_kernel_time = 1790000000ULL;

  ext->major = VGPU_EXT_MAJOR;
  ext->minor = VGPU_EXT_MINOR;
  ext->size = sizeof(vgpu_region_ext_t);
  ext->generation = 42;
  ext->created_ns = 1790000000000000000ULL;
  strcpy(ext->lib_version, "libvgpu 0.1.0");
  strcpy(ext->pod_uid, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
  strcpy(ext->container_name, "trainer");
  ext->devices[0].oom_rejections = 3;
  ext->devices[0].oom_rejected_bytes = 3 * GIB;
  ext->devices[0].throttled_ns = 5000000;
  ext->devices[0].launches_delayed = 7;
  ext->devices[0].launches_total = 1000;
  ext->devices[0].busy_ns = 9000000;
  ext->devices[0].limiter_window_ppm = 450000;
  ext->magic = VGPU_EXT_MAGIC;
  r->initialized_flag = VGPU_REGION_MAGIC;

  FILE *out = fopen(argv[1], "wb");
  if (out == NULL || fwrite(file, 1, VGPU_REGION_FILE_SIZE, out) != VGPU_REGION_FILE_SIZE ||
      fclose(out) != 0) {
    perror(argv[1]);
    return 1;
  }
  free(file);
  return 0;
}

/*
 * header_layouts.c: prints libvgpu's layout table (VGPU_LAYOUTS in vgpu_region.h, the one C
 * definition shrreg-tool reads every HAMi-core layout with) as "LAYOUT.field value" lines with
 * region-codec's Geometry field names. LayoutAbiTest compares every line with Geometry, so the C
 * table and the Java codec cannot drift apart. Fields a layout does not have are not printed.
 */
#include <stdio.h>

#include "vgpu/vgpu_region.h"

static const char *const k_java_names[VGPU_LAYOUT_COUNT] = {
    [VGPU_LAYOUT_L0A] = "L0A",
    [VGPU_LAYOUT_L0B] = "L0B",
    [VGPU_LAYOUT_V1_1] = "V1_1",
    [VGPU_LAYOUT_V1_1_BROKEN] = "V1_1_BROKEN",
    [VGPU_LAYOUT_V1_2] = "V1_2",
};

static void print(const char *layout, const char *field, size_t value) {
  if (value != VGPU_NO_FIELD) printf("%s.%s %zu\n", layout, field, value);
}

int main(void) {
  for (int i = 0; i < VGPU_LAYOUT_COUNT; i++) {
    const vgpu_layout_t *l = &VGPU_LAYOUTS[i];
    const char *n = k_java_names[l->id];
    print(n, "structSize", l->struct_size);
    print(n, "majorOffset", l->off_major);
    print(n, "minorOffset", l->off_minor);
    print(n, "ownerPidOffset", l->off_owner_pid);
    print(n, "semOffset", l->off_sem);
    print(n, "deviceNumOffset", l->off_device_num);
    print(n, "uuidsOffset", l->off_uuids);
    print(n, "limitOffset", l->off_limit);
    print(n, "smLimitOffset", l->off_sm_limit);
    print(n, "procsOffset", l->off_procs);
    print(n, "slotSize", l->slot_size);
    print(n, "procNumOffset", l->off_proc_num);
    print(n, "utilizationSwitchOffset", l->off_proc_num + 4);
    print(n, "recentKernelOffset", l->off_proc_num + 8);
    print(n, "priorityOffset", l->off_proc_num + 12);
    print(n, "lastKernelTimeOffset", l->off_last_kernel_time);
    print(n, "slotSeqlockOffset", l->slot_seqlock);
    print(n, "slotUsedOffset", l->slot_used);
    print(n, "usedStride", l->used_stride);
    print(n, "slotMonitorUsedOffset", l->slot_monitorused);
    print(n, "slotDeviceUtilOffset", l->slot_util);
    if (l->slot_util != VGPU_NO_FIELD) print(n, "deviceUtilStride", l->util_stride);
    print(n, "slotStatusOffset", l->slot_status);
  }
  return 0;
}

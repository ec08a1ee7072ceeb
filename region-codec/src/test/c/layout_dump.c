/*
 * layout_dump.c: prints the region ABI of libvgpu/include/vgpu/vgpu_region.h as "name value"
 * lines, one per size or offset. LayoutAbiTest compiles it with gcc and compares every line with
 * region-codec's constants, so the C header and the Java codec cannot drift apart silently.
 */
#include <stdio.h>

#include "vgpu/vgpu_region.h"

#define SIZE(type) printf("sizeof.%s %zu\n", #type, sizeof(type))
#define OFF(type, field) printf("offsetof.%s.%s %zu\n", #type, #field, offsetof(type, field))

int main(void) {
  SIZE(vgpu_device_memory_t);
  OFF(vgpu_device_memory_t, context_size);
  OFF(vgpu_device_memory_t, module_size);
  OFF(vgpu_device_memory_t, data_size);
  OFF(vgpu_device_memory_t, offset);
  OFF(vgpu_device_memory_t, total);

  SIZE(vgpu_device_util_t);
  OFF(vgpu_device_util_t, dec_util);
  OFF(vgpu_device_util_t, enc_util);
  OFF(vgpu_device_util_t, sm_util);

  SIZE(vgpu_proc_slot_t);
  OFF(vgpu_proc_slot_t, pid);
  OFF(vgpu_proc_slot_t, hostpid);
  OFF(vgpu_proc_slot_t, used);
  OFF(vgpu_proc_slot_t, monitorused);
  OFF(vgpu_proc_slot_t, device_util);
  OFF(vgpu_proc_slot_t, status);
  OFF(vgpu_proc_slot_t, seqlock);

  SIZE(vgpu_region_t);
  OFF(vgpu_region_t, initialized_flag);
  OFF(vgpu_region_t, major_version);
  OFF(vgpu_region_t, minor_version);
  OFF(vgpu_region_t, sm_init_flag);
  OFF(vgpu_region_t, owner_pid);
  OFF(vgpu_region_t, sem);
  OFF(vgpu_region_t, device_num);
  OFF(vgpu_region_t, uuids);
  OFF(vgpu_region_t, limit);
  OFF(vgpu_region_t, sm_limit);
  OFF(vgpu_region_t, procs);
  OFF(vgpu_region_t, proc_num);
  OFF(vgpu_region_t, utilization_switch);
  OFF(vgpu_region_t, recent_kernel);
  OFF(vgpu_region_t, priority);
  OFF(vgpu_region_t, last_kernel_time);
  OFF(vgpu_region_t, sem_postinit);

  SIZE(vgpu_ext_device_t);
  OFF(vgpu_ext_device_t, oom_rejections);
  OFF(vgpu_ext_device_t, oom_rejected_bytes);
  OFF(vgpu_ext_device_t, throttled_ns);
  OFF(vgpu_ext_device_t, launches_delayed);
  OFF(vgpu_ext_device_t, launches_total);
  OFF(vgpu_ext_device_t, busy_ns);
  OFF(vgpu_ext_device_t, limiter_window_ppm);

  SIZE(vgpu_ext_slot_t);
  OFF(vgpu_ext_slot_t, start_time_ticks);
  OFF(vgpu_ext_slot_t, heartbeat_ns);
  OFF(vgpu_ext_slot_t, hostpid_source);
  OFF(vgpu_ext_slot_t, pid);

  SIZE(vgpu_region_ext_t);
  OFF(vgpu_region_ext_t, magic);
  OFF(vgpu_region_ext_t, major);
  OFF(vgpu_region_ext_t, minor);
  OFF(vgpu_region_ext_t, size);
  OFF(vgpu_region_ext_t, flags);
  OFF(vgpu_region_ext_t, generation);
  OFF(vgpu_region_ext_t, created_ns);
  OFF(vgpu_region_ext_t, lib_version);
  OFF(vgpu_region_ext_t, pod_uid);
  OFF(vgpu_region_ext_t, container_name);
  OFF(vgpu_region_ext_t, lock_holder_since_ns);
  OFF(vgpu_region_ext_t, lock_holder_pid);
  OFF(vgpu_region_ext_t, devices);
  OFF(vgpu_region_ext_t, slots);

  printf("const.VGPU_REGION_MAGIC %ld\n", (long)VGPU_REGION_MAGIC);
  printf("const.VGPU_REGION_MAJOR %ld\n", (long)VGPU_REGION_MAJOR);
  printf("const.VGPU_REGION_MINOR %ld\n", (long)VGPU_REGION_MINOR);
  printf("const.VGPU_MAX_DEVICES %ld\n", (long)VGPU_MAX_DEVICES);
  printf("const.VGPU_MAX_PROCS %ld\n", (long)VGPU_MAX_PROCS);
  printf("const.VGPU_UUID_LEN %ld\n", (long)VGPU_UUID_LEN);
  printf("const.VGPU_EXT_OFFSET %ld\n", (long)VGPU_EXT_OFFSET);
  printf("const.VGPU_EXT_MAGIC %ld\n", (long)VGPU_EXT_MAGIC);
  printf("const.VGPU_EXT_MAJOR %ld\n", (long)VGPU_EXT_MAJOR);
  printf("const.VGPU_LIB_VERSION_LEN %ld\n", (long)VGPU_LIB_VERSION_LEN);
  printf("const.VGPU_POD_UID_LEN %ld\n", (long)VGPU_POD_UID_LEN);
  printf("const.VGPU_CONTAINER_NAME_LEN %ld\n", (long)VGPU_CONTAINER_NAME_LEN);
  printf("const.VGPU_REGION_FILE_SIZE %zu\n", (size_t)VGPU_REGION_FILE_SIZE);
  return 0;
}

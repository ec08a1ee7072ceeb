/*
 * legacy_layouts.c: the older HAMi-core layouts (L0a, L0b, v1.1-broken), declared from their field
 * lists in hami-core-facts.md section 1 (types only, no offsets), so gcc computes the offsets.
 * LayoutAbiTest compares them with region-codec's Geometry constants, which were written from the
 * facts' offset tables: two independent routes to the same numbers. x86_64 glibc (sem_t = 32 B).
 */
#include <semaphore.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct { /* L0: five counters per device */
  uint64_t context_size, module_size, data_size, offset, total;
} l0_device_memory_t;

typedef struct { /* L0b: three utilization counters per device */
  uint64_t dec_util, enc_util, sm_util;
} l0_device_util_t;

typedef struct {
  uint64_t context_size, module_size, data_size, offset, total, unused[3];
} v1_device_memory_t;

typedef struct {
  uint64_t dec_util, enc_util, sm_util, unused[3];
} v1_device_util_t;

typedef struct {
  int32_t pid, hostpid;
  l0_device_memory_t used[16];
  uint64_t monitorused[16];
  int32_t status;
} l0a_slot_t;

typedef struct {
  int32_t pid, hostpid;
  l0_device_memory_t used[16];
  uint64_t monitorused[16];
  l0_device_util_t device_util[16];
  int32_t status;
} l0b_slot_t;

typedef struct {
  int32_t pid, hostpid;
  uint64_t seqlock; /* inserted here by the broken merge */
  v1_device_memory_t used[16];
  uint64_t monitorused[16];
  v1_device_util_t device_util[16];
  int32_t status;
  uint64_t unused[2];
} broken_slot_t;

#define L0_HEADER(slot_t)        \
  int32_t initialized_flag;      \
  int32_t sm_init_flag;          \
  size_t owner_pid;              \
  sem_t sem;                     \
  uint64_t num;                  \
  char uuids[16][96];            \
  uint64_t limit[16];            \
  uint64_t sm_limit[16];         \
  slot_t procs[1024];            \
  int proc_num;                  \
  int utilization_switch;        \
  int recent_kernel;             \
  int priority;

typedef struct { L0_HEADER(l0a_slot_t) } l0a_region_t;
typedef struct { L0_HEADER(l0b_slot_t) } l0b_region_t;

typedef struct {
  int32_t initialized_flag;
  uint32_t major_version, minor_version;
  int32_t sm_init_flag;
  size_t owner_pid;
  sem_t sem;
  sem_t sem_postinit; /* inserted here by the broken merge */
  uint64_t num;
  char uuids[16][96];
  uint64_t limit[16];
  uint64_t sm_limit[16];
  broken_slot_t procs[1024];
  int proc_num;
  int utilization_switch;
  int recent_kernel;
  int priority;
  uint64_t last_kernel_time;
  uint64_t unused[4];
} broken_region_t;

#define P(layout, name, value) printf("%s.%s %zu\n", layout, name, (size_t)(value))

#define COMMON(layout, region_t, slot_t)                                            \
  P(layout, "structSize", sizeof(region_t));                                        \
  P(layout, "smInitFlagOffset", offsetof(region_t, sm_init_flag));                  \
  P(layout, "ownerPidOffset", offsetof(region_t, owner_pid));                       \
  P(layout, "semOffset", offsetof(region_t, sem));                                  \
  P(layout, "deviceNumOffset", offsetof(region_t, num));                            \
  P(layout, "uuidsOffset", offsetof(region_t, uuids));                              \
  P(layout, "limitOffset", offsetof(region_t, limit));                              \
  P(layout, "smLimitOffset", offsetof(region_t, sm_limit));                         \
  P(layout, "procsOffset", offsetof(region_t, procs));                              \
  P(layout, "slotSize", sizeof(slot_t));                                            \
  P(layout, "procNumOffset", offsetof(region_t, proc_num));                         \
  P(layout, "utilizationSwitchOffset", offsetof(region_t, utilization_switch));     \
  P(layout, "recentKernelOffset", offsetof(region_t, recent_kernel));               \
  P(layout, "priorityOffset", offsetof(region_t, priority));                        \
  P(layout, "slotUsedOffset", offsetof(slot_t, used));                              \
  P(layout, "usedStride", sizeof(((slot_t *)0)->used[0]));                          \
  P(layout, "slotMonitorUsedOffset", offsetof(slot_t, monitorused));                \
  P(layout, "slotStatusOffset", offsetof(slot_t, status))

int main(void) {
  COMMON("L0A", l0a_region_t, l0a_slot_t);
  COMMON("L0B", l0b_region_t, l0b_slot_t);
  P("L0B", "slotDeviceUtilOffset", offsetof(l0b_slot_t, device_util));
  P("L0B", "deviceUtilStride", sizeof(l0_device_util_t));
  COMMON("V1_1_BROKEN", broken_region_t, broken_slot_t);
  P("V1_1_BROKEN", "majorOffset", offsetof(broken_region_t, major_version));
  P("V1_1_BROKEN", "minorOffset", offsetof(broken_region_t, minor_version));
  P("V1_1_BROKEN", "semPostinitOffset", offsetof(broken_region_t, sem_postinit));
  P("V1_1_BROKEN", "lastKernelTimeOffset", offsetof(broken_region_t, last_kernel_time));
  P("V1_1_BROKEN", "slotSeqlockOffset", offsetof(broken_slot_t, seqlock));
  P("V1_1_BROKEN", "slotDeviceUtilOffset", offsetof(broken_slot_t, device_util));
  P("V1_1_BROKEN", "deviceUtilStride", sizeof(v1_device_util_t));
  return 0;
}

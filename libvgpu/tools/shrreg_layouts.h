/*
 * shrreg_layouts.h — offsets of every shared-region layout HAMi-core ever wrote, as the tool needs
 * them (tool-only; the library itself knows only v1.2 through vgpu_region.h).
 *
 * Ownership: read-only tables, no state. The v1.1/v1.2 row is derived from vgpu_region.h with
 * offsetof, so it cannot drift from the ABI header; the older rows are the offsets documented for
 * L0a, L0b and the mislabelled "v1.1-broken" layout (HAMi-core PR #163 era).
 */
#ifndef VGPU_SHRREG_LAYOUTS_H
#define VGPU_SHRREG_LAYOUTS_H

#include <stddef.h>
#include <stdint.h>

#include "vgpu/vgpu_region.h"

#define SHRREG_NO_FIELD ((size_t)-1)

typedef enum {
  SHRREG_L0A = 0,
  SHRREG_L0B,
  SHRREG_V1_1,
  SHRREG_V1_1_BROKEN,
  SHRREG_V1_2,
  SHRREG_LAYOUT_COUNT
} shrreg_layout_id_t;

typedef struct {
  shrreg_layout_id_t id;
  const char *label;
  size_t struct_size;
  size_t off_major; /* SHRREG_NO_FIELD when the layout has no version fields */
  size_t off_minor;
  size_t off_owner_pid;
  size_t off_sem;
  size_t off_device_num;
  size_t off_uuids;
  size_t off_limit;
  size_t off_sm_limit;
  size_t off_procs;
  size_t slot_size;
  size_t off_proc_num; /* utilization_switch, recent_kernel, priority follow at +4/+8/+12 */
  size_t off_last_kernel_time;
  size_t slot_seqlock; /* only meaningful when seqlock_valid */
  size_t slot_used;    /* device_memory entries: context +0, module +8, data +16, total +32 */
  size_t used_stride;
  size_t slot_monitorused;
  size_t slot_util; /* device_util entries: sm_util +16 */
  size_t util_stride;
  size_t slot_status;
  int writable;      /* the tool writes only layouts current libraries still read */
  int seqlock_valid; /* v1.2: the per-slot seqlock guards used[] */
} shrreg_layout_t;

static const shrreg_layout_t SHRREG_LAYOUTS[SHRREG_LAYOUT_COUNT] = {
    [SHRREG_L0A] = {SHRREG_L0A, "L0a", 804680, SHRREG_NO_FIELD, SHRREG_NO_FIELD, 8, 16, 48, 56, 1592,
                    1720, 1848, 784, 804664, SHRREG_NO_FIELD, SHRREG_NO_FIELD, 8, 40, 648,
                    SHRREG_NO_FIELD, 0, 776, 0, 0},
    [SHRREG_L0B] = {SHRREG_L0B, "L0b", 1197896, SHRREG_NO_FIELD, SHRREG_NO_FIELD, 8, 16, 48, 56,
                    1592, 1720, 1848, 1168, 1197880, SHRREG_NO_FIELD, SHRREG_NO_FIELD, 8, 40, 648,
                    776, 24, 1160, 0, 0},
    [SHRREG_V1_1] = {SHRREG_V1_1, "v1.1", sizeof(vgpu_region_t), offsetof(vgpu_region_t, major_version),
                     offsetof(vgpu_region_t, minor_version), offsetof(vgpu_region_t, owner_pid),
                     offsetof(vgpu_region_t, sem), offsetof(vgpu_region_t, device_num),
                     offsetof(vgpu_region_t, uuids), offsetof(vgpu_region_t, limit),
                     offsetof(vgpu_region_t, sm_limit), offsetof(vgpu_region_t, procs),
                     sizeof(vgpu_proc_slot_t), offsetof(vgpu_region_t, proc_num),
                     offsetof(vgpu_region_t, last_kernel_time), offsetof(vgpu_proc_slot_t, seqlock),
                     offsetof(vgpu_proc_slot_t, used), sizeof(vgpu_device_memory_t),
                     offsetof(vgpu_proc_slot_t, monitorused), offsetof(vgpu_proc_slot_t, device_util),
                     sizeof(vgpu_device_util_t), offsetof(vgpu_proc_slot_t, status), 1, 0},
    [SHRREG_V1_1_BROKEN] = {SHRREG_V1_1_BROKEN, "v1.1-broken", 2008984, 4, 8, 16, 24, 88, 96, 1632,
                            1760, 1888, 1960, 2008928, 2008944, 8, 16, 64, 1040, 1168, 48, 1936, 0, 0},
    [SHRREG_V1_2] = {SHRREG_V1_2, "v1.2", sizeof(vgpu_region_t), offsetof(vgpu_region_t, major_version),
                     offsetof(vgpu_region_t, minor_version), offsetof(vgpu_region_t, owner_pid),
                     offsetof(vgpu_region_t, sem), offsetof(vgpu_region_t, device_num),
                     offsetof(vgpu_region_t, uuids), offsetof(vgpu_region_t, limit),
                     offsetof(vgpu_region_t, sm_limit), offsetof(vgpu_region_t, procs),
                     sizeof(vgpu_proc_slot_t), offsetof(vgpu_region_t, proc_num),
                     offsetof(vgpu_region_t, last_kernel_time), offsetof(vgpu_proc_slot_t, seqlock),
                     offsetof(vgpu_proc_slot_t, used), sizeof(vgpu_device_memory_t),
                     offsetof(vgpu_proc_slot_t, monitorused), offsetof(vgpu_proc_slot_t, device_util),
                     sizeof(vgpu_device_util_t), offsetof(vgpu_proc_slot_t, status), 1, 1},
};

/*
 * libvgpu's slot-table lock: an fcntl write lock on this one byte of the cache file (released by
 * the kernel when the holder dies), plus the extension's lock_holder_pid/since record. Must equal
 * VGPU_SLOT_LOCK_OFFSET in libvgpu/src/region.h (checked when that header is on the include path).
 */
#define SHRREG_SLOT_LOCK_OFFSET 0x40000100LL
/* libvgpu keeps a slot whose pid looks dead while its heartbeat is fresher than this. */
#define SHRREG_HEARTBEAT_STALE_NS 1000000000ull
#if defined(__has_include)
#if __has_include("region.h")
#include "region.h"
_Static_assert(SHRREG_SLOT_LOCK_OFFSET == VGPU_SLOT_LOCK_OFFSET, "slot lock offset matches libvgpu");
_Static_assert(SHRREG_HEARTBEAT_STALE_NS == VGPU_HEARTBEAT_STALE_NS, "heartbeat staleness matches libvgpu");
#endif
#endif

/* Region files larger than this are not regions (the largest real one, v1.2 + extension, is ~2 MB). */
#define SHRREG_MAX_FILE_SIZE ((size_t)64 << 20)

/*
 * Picks the layout of a mapped file: size first, version second (the v1.1-broken layout still says
 * 1.1). Returns the layout, or NULL with *why set to a short reason.
 */
static inline const shrreg_layout_t *shrreg_detect_layout(const uint8_t *base, size_t size,
                                                          const char **why) {
  int32_t magic;
  uint32_t major;
  uint32_t minor;
  if (size < 12) {
    *why = "file too small to be a region";
    return NULL;
  }
  if (size > SHRREG_MAX_FILE_SIZE) {
    *why = "file too large to be a region";
    return NULL;
  }
  magic = __atomic_load_n((const int32_t *)base, __ATOMIC_ACQUIRE);
  if (magic != VGPU_REGION_MAGIC) {
    *why = "no region magic at offset 0 (not a region, or still being created)";
    return NULL;
  }
  major = __atomic_load_n((const uint32_t *)(base + 4), __ATOMIC_RELAXED);
  minor = __atomic_load_n((const uint32_t *)(base + 8), __ATOMIC_RELAXED);
  if (size == 804680 || size == 804681) return &SHRREG_LAYOUTS[SHRREG_L0A];
  if (size == 1197896 || size == 1197897) return &SHRREG_LAYOUTS[SHRREG_L0B];
  if ((size == 2008984 || size == 2008985) && major == 1) return &SHRREG_LAYOUTS[SHRREG_V1_1_BROKEN];
  if (size >= sizeof(vgpu_region_t) && major == 1)
    return minor >= 2 ? &SHRREG_LAYOUTS[SHRREG_V1_2] : &SHRREG_LAYOUTS[SHRREG_V1_1];
  if (size >= sizeof(vgpu_region_t)) {
    *why = "unknown region major version";
    return NULL;
  }
  *why = "unknown region file size";
  return NULL;
}

#endif /* VGPU_SHRREG_LAYOUTS_H */

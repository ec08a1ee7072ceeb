/*
 * vgpu_region.h — the shared-region ABI: HAMi-core's v1.2 layout, byte for byte, plus our
 * extension block. This header is the single source of truth for offsets across languages:
 * region-codec's layout test compiles a program against it and compares with the Java constants.
 *
 * Ownership and threading: the region lives in a MAP_SHARED file mapping written by every
 * process of one container (libvgpu) and read (and, in write-back modes, partly written) by the
 * node exporter. Only fixed-width types; every 64-bit field is 8-byte aligned; atomics are plain
 * integers here and accessed with __atomic builtins so the layout does not depend on _Atomic.
 */
#ifndef VGPU_REGION_H
#define VGPU_REGION_H

#include <stddef.h>
#include <stdint.h>

#define VGPU_REGION_MAGIC 19920718          /* HAMi's MULTIPROCESS_SHARED_REGION_MAGIC_FLAG */
#define VGPU_REGION_MAJOR 1
#define VGPU_REGION_MINOR 2
#define VGPU_MAX_DEVICES 16
#define VGPU_MAX_PROCS 1024
#define VGPU_UUID_LEN 96
#define VGPU_SEM_SIZE 32                    /* sizeof(sem_t) on x86_64 glibc */

/* Slot status values (HAMi semantics). */
#define VGPU_SLOT_FREE 0
#define VGPU_SLOT_RUNNING 1
#define VGPU_SLOT_SUSPENDED 2

typedef struct {
  uint64_t context_size;
  uint64_t module_size;
  uint64_t data_size;
  uint64_t offset;
  uint64_t total;
  uint64_t unused[3];
} vgpu_device_memory_t; /* 64 bytes */

typedef struct {
  uint64_t dec_util;
  uint64_t enc_util;
  uint64_t sm_util;
  uint64_t unused[3];
} vgpu_device_util_t; /* 48 bytes */

typedef struct {
  int32_t pid;     /* pid in the container's namespace */
  int32_t hostpid; /* pid in the host namespace, 0 when unknown */
  vgpu_device_memory_t used[VGPU_MAX_DEVICES];
  uint64_t monitorused[VGPU_MAX_DEVICES];
  vgpu_device_util_t device_util[VGPU_MAX_DEVICES];
  int32_t status;
  int32_t pad0;
  uint64_t seqlock; /* odd while the slot's used[] is being written */
  uint64_t unused[2];
} vgpu_proc_slot_t; /* 1960 bytes */

typedef struct {
  int32_t initialized_flag; /* VGPU_REGION_MAGIC, stored last on creation */
  uint32_t major_version;
  uint32_t minor_version;
  int32_t sm_init_flag;
  uint64_t owner_pid;
  uint8_t sem[VGPU_SEM_SIZE];
  uint64_t device_num;
  char uuids[VGPU_MAX_DEVICES][VGPU_UUID_LEN];
  uint64_t limit[VGPU_MAX_DEVICES];    /* bytes, 0 = unlimited */
  uint64_t sm_limit[VGPU_MAX_DEVICES]; /* percent, 0 or >= 100 = unlimited */
  vgpu_proc_slot_t procs[VGPU_MAX_PROCS];
  int32_t proc_num;
  int32_t utilization_switch;
  int32_t recent_kernel;
  int32_t priority;
  uint64_t last_kernel_time; /* epoch seconds */
  uint8_t sem_postinit[VGPU_SEM_SIZE];
} vgpu_region_t; /* 2 008 952 bytes */

/*
 * Extension block: our additions, where HAMi readers never look. It starts at the first 64-byte
 * boundary after the v1.2 struct (HAMi's library writes one byte at offset sizeof(vgpu_region_t);
 * that byte lies before the extension). A file with the extension is
 * VGPU_EXT_OFFSET + sizeof(vgpu_region_ext_t) bytes; HAMi's monitor accepts any v1 file that large.
 */
#define VGPU_EXT_OFFSET 2008960
#define VGPU_EXT_MAGIC 0x54584556u /* "VEXT" little-endian */
#define VGPU_EXT_MAJOR 1
#define VGPU_EXT_MINOR 0
#define VGPU_LIB_VERSION_LEN 32
#define VGPU_POD_UID_LEN 64
#define VGPU_CONTAINER_NAME_LEN 256

/* How a slot's hostpid was learned (vgpu_ext_slot_t.hostpid_source). */
#define VGPU_HOSTPID_UNKNOWN 0
#define VGPU_HOSTPID_SAME_NAMESPACE 1 /* process runs in the host pid namespace */
#define VGPU_HOSTPID_NSPID 2          /* read from /proc/self/status NSpid (host procfs visible) */
#define VGPU_HOSTPID_EXPORTER 3       /* written back by the node exporter */

typedef struct {
  uint64_t oom_rejections;      /* allocations refused by the memory limit */
  uint64_t oom_rejected_bytes;  /* bytes those allocations asked for */
  uint64_t throttled_ns;        /* time launches spent waiting in the SM limiter */
  uint64_t launches_delayed;    /* launches that waited at all */
  uint64_t launches_total;      /* launches seen by the limiter */
  uint64_t busy_ns;             /* GPU busy time the limiter measured for this container */
  uint64_t limiter_window_ppm;  /* last window's measured share, parts per million */
  uint64_t limiter_bucket;      /* limiter's shared token-bucket state (see libvgpu/src/limiter.c) */
} vgpu_ext_device_t; /* 64 bytes */

typedef struct {
  uint64_t start_time_ticks; /* field 22 of /proc/<pid>/stat: detects pid reuse */
  uint64_t heartbeat_ns;     /* CLOCK_REALTIME ns of the process's last liveness tick */
  int32_t hostpid_source;    /* VGPU_HOSTPID_* */
  int32_t pid;               /* procs[i].pid this entry describes; another value = stale entry
                                (HAMi-core's compaction moved procs[] under it), ignore it */
  uint64_t unused;
} vgpu_ext_slot_t; /* 32 bytes, indexed like procs[] */

typedef struct {
  uint32_t magic; /* VGPU_EXT_MAGIC, stored last */
  uint16_t major; /* VGPU_EXT_MAJOR */
  uint16_t minor; /* VGPU_EXT_MINOR */
  uint32_t size;  /* sizeof(vgpu_region_ext_t) as written */
  uint32_t flags;
  uint64_t generation; /* bumped (odd while in progress) around every slot-table compaction */
  uint64_t created_ns; /* CLOCK_REALTIME at region creation */
  char lib_version[VGPU_LIB_VERSION_LEN];
  char pod_uid[VGPU_POD_UID_LEN];
  char container_name[VGPU_CONTAINER_NAME_LEN];
  uint64_t lock_holder_since_ns; /* when the current slot-table lock holder took it, 0 if free */
  int32_t lock_holder_pid;       /* container pid of the current holder, 0 if free */
  int32_t pad0;
  /* Robust process-shared pthread_mutex_t of the allocation path, valid when flags bit 0 is set
   * (VGPU_EXT_FLAG_RESERVE_MUTEX); 48 bytes so it fits glibc's 40-byte mutex. */
  uint64_t reserve_mutex[6];
  vgpu_ext_device_t devices[VGPU_MAX_DEVICES];
  vgpu_ext_slot_t slots[VGPU_MAX_PROCS];
} vgpu_region_ext_t;

#define VGPU_REGION_FILE_SIZE (VGPU_EXT_OFFSET + sizeof(vgpu_region_ext_t))

/* ABI guards: every offset region-codec relies on. */
_Static_assert(sizeof(vgpu_device_memory_t) == 64, "device_memory size");
_Static_assert(sizeof(vgpu_device_util_t) == 48, "device_util size");
_Static_assert(sizeof(vgpu_proc_slot_t) == 1960, "slot size");
_Static_assert(offsetof(vgpu_proc_slot_t, used) == 8, "slot.used");
_Static_assert(offsetof(vgpu_proc_slot_t, monitorused) == 1032, "slot.monitorused");
_Static_assert(offsetof(vgpu_proc_slot_t, device_util) == 1160, "slot.device_util");
_Static_assert(offsetof(vgpu_proc_slot_t, status) == 1928, "slot.status");
_Static_assert(offsetof(vgpu_proc_slot_t, seqlock) == 1936, "slot.seqlock");
_Static_assert(offsetof(vgpu_region_t, owner_pid) == 16, "owner_pid");
_Static_assert(offsetof(vgpu_region_t, sem) == 24, "sem");
_Static_assert(offsetof(vgpu_region_t, device_num) == 56, "device_num");
_Static_assert(offsetof(vgpu_region_t, uuids) == 64, "uuids");
_Static_assert(offsetof(vgpu_region_t, limit) == 1600, "limit");
_Static_assert(offsetof(vgpu_region_t, sm_limit) == 1728, "sm_limit");
_Static_assert(offsetof(vgpu_region_t, procs) == 1856, "procs");
_Static_assert(offsetof(vgpu_region_t, proc_num) == 2008896, "proc_num");
_Static_assert(offsetof(vgpu_region_t, utilization_switch) == 2008900, "utilization_switch");
_Static_assert(offsetof(vgpu_region_t, recent_kernel) == 2008904, "recent_kernel");
_Static_assert(offsetof(vgpu_region_t, priority) == 2008908, "priority");
_Static_assert(offsetof(vgpu_region_t, last_kernel_time) == 2008912, "last_kernel_time");
_Static_assert(offsetof(vgpu_region_t, sem_postinit) == 2008920, "sem_postinit");
_Static_assert(sizeof(vgpu_region_t) == 2008952, "region size");
_Static_assert(VGPU_EXT_OFFSET % 64 == 0 && VGPU_EXT_OFFSET > sizeof(vgpu_region_t), "ext offset");
_Static_assert(sizeof(vgpu_ext_device_t) == 64, "ext device size");
_Static_assert(sizeof(vgpu_ext_slot_t) == 32, "ext slot size");
_Static_assert(offsetof(vgpu_region_ext_t, devices) % 8 == 0, "ext devices aligned");

/*
 * Every layout HAMi-core ever wrote, for readers that must recognise them all (shrreg-tool; the
 * library writes only v1.2 and leaves other layouts untouched). The v1.1/v1.2 rows derive from the
 * structs above with offsetof, so they cannot drift; the older rows are the documented offsets of
 * L0a, L0b and the mislabelled "v1.1-broken" layout (HAMi-core PR #163 era, still says 1.1).
 */
#define VGPU_NO_FIELD ((size_t)-1)

typedef enum {
  VGPU_LAYOUT_L0A = 0,
  VGPU_LAYOUT_L0B,
  VGPU_LAYOUT_V1_1,
  VGPU_LAYOUT_V1_1_BROKEN,
  VGPU_LAYOUT_V1_2,
  VGPU_LAYOUT_COUNT
} vgpu_layout_id_t;

typedef struct {
  vgpu_layout_id_t id;
  const char *label;
  size_t struct_size; /* files are struct_size or struct_size + 1 bytes (HAMi writes one byte) */
  size_t off_major;   /* VGPU_NO_FIELD when the layout has no version fields */
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
  size_t slot_seqlock; /* VGPU_NO_FIELD when the layout has none (v1.1: those bytes are unused[0]) */
  size_t slot_used;    /* device_memory entries: context +0, module +8, data +16, total +32 */
  size_t used_stride;
  size_t slot_monitorused;
  size_t slot_util; /* device_util entries: sm_util +16 */
  size_t util_stride;
  size_t slot_status;
  int writable;      /* tools write only layouts current libraries still read */
  int seqlock_valid; /* v1.2: the per-slot seqlock guards used[] */
} vgpu_layout_t;

/* v1.1 and v1.2 share every byte; v1.2 turned the slot's first unused word into the seqlock. */
#define VGPU_LAYOUT_V1_OFFSETS                                                                     \
  .struct_size = sizeof(vgpu_region_t), .off_major = offsetof(vgpu_region_t, major_version),       \
  .off_minor = offsetof(vgpu_region_t, minor_version),                                             \
  .off_owner_pid = offsetof(vgpu_region_t, owner_pid), .off_sem = offsetof(vgpu_region_t, sem),     \
  .off_device_num = offsetof(vgpu_region_t, device_num), .off_uuids = offsetof(vgpu_region_t, uuids), \
  .off_limit = offsetof(vgpu_region_t, limit), .off_sm_limit = offsetof(vgpu_region_t, sm_limit),   \
  .off_procs = offsetof(vgpu_region_t, procs), .slot_size = sizeof(vgpu_proc_slot_t),              \
  .off_proc_num = offsetof(vgpu_region_t, proc_num),                                               \
  .off_last_kernel_time = offsetof(vgpu_region_t, last_kernel_time),                               \
  .slot_used = offsetof(vgpu_proc_slot_t, used),                                                   \
  .used_stride = sizeof(vgpu_device_memory_t),                                                     \
  .slot_monitorused = offsetof(vgpu_proc_slot_t, monitorused),                                     \
  .slot_util = offsetof(vgpu_proc_slot_t, device_util), .util_stride = sizeof(vgpu_device_util_t), \
  .slot_status = offsetof(vgpu_proc_slot_t, status), .writable = 1

/* C only: C++ (the GPU probes built with nvcc) has no array designators or out-of-order
 * designated initializers, and needs only the struct definitions above. */
#ifndef __cplusplus
static const vgpu_layout_t VGPU_LAYOUTS[VGPU_LAYOUT_COUNT] __attribute__((unused)) = {
    [VGPU_LAYOUT_L0A] = {.id = VGPU_LAYOUT_L0A, .label = "L0a", .struct_size = 804680,
                         .off_major = VGPU_NO_FIELD, .off_minor = VGPU_NO_FIELD, .off_owner_pid = 8,
                         .off_sem = 16, .off_device_num = 48, .off_uuids = 56, .off_limit = 1592,
                         .off_sm_limit = 1720, .off_procs = 1848, .slot_size = 784,
                         .off_proc_num = 804664, .off_last_kernel_time = VGPU_NO_FIELD,
                         .slot_seqlock = VGPU_NO_FIELD, .slot_used = 8, .used_stride = 40,
                         .slot_monitorused = 648, .slot_util = VGPU_NO_FIELD, .util_stride = 0,
                         .slot_status = 776},
    [VGPU_LAYOUT_L0B] = {.id = VGPU_LAYOUT_L0B, .label = "L0b", .struct_size = 1197896,
                         .off_major = VGPU_NO_FIELD, .off_minor = VGPU_NO_FIELD, .off_owner_pid = 8,
                         .off_sem = 16, .off_device_num = 48, .off_uuids = 56, .off_limit = 1592,
                         .off_sm_limit = 1720, .off_procs = 1848, .slot_size = 1168,
                         .off_proc_num = 1197880, .off_last_kernel_time = VGPU_NO_FIELD,
                         .slot_seqlock = VGPU_NO_FIELD, .slot_used = 8, .used_stride = 40,
                         .slot_monitorused = 648, .slot_util = 776, .util_stride = 24,
                         .slot_status = 1160},
    [VGPU_LAYOUT_V1_1] = {.id = VGPU_LAYOUT_V1_1, .label = "v1.1", VGPU_LAYOUT_V1_OFFSETS,
                          .slot_seqlock = VGPU_NO_FIELD},
    [VGPU_LAYOUT_V1_1_BROKEN] = {.id = VGPU_LAYOUT_V1_1_BROKEN, .label = "v1.1-broken",
                                 .struct_size = 2008984, .off_major = 4, .off_minor = 8,
                                 .off_owner_pid = 16, .off_sem = 24, .off_device_num = 88,
                                 .off_uuids = 96, .off_limit = 1632, .off_sm_limit = 1760,
                                 .off_procs = 1888, .slot_size = 1960, .off_proc_num = 2008928,
                                 .off_last_kernel_time = 2008944, .slot_seqlock = 8, .slot_used = 16,
                                 .used_stride = 64, .slot_monitorused = 1040, .slot_util = 1168,
                                 .util_stride = 48, .slot_status = 1936},
    [VGPU_LAYOUT_V1_2] = {.id = VGPU_LAYOUT_V1_2, .label = "v1.2", VGPU_LAYOUT_V1_OFFSETS,
                          .slot_seqlock = offsetof(vgpu_proc_slot_t, seqlock), .seqlock_valid = 1},
};

/* Region files larger than this are not regions (the largest real one, v1.2 + extension, is ~2 MB). */
#define VGPU_MAX_REGION_FILE_SIZE ((size_t)64 << 20)

/*
 * Picks the layout of a mapped file: size first, version second (the v1.1-broken layout still says
 * 1.1). Returns the layout, or NULL with *why set to a short reason.
 */
static inline const vgpu_layout_t *vgpu_detect_layout(const uint8_t *base, size_t size, const char **why) {
  if (size < 12) {
    *why = "file too small to be a region";
    return NULL;
  }
  if (size > VGPU_MAX_REGION_FILE_SIZE) {
    *why = "file too large to be a region";
    return NULL;
  }
  int32_t magic = __atomic_load_n((const int32_t *)base, __ATOMIC_ACQUIRE);
  if (magic != VGPU_REGION_MAGIC) {
    *why = "no region magic at offset 0 (not a region, or still being created)";
    return NULL;
  }
  uint32_t major = __atomic_load_n((const uint32_t *)(base + 4), __ATOMIC_RELAXED);
  uint32_t minor = __atomic_load_n((const uint32_t *)(base + 8), __ATOMIC_RELAXED);
  for (int id = VGPU_LAYOUT_L0A; id <= VGPU_LAYOUT_L0B; id++)
    if (size == VGPU_LAYOUTS[id].struct_size || size == VGPU_LAYOUTS[id].struct_size + 1)
      return &VGPU_LAYOUTS[id];
  const vgpu_layout_t *broken = &VGPU_LAYOUTS[VGPU_LAYOUT_V1_1_BROKEN];
  if ((size == broken->struct_size || size == broken->struct_size + 1) && major == 1) return broken;
  if (size >= sizeof(vgpu_region_t) && major == 1)
    return minor >= 2 ? &VGPU_LAYOUTS[VGPU_LAYOUT_V1_2] : &VGPU_LAYOUTS[VGPU_LAYOUT_V1_1];
  *why = size >= sizeof(vgpu_region_t) ? "unknown region major version" : "unknown region file size";
  return NULL;
}
#endif /* !__cplusplus */

/*
 * libvgpu's slot-table lock: an fcntl write lock on this one byte of the cache file (the kernel
 * releases it when the holder dies), beyond HAMi-core's own lock byte at 0x40000000. A slot whose
 * pid looks dead is kept while its extension heartbeat is fresher than VGPU_HEARTBEAT_STALE_NS
 * (its owner may live in another pid namespace).
 */
#define VGPU_SLOT_LOCK_OFFSET 0x40000100LL
#define VGPU_HEARTBEAT_STALE_NS 1000000000ull

#endif /* VGPU_REGION_H */

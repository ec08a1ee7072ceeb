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

#endif /* VGPU_REGION_H */

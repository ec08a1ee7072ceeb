/*
 * state.h — the process's view of its container: the mapped region, its own slot, the
 * container-wide memory reservation and the liveness heartbeat.
 *
 * Threading: every function is thread-safe. Reservation takes the region's slot lock (in-process
 * mutex + fcntl record lock); releases only touch the process's own slot under its seqlock.
 * fork(): the child forgets the parent's slot and allocations and registers itself on first use.
 */
#ifndef VGPU_STATE_H
#define VGPU_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "region.h"

/* The region mapped for this process, creating it when `create`; NULL when unavailable. */
struct vgpu_region_map *vgpu_state_region(bool create);
/* Our slot index (registering on first call), -1 in pass-through mode. */
int vgpu_state_slot(void);
/* The host pid recorded in our slot, 0 when unknown or not registered (never registers, never
 * waits for a lock). */
int32_t vgpu_state_slot_hostpid(void);

/* Reserve-before-allocate: adds `bytes` to our slot if the container's usage on `ridx` plus
 * `bytes` stays within its limit. Returns 0, or -1 (logged, OOM counters bumped) when it would
 * exceed. ridx < 0 or pass-through mode: always 0. */
int vgpu_mem_reserve(int ridx, uint64_t bytes, enum vgpu_mem_kind kind);
/* Unconditional add (memory that already exists, e.g. a measured context). */
void vgpu_mem_add(int ridx, uint64_t bytes, enum vgpu_mem_kind kind);
void vgpu_mem_release(int ridx, uint64_t bytes, enum vgpu_mem_kind kind);
/* Limit (bytes, 0 = none) and container-wide usage of a region device. */
uint64_t vgpu_mem_limit(int ridx);
uint64_t vgpu_mem_used(int ridx);
/* Fills id's pid, hostpid and hostpid_source (hostpid.c). */
void vgpu_hostpid_detect(struct vgpu_slot_identity *id);
/* Records a kernel launch (last_kernel_time, at most once a second). */
void vgpu_state_kernel_launched(void);

#endif /* VGPU_STATE_H */

/*
 * proof_region.h — what HAMi-core does to its container's shared region, reduced to the calls the
 * GPU proof's workloads need: create/initialise the v1.2 region (vgpu_region.h), register the
 * process in a slot, record the host pid as HAMi-core would inside a pid namespace (its own
 * in-namespace pid), account allocations under the slot seqlock, and stamp kernel launches.
 * Single-threaded use by one process per region; not a library.
 */
#ifndef PROOF_REGION_H
#define PROOF_REGION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Maps (creating if needed) the region at path for one device; returns 0 on success. */
int proof_region_open(const char *path, const char *device_uuid, uint64_t memory_limit);
/* Registers getpid() in a new slot with hostpid 0 (HAMi-core before host pid detection). */
int proof_region_register(void);
/* Records the "host pid" exactly as HAMi-core's detection ends up doing inside a pid namespace. */
void proof_region_set_hostpid(int32_t hostpid);
/* Adds an allocation of bytes to the slot (data_size and total), under the slot seqlock. */
void proof_region_add_memory(uint64_t bytes);
/* Stamps last_kernel_time (epoch seconds) and marks the container active (recent_kernel = 2). */
void proof_region_kernel_launched(void);
/* Clean exit as HAMi-core's exit handler: pid 0, status 0. */
void proof_region_unregister(void);

#ifdef __cplusplus
}
#endif

#endif /* PROOF_REGION_H */

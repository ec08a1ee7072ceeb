/*
 * devices.h — CUDA ordinal -> region index (the container's NVML index), honouring
 * CUDA_VISIBLE_DEVICES reordering by index or UUID, and the few NVML facts libvgpu needs.
 *
 * Threading: the map is computed once (after the application initialized the driver) under a
 * mutex and read lock-free afterwards.
 */
#ifndef VGPU_DEVICES_H
#define VGPU_DEVICES_H

#include <cuda.h>

#include "region.h"

/* Region index of a CUDA device, or -1 (unknown device or index >= 16: not accounted). */
int vgpu_ridx(CUdevice dev);
/* Region index of the calling thread's current context, -1 if none. */
int vgpu_current_ridx(void);
/* Fills device_num and uuids for a new region (NVML order when NVML is available). */
void vgpu_devices_fill_init(struct vgpu_region_init *init);
/* Our process's NVML-reported usage on a region device (found by pid, else by our slot's host
 * pid); false when NVML cannot tell (nvml_procs.c). _ex also tells whether NVML listed us by our
 * own pid, i.e. its pids are this pid namespace's. */
bool vgpu_nvml_process_used(int ridx, uint64_t *bytes);
bool vgpu_nvml_process_used_ex(int ridx, uint64_t *bytes, bool *same_namespace);
/* This process's NVML usage (as vgpu_nvml_process_used) and that of its descendants that NVML
 * lists with no slot in the region (run without libvgpu; only where NVML's pids are this pid
 * namespace's, else 0). false when NVML cannot tell. */
bool vgpu_nvml_usage(int ridx, uint64_t *self, uint64_t *children);
/* Calls fn for every compute process NVML lists on region device ridx (the whole list); false
 * when NVML cannot tell. */
typedef void (*vgpu_nvml_proc_fn)(unsigned int pid, uint64_t used, void *arg);
bool vgpu_nvml_each_process(int ridx, vgpu_nvml_proc_fn fn, void *arg);
/* Formats a CUDA uuid the way NVML prints it: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx. */
void vgpu_format_uuid(const unsigned char b[16], char *out, size_t cap);
/* Pure helper (tested): region index of CUDA ordinal `ordinal` from a CUDA_VISIBLE_DEVICES value
 * and the NVML uuid list (may be empty). */
int vgpu_map_ordinal(const char *cvd, int ordinal, const char *cuda_uuid,
                     char nvml_uuids[][VGPU_UUID_LEN], int nvml_count);

#endif /* VGPU_DEVICES_H */

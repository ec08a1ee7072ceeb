/*
 * state_degraded.h — what a process does when its container's shared region cannot be used
 * (README "Degraded mode"): which causes the container's processes can still share a region for
 * (the alternate file beside the path), the fail-safe limits when they cannot, and the one error
 * line plus the side file that record it. Split from state.c.
 */
#ifndef VGPU_STATE_DEGRADED_H
#define VGPU_STATE_DEGRADED_H

#include <stdbool.h>
#include <stddef.h>

#include "region.h"

enum vgpu_degraded_outcome {
  VGPU_DEGRADED_LOCAL,   /* counted per process (and its fork children): no shared file can exist */
  VGPU_DEGRADED_SHARED,  /* the alternate file beside the path, shared by the container */
  VGPU_DEGRADED_REFUSED, /* no shared region: memory on a limited device is refused (fail safe) */
};

/* `<x>-libvgpu-v1.2.cache` beside `<x>.cache` (or `<path>-libvgpu-v1.2`). */
void vgpu_region_alt_path(const char *path, char *out, size_t cap);
/* Whether a failed open of the region (vgpu_region_open's rc and errno) leaves the directory
 * usable for the alternate file: everything but a missing directory. */
bool vgpu_degraded_can_share(int rc, int err);
/* One error line per process naming the cause, the outcome and the fix; the side file
 * `<path>.degraded` for node tools. `alt`: the alternate file (SHARED, REFUSED). */
void vgpu_degraded_explain(const char *path, int rc, int err, const char *alt, enum vgpu_degraded_outcome outcome);
void vgpu_degraded_log(const char *path, const char *cause, const char *what, const char *fix,
                       enum vgpu_degraded_outcome outcome);
/* Fail-safe limits: 1 byte on every device that has a memory limit (0 would mean unlimited). */
void vgpu_degraded_failsafe(struct vgpu_region_init *init);

#endif /* VGPU_STATE_DEGRADED_H */

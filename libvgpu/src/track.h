/*
 * track.h — what this process allocated: key -> (region device, bytes, owning context), so every
 * free releases exactly what its allocation reserved, exactly once (the record is removed under
 * the table's mutex; a second free of the same key finds nothing).
 *
 * Threading: all functions are thread-safe (one mutex; open addressing, backward-shift delete).
 */
#ifndef VGPU_TRACK_H
#define VGPU_TRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum vgpu_track_kind {
  VGPU_TRACK_PTR = 1,    /* cuMemAlloc family, managed */
  VGPU_TRACK_VMM = 2,    /* cuMemCreate handle */
  VGPU_TRACK_ARRAY = 3,  /* CUarray */
  VGPU_TRACK_MIPMAP = 4, /* CUmipmappedArray */
  VGPU_TRACK_CTX = 5,    /* non-primary context's own footprint */
  VGPU_TRACK_VMM_MAP = 6,    /* a cuMemMap mapping, keyed by its address; aux = the handle mapped */
  VGPU_TRACK_CTX_LIMIT = 7,  /* cuCtxSetLimit reservations of a context (heap, stack, printf FIFO) */
  VGPU_TRACK_GRAPH_EXEC = 8, /* an instantiated graph with allocation nodes; aux = device mask */
};

struct vgpu_track_rec {
  uint64_t key;
  uint64_t bytes;
  uintptr_t ctx; /* context the allocation belongs to (0: none/unknown) */
  uint64_t aux;  /* kind-specific (see enum vgpu_track_kind and the hook that writes it) */
  uint32_t refs; /* VMM: handles held (cuMemCreate, cuMemRetainAllocationHandle, import) */
  uint32_t maps; /* VMM: live mappings of the handle (cuMemMap until cuMemUnmap) */
  uint8_t kind;
  int8_t ridx;
  uint8_t mem_kind; /* enum vgpu_mem_kind */
};

/* Inserts (or replaces) a record. Returns false only when memory is exhausted. */
bool vgpu_track_put(const struct vgpu_track_rec *rec);
/* Copies the record without removing it; false when absent. */
bool vgpu_track_get(uint8_t kind, uint64_t key, struct vgpu_track_rec *out);
/* Removes and returns the record; false when absent (already freed, or never ours). */
bool vgpu_track_take(uint8_t kind, uint64_t key, struct vgpu_track_rec *out);
/* Removes every record of `ctx` (context destroyed or reset) in one pass over the table (linear
 * in its capacity); calls fn for each, outside the table's mutex. */
size_t vgpu_track_take_ctx(uintptr_t ctx, void (*fn)(const struct vgpu_track_rec *));
/* Bumped by every vgpu_track_take_ctx (a context went away): caches keyed by context compare it. */
uint64_t vgpu_track_ctx_gen(void);
size_t vgpu_track_count(void);
/* fork: 0 = prepare (lock), 1 = parent/child (unlock). */
void vgpu_track_atfork(int phase);
/* In the child: forget everything (the parent's allocations are not the child's). */
void vgpu_track_reset_after_fork(void);

#endif /* VGPU_TRACK_H */

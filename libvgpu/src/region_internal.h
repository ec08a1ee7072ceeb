/*
 * region_internal.h — what region.c, region_lock.c, region_liveness.c and region_view.c share;
 * not for other units (they use region.h).
 */
#ifndef VGPU_REGION_PRIVATE_H
#define VGPU_REGION_PRIVATE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "region.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define LOAD_RELAXED(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define STORE_RELAXED(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

/* fcntl record lock on [start, start+len): F_SETLK/F_SETLKW/F_GETLK retried on EINTR. */
int vgpu_region_set_lock(int fd, int cmd, short type, off_t start, off_t len);
/* Polls an fcntl lock until `deadline` (monotonic ns): a blocking F_SETLKW would wait forever on
 * a stopped holder. 0 taken, -1 with errno ETIMEDOUT or the fcntl error. */
int vgpu_region_set_lock_until(int fd, short type, off_t start, off_t len, uint64_t deadline);
/* The reservation mutex in the extension block, or NULL when the file has none. */
pthread_mutex_t *vgpu_region_reserve_mutex(struct vgpu_region_map *m);

#endif /* VGPU_REGION_PRIVATE_H */

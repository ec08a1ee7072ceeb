/*
 * limiter_report.c — what the SM limiter reports: the sm_util HAMi's monitor reads from each
 * process's slot (refreshed by a thread of the process-wide limiter, like HAMi-core's watcher),
 * (vgpu_limiter_publish_util). No driver calls.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "limiter_internal.h"
#include "quiet_thread.h"

/* The process-wide limiter's sm_util refresher: HAMi-core's watcher rewrites sm_util every
 * 120 ms, so a process that stops launching reads 0 within a second there too. No driver calls
 * (it may run while the driver tears down at exit); signals stay with the application. */
static void *util_main(void *arg) {
  vgpu_limiter_t *lim = arg;
  for (;;) {
    struct timespec ts = {0, UTIL_REFRESH_NS};
    nanosleep(&ts, NULL);
    if (!__atomic_load_n(&lim->util_thread, __ATOMIC_ACQUIRE)) return NULL; /* forked child */
    for (int i = 0; i < VGPU_MAX_DEVICES; i++) vgpu_limiter_publish_util(lim, i);
  }
}

void lim_util_thread_start(vgpu_limiter_t *lim) {
  if (lim->cfg.own_slot == NULL ||
      lim->cfg.region == NULL || __atomic_exchange_n(&lim->util_thread, 1, __ATOMIC_ACQ_REL))
    return;
  if (!vgpu_start_quiet_thread(util_main, lim, "vgpu-smutil"))
    __atomic_store_n(&lim->util_thread, 0, __ATOMIC_RELEASE);
}

/*
 * sm_util for HAMi's monitor: this process's charged busy time over the last ~1 s, in percent,
 * written into its own slot (device_util[dev].sm_util, a plain field outside the slot's seqlock,
 * as HAMi-core writes it). A snapshot every UTIL_REFRESH_NS; the slot is looked up before d->mu
 * is taken (own_slot may read the region).
 */
void vgpu_limiter_publish_util(vgpu_limiter_t *lim, int dev) {
  if (lim == NULL || dev < 0 || dev >= VGPU_MAX_DEVICES || lim->cfg.own_slot == NULL ||
      lim->cfg.region == NULL)
    return;
  dev_state_t *d = __atomic_load_n(&lim->dev[dev], __ATOMIC_ACQUIRE);
  if (d == NULL) return;
  int slot = lim->cfg.own_slot();
  if (slot < 0 || slot >= VGPU_MAX_PROCS) return;
  int64_t now = lim_now_ns(lim);
  pthread_mutex_lock(&d->mu);
  if (d->util_n > 0 &&
      now - d->util[(d->util_head + d->util_n - 1) % UTIL_RING_N].t < UTIL_REFRESH_NS) {
    pthread_mutex_unlock(&d->mu);
    return;
  }
  if (d->util_n == UTIL_RING_N) {
    d->util_head = (d->util_head + 1) % UTIL_RING_N;
    d->util_n--;
  }
  int at = (d->util_head + d->util_n) % UTIL_RING_N;
  d->util[at].t = now;
  d->util[at].busy = d->busy_ns;
  d->util_n++;
  int64_t dt = now - d->util[d->util_head].t, db = d->busy_ns - d->util[d->util_head].busy;
  pthread_mutex_unlock(&d->mu);
  uint64_t pct = 0;
  if (dt > 0 && db > 0) {
    pct = (uint64_t)((100 * db + dt / 2) / dt);
    if (pct > 100) pct = 100; /* a long kernel is charged at once when it completes */
  }
  __atomic_store_n(&lim->cfg.region->procs[slot].device_util[dev].sm_util, pct,
                   __ATOMIC_RELAXED);
}

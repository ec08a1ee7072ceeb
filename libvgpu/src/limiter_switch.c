/*
 * limiter_switch.c — what a context switch costs on the device at hand, measured from the events
 * the limiter records anyway (issue 30).
 *
 * Every switch brings one context onto the GPU and is charged to it, once per off-GPU stretch a
 * late heartbeat reveals. What the switch itself took is invisible in one stretch (the stretch
 * also holds the other context's work). It is exact where this process saw both sides: its queued
 * work on context B started a gap after its work on context A ended (the engine held B's work
 * and spent the gap loading B; limiter_bucket.c takes these samples at commit, in start order).
 * The estimate is a low quantile of the last SWITCH_SAMPLES samples younger than
 * SWITCH_SAMPLE_TTL_NS, so it follows the card, the driver and the kernel mix.
 *
 * A process with one context never sees both sides of a switch: the stretch it is off the GPU is
 * the other container's slice plus two switches, and a late start event is the rest of that
 * slice plus a switch (measured on the simulator: always within 5 % of a full stretch, useless
 * as a bound). Until a sample exists the charge is SWITCH_FALLBACK_NS (limiter_tuning.h).
 * Bounded: a fixed ring per device, a sort of at most SWITCH_SAMPLES values per sample; runs only
 * on the limited path, under d->mu.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "limiter_internal.h"

/* Drops samples older than the TTL and recomputes the quantile. */
static void switch_refresh(dev_state_t *d, int64_t now) {
  while (d->sw_n > 0 && now - d->sw_sample[d->sw_head].t > SWITCH_SAMPLE_TTL_NS) {
    d->sw_head = (d->sw_head + 1) % SWITCH_SAMPLES;
    d->sw_n--;
  }
  if (d->sw_n == 0) {
    d->switch_est_ns = 0;
    return;
  }
  int64_t v[SWITCH_SAMPLES] = {0};
  int n = d->sw_n;
  for (int i = 0; i < n; i++) { /* insertion sort: n <= SWITCH_SAMPLES */
    int64_t x = d->sw_sample[(d->sw_head + i) % SWITCH_SAMPLES].v;
    int j = i - 1;
    while (j >= 0 && v[j] > x) {
      v[j + 1] = v[j];
      j--;
    }
    v[j + 1] = x;
  }
  d->switch_est_ns = v[(n - 1) * SWITCH_QUANTILE_NUM / SWITCH_QUANTILE_DEN];
}

void lim_switch_sample(dev_state_t *d, int64_t ns, int64_t now) {
  /* A gap under the heartbeat's resolution is no switch (the engine went idle, or stayed). */
  if (ns <= HB_GAP_NS || ns > SWITCH_SAMPLE_MAX_NS) return;
  if (d->sw_n == SWITCH_SAMPLES) {
    d->sw_head = (d->sw_head + 1) % SWITCH_SAMPLES;
    d->sw_n--;
  }
  int at = (d->sw_head + d->sw_n) % SWITCH_SAMPLES;
  d->sw_sample[at].v = ns;
  d->sw_sample[at].t = now;
  d->sw_n++;
  switch_refresh(d, now);
}

int64_t lim_switch_cost(const dev_state_t *d) {
  return d->sw_n > 0 ? d->switch_est_ns : SWITCH_FALLBACK_NS;
}

void lim_switch_owe(dev_state_t *d, int64_t stretch_ns, int64_t now) {
  if (stretch_ns <= 0) return;
  if (d->sw_n > 0 && now - d->sw_sample[d->sw_head].t > SWITCH_SAMPLE_TTL_NS)
    switch_refresh(d, now);
  d->switch_owed_ns += lim_i64min(lim_switch_cost(d), stretch_ns);
  d->switches++;
}

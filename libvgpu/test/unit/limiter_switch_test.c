/*
 * limiter_switch_test.c — the switch-cost estimator (src/limiter_switch.c, issue 30): what a
 * context switch costs is taken from samples measured on the device, follows a change of card or
 * mix within SWITCH_SAMPLE_TTL_NS, ignores what is no switch, and never charges more than the
 * off-GPU stretch it is charged for. The end-to-end check (switch costs 50-1000 us the library is
 * not told, through the hooks and the fake driver) is test/preload/sm_throttle.c `switch`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limiter_internal.h"

static int checks, failed;
#define CHECK(cond, ...)                                   \
  do {                                                     \
    checks++;                                              \
    if (!(cond)) {                                         \
      failed++;                                            \
      printf("  FAIL %s:%d: ", __FILE__, __LINE__);        \
      printf(__VA_ARGS__);                                 \
      printf("\n");                                        \
    }                                                      \
  } while (0)

#define US 1000LL
#define S 1000000000LL

static dev_state_t *fresh(void) { return calloc(1, sizeof(dev_state_t)); }

static void test_nothing_measured_uses_the_fallback(void) {
  dev_state_t *d = fresh();
  CHECK(lim_switch_cost(d) == SWITCH_FALLBACK_NS, "cost %lld", (long long)lim_switch_cost(d));
  lim_switch_owe(d, 40 * US, 1 * S); /* never more than the stretch */
  CHECK(d->switch_owed_ns == 40 * US, "owed %lld", (long long)d->switch_owed_ns);
  CHECK(d->switches == 1, "switches %llu", (unsigned long long)d->switches);
  free(d);
}

static void test_samples_set_the_cost(void) {
  const int64_t costs[4] = {50 * US, 150 * US, 400 * US, 1000 * US};
  for (int c = 0; c < 4; c++) {
    dev_state_t *d = fresh();
    int64_t t = 100 * S;
    for (int i = 0; i < 20; i++) lim_switch_sample(d, costs[c] + (i % 3) * US, t += 1000 * US);
    /* a few gaps that also held another container's work: the low quantile ignores them */
    for (int i = 0; i < 5; i++) lim_switch_sample(d, 3000 * US, t += 1000 * US);
    int64_t got = lim_switch_cost(d);
    printf("  samples of %lld us (+5 outliers of 3 ms): cost %lld us\n",
           (long long)(costs[c] / US), (long long)(got / US));
    CHECK(got >= costs[c] && got <= costs[c] + 2 * US, "cost %lld for %lld", (long long)got,
          (long long)costs[c]);
    lim_switch_owe(d, 10 * S, t);
    CHECK(d->switch_owed_ns == got, "owed %lld", (long long)d->switch_owed_ns);
    free(d);
  }
}

static void test_what_is_no_switch_is_ignored(void) {
  dev_state_t *d = fresh();
  lim_switch_sample(d, HB_GAP_NS, 1 * S);               /* engine idle or stayed: no switch */
  lim_switch_sample(d, SWITCH_SAMPLE_MAX_NS + 1, 1 * S); /* another container's slice too */
  lim_switch_sample(d, -5, 1 * S);
  CHECK(d->sw_n == 0, "kept %d", d->sw_n);
  CHECK(lim_switch_cost(d) == SWITCH_FALLBACK_NS, "cost %lld", (long long)lim_switch_cost(d));
  free(d);
}

static void test_follows_a_change_and_stays_bounded(void) {
  dev_state_t *d = fresh();
  int64_t t = 10 * S;
  for (int i = 0; i < 10 * SWITCH_SAMPLES; i++) lim_switch_sample(d, 1000 * US, t += 1000 * US);
  CHECK(d->sw_n == SWITCH_SAMPLES, "ring holds %d", d->sw_n);
  CHECK(lim_switch_cost(d) == 1000 * US, "cost %lld", (long long)lim_switch_cost(d));
  /* the card or the mix changes: new samples take over as the old ones age out */
  t += SWITCH_SAMPLE_TTL_NS + 1;
  lim_switch_sample(d, 50 * US, t);
  CHECK(lim_switch_cost(d) == 50 * US, "after the TTL: %lld", (long long)lim_switch_cost(d));
  /* no samples for a TTL: the estimate is gone and the fallback applies again */
  lim_switch_owe(d, 10 * S, t + SWITCH_SAMPLE_TTL_NS + 1);
  CHECK(d->sw_n == 0 && lim_switch_cost(d) == SWITCH_FALLBACK_NS, "n %d cost %lld", d->sw_n,
        (long long)lim_switch_cost(d));
  /* within the TTL a minority of new values does not move a low quantile */
  dev_state_t *e = fresh();
  t = 10 * S;
  for (int i = 0; i < SWITCH_SAMPLES; i++) lim_switch_sample(e, 400 * US, t += 1000 * US);
  for (int i = 0; i < SWITCH_SAMPLES / 8; i++) lim_switch_sample(e, 60 * US, t += 1000 * US);
  CHECK(lim_switch_cost(e) == 400 * US, "minority moved it: %lld", (long long)lim_switch_cost(e));
  for (int i = 0; i < SWITCH_SAMPLES; i++) lim_switch_sample(e, 60 * US, t += 1000 * US);
  CHECK(lim_switch_cost(e) == 60 * US, "majority: %lld", (long long)lim_switch_cost(e));
  free(d);
  free(e);
}

int main(void) {
  printf("limiter_switch_test: the measured switch cost\n");
  test_nothing_measured_uses_the_fallback();
  test_samples_set_the_cost();
  test_what_is_no_switch_is_ignored();
  test_follows_a_change_and_stays_bounded();
  printf("limiter_switch_test: %d passed, %d failed\n", checks - failed, failed);
  return failed ? 1 : 0;
}

/*
 * driver.c — fallback when clang's libFuzzer runtime is missing: feeds LLVMFuzzerTestOneInput
 * random inputs (random lengths, mutations of the previous input, runs of interesting bytes) for
 * a time budget, built with gcc -fsanitize=address,undefined. Not coverage guided.
 * Usage: <harness> [-max_total_time=S] [-seed=N] [file...]  (files are replayed, then exit)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t g_rng = 88172645463325252ull;
static uint64_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

int main(int argc, char **argv) {
  double budget = 10;
  int files = 0;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "-max_total_time=", 16) == 0) budget = atof(argv[i] + 16);
    else if (strncmp(argv[i], "-seed=", 6) == 0) g_rng = strtoull(argv[i] + 6, NULL, 10) | 1;
    else if (argv[i][0] != '-') {
      FILE *f = fopen(argv[i], "rb");
      if (!f) continue;
      static uint8_t buf[1 << 16];
      size_t n = fread(buf, 1, sizeof buf, f);
      fclose(f);
      LLVMFuzzerTestOneInput(buf, n);
      files++;
    }
  }
  if (files) return 0;
  static const uint8_t interesting[] = {'0', '1', '9', 'k', 'm', 'g', 'K', 'M', 'G', '=', '\n', 'x',
                                        '-', '+', ' ', 0, 0xff, 0x7f, 0x80, 0x4e, 0xf9, 0x2f, 0x01};
  uint8_t cur[4096];
  size_t len = 0;
  time_t end = time(NULL) + (time_t)budget;
  unsigned long runs = 0;
  while (time(NULL) < end) {
    for (int k = 0; k < 64; k++, runs++) {
      if (rnd() % 4 == 0 || len == 0) len = rnd() % sizeof cur;
      int edits = 1 + (int)(rnd() % 8);
      for (int e = 0; e < edits && len; e++) {
        size_t at = rnd() % len;
        cur[at] = rnd() % 2 ? interesting[rnd() % sizeof interesting] : (uint8_t)rnd();
      }
      LLVMFuzzerTestOneInput(cur, len);
    }
  }
  printf("driver: %lu runs, no crash\n", runs);
  return 0;
}

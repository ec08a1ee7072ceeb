#!/usr/bin/env bash
# Builds and runs libvgpu's fuzz harnesses (env_fuzz: environment parser; region_fuzz: region
# opener and readers) for FUZZ_SECONDS each (default 20). libFuzzer (clang 14 + ASan + UBSan,
# package libclang-rt-14-dev) when it links, else a gcc ASan/UBSan random driver (driver.c).
# Any crash, sanitizer report or broken invariant fails the run; the reproducer is kept under
# build/fuzz/crashes/. Usage: FUZZ_SECONDS=300 test/fuzz/run.sh [harness...]
set -uo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${FUZZ_SECONDS:-20}
OUT=build/fuzz
mkdir -p "$OUT/crashes"
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=(env_fuzz region_fuzz)

mode=gcc
if command -v clang-14 >/dev/null || command -v clang >/dev/null; then
  CLANG=$(command -v clang-14 || command -v clang)
  echo 'int LLVMFuzzerTestOneInput(const char*d,unsigned long n){(void)d;(void)n;return 0;}' > "$OUT/probe.c"
  if "$CLANG" -fsanitize=fuzzer,address,undefined "$OUT/probe.c" -o "$OUT/probe" 2>/dev/null; then mode=libfuzzer; fi
fi

# The harnesses and the instrumented library: Makefile, fuzz-progs (one build directory per mode).
cc_arg=()
[ $mode = libfuzzer ] && cc_arg=(FUZZ_CC="$CLANG")
make -s BUILD=build FUZZ_MODE=$mode "${cc_arg[@]}" FUZZ_HARNESSES="${harnesses[*]}" fuzz-progs || exit 1
BIN=$OUT/$mode

fail=0
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for h in "${harnesses[@]}"; do
  corpus="$OUT/corpus-$h"
  mkdir -p "$corpus"
  seeds="test/fuzz/seeds/$h"
  log="$OUT/$h.log"
  start=$(date +%s)
  if [ $mode = libfuzzer ]; then
    "$BIN/$h" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=1024 -max_len=4096 \
      -artifact_prefix="$OUT/crashes/$h-" -print_final_stats=1 "$corpus" $( [ -d "$seeds" ] && echo "$seeds" ) > "$log" 2>&1
  else
    "$BIN/$h" -max_total_time="$SECONDS_EACH" > "$log" 2>&1
  fi
  rc=$?
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+|driver: [0-9]+ runs' "$log" | grep -oE '[0-9]+' | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1)
  if [ $rc -ne 0 ]; then
    fail=1
    echo "fuzz $h ($mode): FAILED after $(( $(date +%s) - start )) s, rc=$rc; log $log"
    grep -E 'ERROR|runtime error|invariant|SUMMARY|Test unit written' "$log" | head -20
  else
    echo "fuzz $h ($mode): ok, ${runs:-?} inputs in $SECONDS_EACH s${cov:+, $cov}, corpus $(ls "$corpus" | wc -l)"
  fi
done
exit $fail

#!/usr/bin/env bash
# shrreg-tool's suite on the tool `make all` built ($BUILD/shrreg-tool: the shipped static binary,
# or the ASan/UBSan one in the sanitizer build), with its test programs `make all` built beside it.
# Sub-suites: the fuzz cases, the CLI test (incl. a region written by the real libvgpu through
# region_app), a garbage slot-table semaphore, HAMi-core's own region files, the disk-full case.
# A sub-suite counts as failed when it exits non-zero, when its summary line is missing or when it
# reports a failure; a test program not built is a failure, never a skip.
# Last line: "shrreg-tool: N passed, M failed". Usage: BUILD=build test/tools/run.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
if [ -n "${SANITIZE:-}" ]; then
  # An instrumented libvgpu.so must come after the sanitizer runtimes in LD_PRELOAD.
  . test/lib.sh
  SANITIZER_PRELOAD="$(sanitizer_runtimes)"
  export SANITIZER_PRELOAD ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:verify_asan_link_order=0}
fi
out="$BUILD/tools-test" # the test programs, built by `make all` (Makefile: TOOL_TESTS)
pass=0 fail=0
failed() { fail=$((fail + 1)); echo "FAIL $*"; }

tool="$BUILD/shrreg-tool"
[ -x "$tool" ] || failed "$tool not built (make all first)"
for prog in shrreg_tool_test shrreg_sem_test shrreg_fuzz region_app; do
  [ -x "$out/$prog" ] || failed "$out/$prog not built (make all first)"
done

# sub-suite NAME LOG CMD...: runs it; counts its summary line, or a failure without one.
sub_suite() {
  local name=$1 log=$2 rc line p f started=$SECONDS; shift 2
  "$@" > "$log" 2>&1
  rc=$?
  cat "$log"
  echo "($name: $((SECONDS - started)) s)"
  line=$(grep -E ': [0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
  if [ -z "$line" ]; then failed "$name: no summary line (exit $rc)"; return; fi
  p=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\1/' <<< "$line")
  f=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\2/' <<< "$line")
  pass=$((pass + p)); fail=$((fail + f))
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then failed "$name: exit $rc with no failure counted"; fi
  if [ "$p" = 0 ] && [ "$f" = 0 ]; then failed "$name: ran no test"; fi
}
# SHRREG_SUBSUITES="name...": only these (test/arm64/run.sh under qemu); default all.
want() { [ -z "${SHRREG_SUBSUITES:-}" ] || [[ " $SHRREG_SUBSUITES " == *" $1 "* ]]; }
if [ -x "$tool" ]; then
  want fuzz && [ -x "$out/shrreg_fuzz" ] && sub_suite fuzz "$out/fuzz.txt" "$out/shrreg_fuzz" "${SHRREG_FUZZ_ITERATIONS:-400}"
  want cli && [ -x "$out/shrreg_tool_test" ] && sub_suite cli "$out/cli.txt" "$out/shrreg_tool_test" "$tool" "$BUILD"
  # A tenant-written garbage semaphore (and one rewritten while the tool runs).
  want semaphore && [ -x "$out/shrreg_sem_test" ] && sub_suite semaphore "$out/sem.txt" "$out/shrreg_sem_test" "$tool"
  # Region files written by HAMi-core's own code (testdata/hami-core).
  want hami-fixtures && sub_suite hami-fixtures "$out/hami.txt" test/tools/hami_fixtures.sh "$tool"
  # A page that cannot be allocated (full tmpfs under a sparse region) while the lock is held.
  want disk-full && sub_suite disk-full "$out/diskfull.txt" test/tools/disk_full.sh "$tool"
fi
echo "shrreg-tool: $pass passed, $fail failed"
[ "$fail" = 0 ]

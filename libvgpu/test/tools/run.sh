#!/usr/bin/env bash
# shrreg-tool's suite on the tool `make all` built ($BUILD/shrreg-tool: the shipped static binary,
# or the ASan/UBSan one in the sanitizer build), with its test programs built here the same way.
# Sub-suites: the fuzz cases, the CLI test (incl. a region written by the real libvgpu through
# region_app), a garbage slot-table semaphore, HAMi-core's own region files, the disk-full case.
# A sub-suite counts as failed when it exits non-zero, when its summary line is missing or when it
# reports a failure; a build that fails is a failure, never a skip.
# Last line: "shrreg-tool: N passed, M failed". Usage: BUILD=build test/tools/run.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
CC=${CC:-gcc}
SAN=()
if [ -n "${SANITIZE:-}" ]; then
  SAN=(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  # An instrumented libvgpu.so must come after the sanitizer runtimes in LD_PRELOAD.
  SANITIZER_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
  export SANITIZER_PRELOAD ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:verify_asan_link_order=0}
fi
FLAGS=(-std=gnu11 -O2 -g -Wall -Wextra -Wshadow -Werror -D_GNU_SOURCE -Iinclude "${SAN[@]}")
out="$BUILD/tools-test"
mkdir -p "$out"
pass=0 fail=0
failed() { fail=$((fail + 1)); echo "FAIL $*"; }

tool="$BUILD/shrreg-tool"
[ -x "$tool" ] || failed "$tool not built (make all first)"
build() { # NAME ARGS...: compile, or count a failure and show why
  local name=$1; shift
  if ! "$CC" "$@" > "$out/$name.build.log" 2>&1; then failed "building $name:"; tail -5 "$out/$name.build.log"; return 1; fi
}
build shrreg_tool_test "${FLAGS[@]}" -Itest/tools -o "$out/shrreg_tool_test" test/tools/shrreg_tool_test.c \
  test/tools/shrreg_tool_repair_test.c test/tools/shrreg_tool_test_kit.c -lpthread
build shrreg_sem_test "${FLAGS[@]}" -Itest/tools -o "$out/shrreg_sem_test" test/tools/shrreg_sem_test.c -lpthread
# The fuzzer compiles the tool's units in (shrreg_fuzz.c includes them), with the library's region
# unit they use.
build shrreg_fuzz "${FLAGS[@]}" -Isrc -Itest/tools -Itools -o "$out/shrreg_fuzz" test/tools/shrreg_fuzz.c \
  src/region*.c src/log.c src/config.c -lpthread
# A real application for libvgpu-written regions (the CLI test fails without it).
rm -f "$out/region_app"
build region_app -std=gnu11 -O2 -Wall -Wextra -Werror -isystem "${CUDA_INC:-/usr/local/cuda/include}" \
  -o "$out/region_app" test/tools/region_app.c -L"$BUILD/fake" -l:libcuda.so.1 -Wl,-rpath-link,"$BUILD/fake"

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

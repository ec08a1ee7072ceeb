#!/usr/bin/env bash
# Builds shrreg-tool (unless the libvgpu Makefile already did) and its test, then runs the test.
# Last line: "shrreg-tool: N passed, M failed". Usage: test/tools/run.sh  (from libvgpu/ or anywhere)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
CC=${CC:-gcc}
FLAGS=(-std=gnu11 -O2 -g -Wall -Wextra -Wshadow -Werror -D_GNU_SOURCE -Iinclude ${SAN_FLAGS:-})
out="$BUILD/tools-test"
mkdir -p "$out"
# Our own copy of the tool: `make all` may rebuild $BUILD/shrreg-tool while this runs.
"$CC" "${FLAGS[@]}" -o "$out/shrreg-tool" tools/shrreg_tool.c -lpthread
"$CC" "${FLAGS[@]}" -Itest/tools -o "$out/shrreg_tool_test" test/tools/shrreg_tool_test.c -lpthread
"$CC" "${FLAGS[@]}" -Itest/tools -Itools -o "$out/shrreg_fuzz" test/tools/shrreg_fuzz.c -lpthread
# A real application for libvgpu-written regions, when the library and the fake driver are built.
if [ -f "$BUILD/fake/libcuda.so.1" ]; then
  "$CC" -std=gnu11 -O2 -Wall -Wextra -Werror -isystem "${CUDA_INC:-/usr/local/cuda/include}" -o "$out/region_app" \
    test/tools/region_app.c -L"$BUILD/fake" -l:libcuda.so.1 -Wl,-rpath-link,"$BUILD/fake" || rm -f "$out/region_app"
fi
"$out/shrreg_fuzz" "${SHRREG_FUZZ_ITERATIONS:-400}" > "$out/fuzz.txt" || true
# An instrumented libvgpu.so must come after the sanitizer runtimes in LD_PRELOAD.
if [ -n "${SANITIZE:-}" ]; then
  SANITIZER_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
  export SANITIZER_PRELOAD
fi
"$out/shrreg_tool_test" "$out/shrreg-tool" "$BUILD" > "$out/cli.txt" || true
# Region files written by HAMi-core's own code (testdata/hami-core).
test/tools/hami_fixtures.sh "$out/shrreg-tool" > "$out/hami.txt" 2>&1 || true
# A page that cannot be allocated (full tmpfs under a sparse region) while the lock is held.
test/tools/disk_full.sh "$out/shrreg-tool" > "$out/diskfull.txt" 2>&1 || true
cat "$out/fuzz.txt" "$out/cli.txt" "$out/hami.txt" "$out/diskfull.txt"
# One summary line over all four: the fuzz cases count as tests too.
awk '/: [0-9]+ passed, [0-9]+ failed$/ { p += $(NF-3); f += $(NF-1); n++ }
     END { if (n < 4) f++; printf "shrreg-tool: %d passed, %d failed\n", p, f; exit (f > 0) }' \
  "$out/fuzz.txt" "$out/cli.txt" "$out/hami.txt" "$out/diskfull.txt"

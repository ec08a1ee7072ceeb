#!/usr/bin/env bash
# The whole CPU suite of libvgpu: unit tests (test/unit/*_test.c, linked statically), the preload
# cases (test/run_preload.sh), the degraded-mode causes (test/run_region.sh), the stripped
# environment (test/run_adopt.sh) and shrreg-tool's suite
# (test/tools/run.sh) when present; outside the sanitizer build also the glibc floor: the symbol
# check and the preload suite inside an older userland (test/oldglibc/run.sh; needs root, builds a
# bullseye root filesystem once).
# Last line: "libvgpu: N passed, M failed"; exit status non-zero on any failure.
# A binary or script that prints "<name>: N passed, M failed" contributes N and M; otherwise it
# counts as one test decided by its exit status.
set -uo pipefail
cd "$(dirname "$0")/.."
export BUILD=${BUILD:-build}
LOGDIR=$(mktemp -d /tmp/libvgpu-suite.XXXXXX)
trap 'rm -rf "$LOGDIR"' EXIT

# Each line says how long its part took (seconds since the previous line): the CI budget is spent
# here. account (test/lib.sh) counts each part into $pass and $fail.
. test/lib.sh

for t in "$BUILD"/unit/*_test; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  timeout 300 "$t" > "$LOGDIR/$name.log" 2>&1
  account "unit/$name" $? "$LOGDIR/$name.log"
done

test/check_hooks.sh "$BUILD/libvgpu.so" > "$LOGDIR/hooks.log" 2>&1
account check-hooks $? "$LOGDIR/hooks.log"

# The glibc floor of what ships (not of the sanitizer build, which links the sanitizer runtimes).
if [ -z "${SANITIZE:-}" ]; then
  test/check_glibc_floor.sh "$BUILD/libvgpu.so" "$BUILD/shrreg-tool" > "$LOGDIR/floor.log" 2>&1
  account glibc-floor $? "$LOGDIR/floor.log"
  test/oldglibc/run.sh > "$LOGDIR/oldglibc.log" 2>&1
  account old-glibc $? "$LOGDIR/oldglibc.log"
fi

test/run_preload.sh > "$LOGDIR/preload.log" 2>&1
account preload $? "$LOGDIR/preload.log"

test/run_region.sh > "$LOGDIR/region.log" 2>&1
account region $? "$LOGDIR/region.log"

# Limits survive a stripped environment: the real preload in a private mount namespace.
test/run_adopt.sh > "$LOGDIR/adopt.log" 2>&1
account stripped-env $? "$LOGDIR/adopt.log"

if [ -x test/tools/run.sh ] && [ -f tools/shrreg_tool.c ]; then
  test/tools/run.sh > "$LOGDIR/tools.log" 2>&1
  account shrreg-tool $? "$LOGDIR/tools.log"
fi

echo "libvgpu: $pass passed, $fail failed"
[ "$fail" = 0 ]

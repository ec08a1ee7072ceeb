#!/usr/bin/env bash
# libvgpu allocation stress: PROCS processes x THREADS threads allocating and freeing at random for
# SECONDS against one CUDA_DEVICE_MEMORY_LIMIT (fake libcuda, LD_PRELOAD=libvgpu.so), KILLS of them
# SIGKILLed mid-run. Checks: never over the limit, no deadlock, exact per-survivor count at the end.
# Defaults are the CI bound; `make stress` runs 32 x 8 x 60 s with 8 kills.
# BUILD=build-arm64 CC=aarch64-linux-gnu-gcc: the aarch64 build (test/arm64/run.sh).
# Usage: STRESS_PROCS=32 STRESS_THREADS=8 STRESS_SECONDS=60 STRESS_KILLS=8 test/stress/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build}
CC=${CC:-gcc} # the cross compiler in the aarch64 build (test/arm64/run.sh)
OUT=$B/stress
mkdir -p "$OUT"
[ -f $B/libvgpu.so ] && [ -f $B/libvgpu.a ] && [ -f $B/fake/libcuda.so.1 ] || make -s BUILD="$B" all >/dev/null
make -s BUILD="$B" CC="$CC" stress-progs # worker, coord, mknode (Makefile)
[ "${1:-}" = build ] && exit 0
# Workers' stderr (libvgpu's OOM lines at the limit: expected, thousands) goes to a log.
set +e
timeout $(( ${STRESS_SECONDS:-10} + 180 )) $OUT/coord "${VGPU_LIB:-$PWD/$B/libvgpu.so}" "$PWD/$OUT/worker" "$PWD/$B/fake" \
  "${STRESS_PROCS:-8}" "${STRESS_THREADS:-4}" "${STRESS_SECONDS:-10}" "${STRESS_KILLS:-3}" \
  "${STRESS_LIMIT:-268435456}" 2> $OUT/workers.log
rc=$?
if [ $rc -ne 0 ]; then
  echo "stress: exit $rc; last worker messages:"
  grep -v 'OOM: requested' $OUT/workers.log | tail -20
fi
exit $rc

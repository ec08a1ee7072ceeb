#!/usr/bin/env bash
# The long reliability runs (make stress): libvgpu allocation stress at the issue's size (32
# processes x 8 threads x 60 s, 8 SIGKILLs), both fuzzers for FUZZ_SECONDS each (default 300), and
# the exporter's hostile-file suite with the full 10 000 container directories.
# `make test` runs the same pieces with short bounds (10 s stress at 8 x 4, 20 s per fuzzer, 2 000
# directories).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
need_jdk25
STRESS_PROCS=${STRESS_PROCS:-32} STRESS_THREADS=${STRESS_THREADS:-8} STRESS_SECONDS=${STRESS_SECONDS:-60} \
  STRESS_KILLS=${STRESS_KILLS:-8} libvgpu/test/stress/run.sh
FUZZ_SECONDS=${FUZZ_SECONDS:-300} libvgpu/test/fuzz/run.sh
./mvnw -B -ntp -o -q -pl exporter test -Dspotless.check.skip=true -Dsurefire.failIfNoSpecifiedTests=false \
  -Dtest='io.vgpu.exporter.reliability.*Test' -Dvgpu.reliability.containers=10000 \
  -Dvgpu.reliability.load-seconds=60
grep -h '^reliability:' exporter/target/surefire-reports/io.vgpu.exporter.reliability.*-output.txt || true
echo "stress: all PASS"

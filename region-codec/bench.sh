#!/usr/bin/env bash
# Runs region-codec's JMH benchmarks. Arguments go to org.openjdk.jmh.Main, e.g.
#   region-codec/bench.sh -f1 -wi 2 -i 3 -w 1s -r 1s -prof gc SnapshotBenchmark
# or, for thread CPU time per snapshot (useful on a loaded shared machine):
#   region-codec/bench.sh --cpu-time
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--cpu-time" ]]; then
  shift
  exec scripts/jmh.sh region-codec --main io.vgpu.regioncodec.bench.SnapshotCpuTime "$@"
fi
exec scripts/jmh.sh region-codec "$@"

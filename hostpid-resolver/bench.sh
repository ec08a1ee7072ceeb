#!/usr/bin/env bash
# Runs the hostpid-resolver JMH benchmarks briefly (sized for a 2-core shared machine).
# Usage: hostpid-resolver/bench.sh [extra JMH args, e.g. a benchmark regex]
set -euo pipefail
cd "$(dirname "$0")/.."
args=("$@")
[ ${#args[@]} -eq 0 ] && args=('io.vgpu.hostpid.bench.')
exec scripts/jmh.sh hostpid-resolver -f1 -wi 2 -i 3 -w 2s -r 3s "${args[@]}"

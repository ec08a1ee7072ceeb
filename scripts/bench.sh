#!/usr/bin/env bash
# `make bench`: every benchmark the READMEs quote, briefly (sized for a 2-core machine; the
# numbers are upper bounds on a shared one). Longer runs: call the module scripts with JMH args.
#   region-codec/bench.sh       snapshot cost (JMH)
#   hostpid-resolver/bench.sh   /proc scan and resolution (JMH)
#   exporter ScrapeBenchmark    one scrape of 100 containers x 8 devices x 4 processes (JMH)
#   libvgpu limiter hook cost   ns per launch with no limit (C)
#   libvgpu context destroy     bookkeeping of a context destroyed with 100 000 live allocations (C)
set -euo pipefail
cd "$(dirname "$0")/.."
short=(-f1 -wi 2 -i 3 -w 1s -r 1s)
echo "== region-codec"
region-codec/bench.sh "${short[@]}" -prof gc SnapshotBenchmark
echo "== hostpid-resolver"
hostpid-resolver/bench.sh
echo "== exporter scrape"
scripts/jmh.sh exporter "${short[@]}" -prof gc ScrapeBenchmark
echo "== libvgpu"
make -s -C libvgpu all bench-progs
libvgpu/build/bench/limiter_hookcost
libvgpu/build/bench/ctx_destroy_bench

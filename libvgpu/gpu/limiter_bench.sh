#!/usr/bin/env bash
# SM limiter GPU benchmark (issue 10): builds libvgpu and the workload, then runs the matrix
# (limits x shapes, multi-process container, two containers in PID namespaces, a PID-namespace
# run, a run-time limit change) and prints one table. About 6-7 minutes; BENCH_QUICK=1 for a
# ~2.5 minute subset. Other knobs: BENCH_SETTLE, BENCH_MEASURE, BENCH_ONLY=<regex> (limiter_bench.py).
#   usage (repo root, on the GPU machine):  bash libvgpu/gpu/limiter_bench.sh
#   multi-process cells only (~2.5 min):    BENCH_ONLY='container-|two-containers' bash libvgpu/gpu/limiter_bench.sh
#   issue 15's matrix (1-4 containers x 50 us / 20 ms / 1 s / 5 s kernels x limits 10-90, two
#   containers at 30/60 with 20 ms kernels, a debt cell; ~8.5 min, under one 10-minute call):
#                                            BENCH_MATRIX=issue15 bash libvgpu/gpu/limiter_bench.sh
#   issue 30/35's matrix, one call per card (~6.5 min with BENCH_PROTOCOL_S=20): the public
#   protocol (caps 20/40/60/80, fp16 matmul) with its mean absolute error, multi-container
#   cells, a PyTorch training loop, 1/8/33/128 busy streams, start-up with 1/16/64 processes:
#                                            BENCH_MATRIX=issue30 bash libvgpu/gpu/limiter_bench.sh
#   ...in two calls of ~4 min:               BENCH_MATRIX=issue15 BENCH_ONLY='short|-long$' ...
#                                            BENCH_MATRIX=issue15 BENCH_ONLY='xlong|debt' ...
set -euo pipefail
export PATH=/usr/local/cuda/bin:$PATH
here="$(cd "$(dirname "$0")" && pwd)"
lib="$(dirname "$here")"
build="$lib/build"
mkdir -p "$build/gpu"
echo "# building libvgpu"
make -C "$lib" -s lib >/dev/null
echo "# building the workload"
make -s -j3 -C "$here" OUT="$build/gpu" limiter_bench limiter_bench_ptds startup_probe
nvidia-smi --query-gpu=name,driver_version,utilization.gpu --format=csv,noheader || true
exec python3 "$here/limiter_bench.py"

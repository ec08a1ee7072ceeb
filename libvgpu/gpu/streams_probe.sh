#!/usr/bin/env bash
# Many busy streams in one process under the SM limit (issue 35), on a real GPU, ~2-3 minutes:
# N non-blocking streams (1, 8, 33, 128), each kernel 1/N of the GPU's blocks for 200 us, two in
# flight per stream, completions polled (gpu/limiter_bench.cu --shape streams). For each N: the
# rate without the library, then under this libvgpu.so at 90 % and 25 % (and under OLD_LIB when
# given, e.g. main's build), printed as throughput / the no-library rate of the same N and the
# slowest stream's share of its own no-library rate. Goal: >= 88 % at 90, 25 +- 2 at 25.
#   usage (repo root or any copy of libvgpu): bash libvgpu/gpu/streams_probe.sh [OLD_LIB]
#   knobs: PROBE_STREAMS="1 8 33 128"  PROBE_SETTLE=1  PROBE_MEASURE=3
set -euo pipefail
export PATH=/usr/local/cuda/bin:$PATH
here="$(cd "$(dirname "$0")" && pwd)"
lib="$(dirname "$here")"
build="$lib/build"
old_lib="${1:-}"
mkdir -p "$build/gpu"
make -C "$lib" -s lib >/dev/null
arch="-arch=native"
echo 'int main(){return 0;}' >"$build/gpu/arch_probe.cu"
nvcc $arch -o "$build/gpu/arch_probe" "$build/gpu/arch_probe.cu" >/dev/null 2>&1 || arch="-arch=sm_90"
nvcc $arch -O2 -o "$build/gpu/limiter_bench" "$here/limiter_bench.cu"
bench="$build/gpu/limiter_bench"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
ipus=$("$bench" --calibrate | sed -n 's/^CALIB ipus=\([0-9.]*\).*/\1/p')
settle=${PROBE_SETTLE:-1}
measure=${PROBE_MEASURE:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run N LIB LIMIT -> "per_s min_stream_per_s" (LIB empty: no library)
run() {
  local n=$1 so=$2 limit=$3 out
  local cache="$work/c.$n.$limit.$RANDOM"
  out=$(env -u LD_PRELOAD -u CUDA_DEVICE_SM_LIMIT \
    ${so:+LD_PRELOAD=$so CUDA_DEVICE_MEMORY_SHARED_CACHE=$cache GPU_CORE_UTILIZATION_POLICY=force \
    LIBCUDA_LOG_LEVEL=0 CUDA_DEVICE_SM_LIMIT=$limit} \
    "$bench" --shape streams --streams "$n" --ipus "$ipus" --settle "$settle" --measure "$measure" |
    sed -n 's/^RESULT //p')
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(r["per_s"], r["min_stream_per_s"])' "$out"
}

printf '%-8s %-6s %-10s %14s %14s\n' streams limit library "thr/nolib %" "slowest %"
for n in ${PROBE_STREAMS:-1 8 33 128}; do
  read -r base base_min < <(run "$n" "" 0)
  for limit in 90 25; do
    for which in new old; do
      so="$build/libvgpu.so"
      if [ "$which" = old ]; then [ -n "$old_lib" ] || continue; so="$old_lib"; fi
      read -r per min < <(run "$n" "$so" "$limit")
      python3 -c 'import sys; n,l,w,p,b,m,bm=sys.argv[1:]; print(f"{n:<8} {l:<6} {w:<10} {100*float(p)/float(b):14.1f} {100*float(m)/max(float(bm),1e-9):14.1f}")' \
        "$n" "$limit" "$which" "$per" "$base" "$min" "$base_min"
    done
  done
done

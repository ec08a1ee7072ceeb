#!/usr/bin/env bash
# Many busy streams in one process under the SM limit (issue 35), on a real GPU, ~3-4 minutes:
# N non-blocking streams (1, 8, 33, 128), each kernel 1/N of the GPU's blocks for 200 us, two in
# flight per stream, completions polled (gpu/limiter_bench.cu --shape streams). Throughput without
# the library has discrete modes (172k / 158k / 137k kernels/s at 33 streams on an H200 in
# back-to-back runs), so every round runs the no-library rate before AND after the library's runs
# and each library run is divided by the mean of that pair; the table prints the median over
# PROBE_ROUNDS rounds (and the min..max). Rows per N: this library with no SM limit (the hook's
# unlimited path), at 90 % and at 25 %, and the same under OLD_LIB when given (e.g. main's build
# before the change). Goal: >= 88 % at 90, 25 +- 2 at 25 (the GPU's own busy share, NVML, is
# what BENCH_MATRIX=issue30 gpu/limiter_bench.sh reports).
#   usage (repo root or any copy of libvgpu): bash libvgpu/gpu/streams_probe.sh [OLD_LIB]
#   knobs: PROBE_STREAMS="1 8 33 128"  PROBE_ROUNDS=2  PROBE_SETTLE=1  PROBE_MEASURE=2
set -euo pipefail
export PATH=/usr/local/cuda/bin:$PATH
here="$(cd "$(dirname "$0")" && pwd)"
lib="$(dirname "$here")"
build="$lib/build"
old_lib="${1:-}"
mkdir -p "$build/gpu"
make -C "$lib" -s lib >/dev/null
make -s -C "$here" OUT="$build/gpu" limiter_bench
bench="$build/gpu/limiter_bench"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
ipus=$("$bench" --calibrate | sed -n 's/^CALIB ipus=\([0-9.]*\).*/\1/p')
settle=${PROBE_SETTLE:-1}
measure=${PROBE_MEASURE:-2}
rounds=${PROBE_ROUNDS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run N LIB LIMIT -> "per_s min_stream_per_s" (LIB empty: no library; LIMIT 0: no SM limit)
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

raw="$work/raw"
: >"$raw"
for n in ${PROBE_STREAMS:-1 8 33 128}; do
  for round in $(seq 1 "$rounds"); do
    read -r b1 bm1 < <(run "$n" "" 0)
    cells=()
    for which in new old; do
      so="$build/libvgpu.so"
      if [ "$which" = old ]; then [ -n "$old_lib" ] || continue; so="$old_lib"; fi
      for limit in 0 90 25; do
        read -r per min < <(run "$n" "$so" "$limit")
        cells+=("$which $limit $per $min")
      done
    done
    read -r b2 bm2 < <(run "$n" "" 0)
    echo "# N=$n round $round: no library $b1 then $b2 kernels/s" >&2
    for c in "${cells[@]}"; do
      set -- $c
      echo "$n $1 $2 $3 $4 $b1 $b2 $bm1 $bm2" >>"$raw"
    done
  done
done
echo "raw (N library limit per_s min_stream_per_s nolib_before nolib_after nolib_min_before nolib_min_after):"
cat "$raw"
python3 - "$raw" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    n, which, limit, per, mn, b1, b2, bm1, bm2 = line.split()
    base, bmin = (float(b1) + float(b2)) / 2, (float(bm1) + float(bm2)) / 2
    key = (int(n), which, int(limit))
    rows.setdefault(key, []).append((100 * float(per) / base, 100 * float(mn) / max(bmin, 1e-9)))
print(f"{'streams':<8} {'library':<8} {'limit':<6} {'thr/nolib % median':>19} {'min..max':>14} {'slowest % median':>17}")
for key in sorted(rows):
    thr = [t for t, _ in rows[key]]
    slow = [s for _, s in rows[key]]
    n, which, limit = key
    print(f"{n:<8} {which:<8} {limit if limit else 'none':<6} {statistics.median(thr):19.1f} "
          f"{min(thr):6.1f}..{max(thr):<6.1f} {statistics.median(slow):17.1f}")
PY

#!/usr/bin/env bash
# routes_probe.sh — issue 35's routes around the limits on a real GPU, before and after: every
# route of routes_probe.c under OLD_LIB (the library before the fix) and NEW_LIB, memory limit
# 4 GiB (CUDA_DEVICE_MEMORY_LIMIT=4g) or SM limit 25 %; the SM share is the route's kernel rate
# over the solo rate (no library) measured in the same run.
# Usage (GPU machine, CUDA 13 + nvcc): routes_probe.sh OLD_LIB NEW_LIB OUTDIR
# Prints one line per route and library: route lib ok refused held_MiB tracked_MiB [share_%].
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OLD=$1 NEW=$2 OUT=$3
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
cc -std=gnu11 -O2 -Wall -I"$HERE/../include" -I/usr/local/cuda/include -o "$OUT/routes_probe" "$HERE/routes_probe.c" \
  -L/usr/local/cuda/lib64 -lcuda -ldl || exit 101
nvcc -cubin -arch=sm_90 -o "$OUT/routes.cubin" "$HERE/routes_kernels.cu" || exit 102
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0
field() { sed -nE "s/.*(^| )$1=([^ ]*).*/\2/p" <<< "$2" | head -1; }
mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
probe() { # lib route [env...]
  local lib=$1 route=$2
  shift 2
  local pre=() cache=$OUT/$route.$RANDOM.cache
  [ "$lib" != none ] && pre=(LD_PRELOAD="$lib" CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache")
  env "${pre[@]}" CUDA_MODULE_LOADING=EAGER LIBCUDA_LOG_LEVEL=0 "$@" timeout 120 "$OUT/routes_probe" "$route" \
    "$OUT/routes.cubin" 2> "$OUT/$route.$(basename "$lib").err" | grep RESULT || echo "RESULT route=$route failed=$(tail -1 "$OUT/$route.$(basename "$lib").err")"
}
solo=$(field rate "$(probe none sm_plain)")
solo_memset=$(field rate "$(probe none sm_memset)")
echo "solo rate: $solo kernels/s, $solo_memset memsets/s"
for route in granularity small pools async_noctx graph_v1 module lmem; do
  for lib in old new; do
    l=$OLD; [ $lib = new ] && l=$NEW
    r=$(probe "$l" $route CUDA_DEVICE_MEMORY_LIMIT=4g)
    echo "$route $lib ok=$(field ok "$r") refused=$(field refused "$r") held=$(mib "$(field held "$r")") tracked=$(mib "$(field tracked "$r")") $(field failed "$r")"
  done
done
for route in sm_plain sm_noctx sm_legacy sm_otherctx sm_memset; do
  for lib in old new; do
    l=$OLD; [ $lib = new ] && l=$NEW
    r=$(probe "$l" $route CUDA_DEVICE_SM_LIMIT=25)
    rate=$(field rate "$r")
    base=$solo; [ $route = sm_memset ] && base=$solo_memset
    echo "$route $lib rate=$rate share=$(awk -v a="${rate:-0}" -v b="${base:-1}" 'BEGIN { printf "%.1f", 100 * a / b }') $(field failed "$r")"
  done
done

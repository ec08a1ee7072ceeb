#!/usr/bin/env bash
# routes_probe.sh — issue 35's routes around the limits on a real GPU, before and after: every
# route of routes_probe.c under OLD_LIB (the library before the fix) and NEW_LIB, memory limit
# 4 GiB (CUDA_DEVICE_MEMORY_LIMIT=4g) or SM limit 25 %; the SM share is the route's kernel rate
# over the solo rate (no library) measured in the same run.
# Usage (GPU machine, CUDA 13 + nvcc): routes_probe.sh OLD_LIB NEW_LIB OUTDIR
#   ROUTES_ONLY="arrays managed_pool child degraded" runs only those (memory routes, `degraded`,
#   and sm_* routes by name; the SM solo rates are measured only when an sm_ route runs).
# Prints one line per route and library: route lib ok refused held_MiB tracked_MiB [share_%].
#   degraded (route 12): three processes at once on a region path that is a symlink, each taking
#   3 x 1 GiB and holding it 5 s: ok = GiB the three got together, held = their NVML sum.
# Routes 9, 10, 11, 14 (raw_symbol ipc dmabuf dmabuf_vmm opencl) are memory routes like the others,
# with their own figures appended (the probe's INFO line); routes 17, 20, 21 (sm_ctx5 sm_persistent
# sm_opencl) print a `none` row too, whose rate is the solo rate of that route's share (sm_ctx5: five
# contexts unlimited; sm_opencl: the OpenCL kernel unlimited; sm_persistent: the saturating loop's
# rate in the 3 s after the 3 s kernel ended, share of the sm_plain solo rate).
# A route the machine cannot run prints skipped=<why> (no libOpenCL, no NVIDIA ICD, no dmabuf).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OLD=$1 NEW=$2 OUT=$3
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd) # make -C below runs elsewhere
export PATH=/usr/local/cuda/bin:$PATH
make -s -C "$HERE" OUT="$OUT" routes_probe || exit 101
make -s -C "$HERE" OUT="$OUT" routes.cubin || exit 102
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0
field() { sed -nE "s/.*(^| )$1=([^ ]*).*/\2/p" <<< "$2" | head -1; }
mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
probe() { # lib route [env...]
  local lib=$1 route=$2
  shift 2
  local pre=() cache=$OUT/$route.$RANDOM.cache
  [ "$lib" != none ] && pre=(LD_PRELOAD="$lib" CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache")
  env "${pre[@]}" CUDA_MODULE_LOADING=EAGER LIBCUDA_LOG_LEVEL=0 "$@" timeout 120 "$OUT/routes_probe" "$route" \
    "$OUT/routes.cubin" 2> "$OUT/$route.$(basename "$lib").err" | grep -E '^(RESULT|INFO) ' || echo "RESULT route=$route failed=$(tail -1 "$OUT/$route.$(basename "$lib").err")"
}
wanted() { [ -z "${ROUTES_ONLY:-}" ] || [[ " $ROUTES_ONLY " == *" $1 "* ]]; }
sm_wanted=0 solo="" solo_memset=""
for route in sm_plain sm_noctx sm_legacy sm_otherctx sm_memset sm_persistent; do wanted $route && sm_wanted=1; done
if [ $sm_wanted = 1 ]; then
  solo=$(field rate "$(probe none sm_plain)")
  solo_memset=$(field rate "$(probe none sm_memset)")
  echo "solo rate: $solo kernels/s, $solo_memset memsets/s"
fi
info() { grep '^INFO ' <<< "$1" | sed -E 's/^INFO route=[^ ]* ?//' | tr '\n' ' '; }
if wanted opencl || wanted sm_opencl; then # what the machine has for route 14/21
  echo "OpenCL: ICD files: $(ls /etc/OpenCL/vendors 2> /dev/null | tr '\n' ' ')libOpenCL: $(ldconfig -p | grep -c 'libOpenCL\.so') libnvidia-opencl: $(ldconfig -p | grep -c 'libnvidia-opencl\.so')"
fi
for route in granularity small pools async_noctx graph_v1 module lmem arrays managed_pool child raw_symbol ipc dmabuf dmabuf_vmm opencl; do
  wanted $route || continue
  for lib in old new; do
    l=$OLD; [ $lib = new ] && l=$NEW
    r=$(probe "$l" $route CUDA_DEVICE_MEMORY_LIMIT=4g)
    extra=$(grep -o 'req_size=[0-9]* req_align=[0-9]*\|child_held=[-0-9]*' <<< "$r" | tr '\n' ' ')
    skip=$(field skipped "$r")
    if [ -n "$skip" ]; then echo "$route $lib skipped=$skip $(info "$r")"; continue; fi
    echo "$route $lib ok=$(field ok "$r") refused=$(field refused "$r") held=$(mib "$(field held "$r")") tracked=$(mib "$(field tracked "$r")") $extra$(info "$r")$(field failed "$r")"
  done
done
if wanted degraded; then
  for lib in old new; do
    l=$OLD; [ $lib = new ] && l=$NEW
    d=$OUT/degraded.$lib
    mkdir -p "$d" && ln -sfn "$d/elsewhere" "$d/vgpu.cache" # the region path is a symlink
    for i in 1 2 3; do
      env LD_PRELOAD="$l" CUDA_DEVICE_MEMORY_SHARED_CACHE="$d/vgpu.cache" CUDA_DEVICE_MEMORY_LIMIT=4g \
        CUDA_MODULE_LOADING=EAGER LIBCUDA_LOG_LEVEL=0 timeout 60 "$OUT/routes_probe" hold3g "$OUT/routes.cubin" \
        > "$d/out.$i" 2> "$d/err.$i" &
    done
    wait
    cat "$d"/out.* | awk -v lib=$lib '/^RESULT/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      ok += v["ok"]; held += v["held"]; n++ }
      END { printf "degraded %s processes=%d ok_GiB=%d held=%.0f\n", lib, n, ok, held / 1048576 }'
  done
fi
for route in sm_plain sm_noctx sm_legacy sm_otherctx sm_memset sm_ctx5 sm_persistent sm_opencl; do
  wanted $route || continue
  base=$solo
  [ $route = sm_memset ] && base=$solo_memset
  case $route in sm_ctx5 | sm_persistent | sm_opencl) # the unlimited row: this route's own solo rate
    r=$(probe none $route)
    skip=$(field skipped "$r")
    if [ -n "$skip" ]; then echo "$route none skipped=$skip $(info "$r")"; continue; fi
    [ $route != sm_persistent ] && base=$(field rate "$r")
    echo "$route none rate=$(field rate "$r") $(info "$r")$(field failed "$r")"
    ;;
  esac
  for lib in old new; do
    l=$OLD; [ $lib = new ] && l=$NEW
    r=$(probe "$l" $route CUDA_DEVICE_SM_LIMIT=25)
    rate=$(field rate "$r")
    echo "$route $lib rate=$rate share=$(awk -v a="${rate:-0}" -v b="${base:-1}" 'BEGIN { printf "%.1f", 100 * a / b }') $(info "$r")$(field skipped "$r")$(field failed "$r")"
  done
done

#!/usr/bin/env bash
# run_mem_patterns.sh — every way to hold device memory (gpu/mem_patterns.c) under libvgpu on a
# real GPU: VMM create->map->release, retained handles, exported/imported handles, graph allocation
# nodes, cuCtxSetLimit heap/stack, module globals, plain cuMemAlloc as the control.
#
# Usage, on the GPU machine from the repository root (CUDA 13, driver 580, nvcc):
#   libvgpu/gpu/run_mem_patterns.sh [LIMIT_MIB] [OLD_LIBVGPU_SO]
# LIMIT_MIB (default 4096) is CUDA_DEVICE_MEMORY_LIMIT; OLD_LIBVGPU_SO, when given, is another
# build run the same way for comparison (e.g. the previous release). Each pattern also runs without
# any library ("none": what the pattern physically holds). Prints one table row per run:
#   pattern, library, limit, NVML base (after the context), max NVML during the run, OOM seen,
#   NVML after the frees, verdict (libvgpu rows only).
# Verdict PASS: NVML never above limit + context (base), an over-limit request of the pattern got
# CUDA_ERROR_OUT_OF_MEMORY, and NVML back within 2 MiB of its base after the frees, or, for memory
# the driver keeps until the context goes (a malloc heap, what a module leaves after its unload),
# counted by libvgpu at the end (tracked_after) within 2 MiB of NVML.
# Exit status: number of FAILed libvgpu rows.
set -uo pipefail
cd "$(dirname "$0")/.."
LIMIT_MIB=${1:-4096}
OLD=${2:-}
OUT=${OUT_DIR:-$(mktemp -d /tmp/libvgpu-patterns.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd) # make -C below runs elsewhere
LIB=$PWD/build/libvgpu.so
export PATH=/usr/local/cuda/bin:$PATH
make -s -j8 lib >&2 || { echo "make lib failed" >&2; exit 100; }
make -s -C gpu OUT="$OUT" mem_patterns >&2 || exit 101
make -s -C gpu OUT="$OUT" kernels.cubin >&2 || exit 102
make -s -C gpu OUT="$OUT" mem_patterns_runtime >&2 || exit 103
export MEM_PATTERNS_CUBIN=$OUT/kernels.cubin
GPU=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0 2>/dev/null | head -1)
FAILS=0
field() { sed -nE "s/.*(^| )$1=([^ ]*).*/\2/p" <<< "$2" | head -1; }
mib() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }

run_one() { # pattern-label library(new|old|none) args...  (PROG=<program> for another prober)
  local label=$1 lib=$2
  shift 2
  local pre=()
  case $lib in
    new) pre=(LD_PRELOAD="$LIB") ;;
    old) pre=(LD_PRELOAD="$OLD") ;;
  esac
  local log=$OUT/$label.$lib.log cache=$OUT/$label.$lib.cache
  rm -f "$cache"
  env "${pre[@]}" CUDA_DEVICE_MEMORY_LIMIT="${LIMIT_MIB}m" CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" \
    LIBCUDA_LOG_LEVEL=0 timeout 120 ${PROG:-"$OUT/mem_patterns"} "$@" > "$log" 2> "$log.err"
  local rc=$? r
  r=$(grep 'RESULT mode=' "$log")
  local base max after oom
  base=$(field base "$r"); max=$(field max "$r"); after=$(field after "$r"); oom=$(field oom "$r")
  local extra
  extra=$(grep RESULT "$log" | grep -v 'RESULT mode=' | sed 's/^RESULT //' | tr '\n' ' ')
  local verdict=-
  if [ "$lib" = new ]; then
    verdict=PASS
    if [ -z "$r" ] || [ $rc -ne 0 ]; then verdict=FAIL
    elif [ "$max" -gt $(( (LIMIT_MIB << 20) + base )) ]; then verdict=FAIL
    elif [ "${oom:-0}" -lt 1 ]; then verdict=FAIL
    elif [ $(( after - base )) -gt $((2 << 20)) ] && [ $(( after - $(field tracked_after "$r") )) -gt $((2 << 20)) ]; then
      verdict=FAIL # memory still held at the end (a heap, a module's leftovers) must be counted
    fi
    [ $verdict = FAIL ] && FAILS=$((FAILS + 1))
  fi
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$lib" "$LIMIT_MIB" "$(mib "${base:-0}")" \
    "$(mib "${max:-0}")" "${oom:-?}" "$(mib "${after:-0}")" "$verdict" "${extra:-rc=$rc $(tail -1 "$log.err")}"
}

echo "libvgpu memory patterns — $GPU — CUDA_DEVICE_MEMORY_LIMIT=${LIMIT_MIB}m"
echo "| pattern | library | limit MiB | NVML base MiB | max NVML MiB | OOM seen | NVML after MiB | verdict | notes |"
echo "|---|---|---|---|---|---|---|---|---|"
libs="new none"
[ -n "$OLD" ] && libs="new old none"
for lib in $libs; do run_one "control_cuMemAlloc_1GiB" $lib control 1024; done
for lib in $libs; do run_one "vmm_8x1GiB_create_map_release" $lib vmm 8 1024; done
for lib in $libs; do run_one "vmm_retain_1GiB" $lib retain 1024; done
for lib in $libs; do run_one "vmm_export_import_1GiB" $lib share 1024; done
for lib in $libs; do run_one "graph_alloc_nodes_8x1GiB" $lib graph 8 1024; done
for lib in $libs; do run_one "ctx_limit_heap_1GiB" $lib heap 1024; done
for lib in $libs; do run_one "module_512MiB_global" $lib module; done
# The runtime API (driver entry points through cuGetProcAddress): captured stream-ordered
# allocations in graphs, cudaDeviceSetLimit; PyTorch's expandable segments (VMM underneath).
for lib in $libs; do PROG=$OUT/mem_patterns_runtime run_one "runtime_capture_cudaMallocAsync_8x1GiB" $lib capture 8 1024; done
for lib in $libs; do PROG=$OUT/mem_patterns_runtime run_one "runtime_cudaDeviceSetLimit_heap" $lib setlimit; done
if python3 -c 'import torch, pynvml; assert torch.cuda.is_available()' 2>/dev/null; then
  for lib in $libs; do PROG="python3 gpu/torch_expandable.py" run_one "torch_expandable_segments_256MiB" $lib; done
fi
echo
for f in "$OUT"/*.log; do echo "== $(basename "$f")"; grep -E '^(STEP|RESULT)' "$f"; tail -2 "$f.err"; done
echo "mem-patterns: $FAILS libvgpu rows failed"
exit $FAILS

#!/usr/bin/env bash
# run_memory_tests.sh — libvgpu's memory virtualization on a real GPU, plus the overhead benchmark.
#
# Usage, on the GPU machine from the repository root (Ubuntu 24.04, CUDA 13, driver 580, PyTorch):
#   libvgpu/gpu/run_memory_tests.sh [LIMIT_MIB] [ROUNDS]
# LIMIT_MIB (default 4096) is the container limit under test; ROUNDS (default 7) the paired
# benchmark rounds. Builds everything it needs (make -C libvgpu, cc, nvcc), then prints one table:
# check, result (PASS/FAIL/SKIP), detail. Exit status: number of FAILed checks (0 = all passed).
# Needs root only for the `unshare --pid` row (skipped otherwise).
set -uo pipefail
cd "$(dirname "$0")/.."
LIMIT_MIB=${1:-4096}
ROUNDS=${2:-7}
LIMIT=$((LIMIT_MIB << 20))
CHUNK_MIB=64
CHUNK=$((CHUNK_MIB << 20))
OUT=$(mktemp -d /tmp/libvgpu-gpu.XXXXXX)
LIB=$PWD/build/libvgpu.so
export PATH=/usr/local/cuda/bin:$PATH
ROWS=()
FAILS=0

row() { # check result detail
  ROWS+=("$(printf '%-34s %-5s %s' "$1" "$2" "$3")")
  [ "$2" = FAIL ] && FAILS=$((FAILS + 1))
  printf '%-34s %-5s %s\n' "$1" "$2" "$3" >&2
}
field() { # key line -> value
  sed -nE "s/.*(^| )$1=([^ ]*).*/\2/p" <<< "$2" | head -1
}
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
vg() { # run a command under libvgpu with a fresh cache file named $1
  local cache=$OUT/$1.cache
  shift
  rm -f "$cache"
  env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT="${LIMIT_MIB}m" CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" \
    LIBCUDA_LOG_LEVEL="${LIBCUDA_LOG_LEVEL:-0}" "$@"
}

echo "== building" >&2
make -s all >&2 || { echo "make -C libvgpu all failed" >&2; exit 100; }
make -s -C gpu OUT="$OUT" mem_driver >&2 || exit 101
make -s -C gpu OUT="$OUT" mem_runtime >&2 || exit 102
make -s -C gpu OUT="$OUT" bench >&2 || exit 103
make -s -C gpu OUT="$OUT" pool_probe >&2 || exit 104
GPU=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader -i 0 2>/dev/null | head -1)
echo "== GPU: $GPU; limit ${LIMIT_MIB} MiB; chunk ${CHUNK_MIB} MiB" >&2

# 1. Driver API: allocate until OOM. Tracked usage (context included) ends within one chunk
#    below the limit and never above it; cuMemGetInfo shows the limit.
check_oom() { # name result-line
  local l=$2 t tot
  t=$(field tracked_all "$l")
  tot=$(field meminfo_total "$l")
  if [ -z "$t" ]; then row "$1" FAIL "no result: $l"; return; fi
  if [ "$t" -le "$LIMIT" ] && [ "$t" -gt $((LIMIT - CHUNK)) ] && [ "${tot:-0}" -eq "$LIMIT" ]; then
    row "$1" PASS "tracked $(mib "$t") of $(mib "$LIMIT"), allocated $(mib "$(field allocated "$l")"), meminfo total $(mib "$tot")"
  else
    row "$1" FAIL "tracked $(mib "$t") (want ($(mib $((LIMIT - CHUNK))), $(mib "$LIMIT")]), meminfo total $(mib "${tot:-0}")"
  fi
}
L=$(vg driver_oom "$OUT/mem_driver" oom $CHUNK_MIB | grep RESULT)
check_oom "driver cuMemAlloc until OOM" "$L"
CTX_NVML=$(field ctx_nvml "$L")

# 2. Runtime API (cudart -> cuGetProcAddress): cudaMalloc and cudaMallocAsync until OOM.
L=$(vg runtime_oom "$OUT/mem_runtime" oom $CHUNK_MIB | grep RESULT)
check_oom "runtime cudaMalloc until OOM" "$L"
L=$(vg runtime_async "$OUT/mem_runtime" async $CHUNK_MIB | grep RESULT) # step checked in 2d
t=$(field tracked_all "$L")
if [ -n "$t" ] && [ "$t" -le "$LIMIT" ] && [ "$t" -gt $((LIMIT - 2 * CHUNK)) ]; then
  row "runtime cudaMallocAsync until OOM" PASS "tracked $(mib "$t") (pool reservations), allocated $(mib "$(field allocated "$L")")"
else
  row "runtime cudaMallocAsync until OOM" FAIL "tracked $(mib "${t:-0}"), want within 2 chunks below $(mib "$LIMIT"): $L"
fi

# 2b. Stream-ordered pools. First how the driver grows a pool (no libvgpu): the growth step is what
#     one 1-byte request adds to an empty pool (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT).
"$OUT/pool_probe" steps > "$OUT/probe_raw.txt" 2> "$OUT/probe_raw.err"
pgrowth() { # pool request -> growth of an empty pool
  field growth "$(grep "probe=single pool=$1 request=$2 " "$OUT/probe_raw.txt")"
}
SD=$(pgrowth default 1); SE=$(pgrowth explicit 1)
STEP=${SD:-0}; [ "${SE:-0}" -gt "$STEP" ] && STEP=$SE
rel=$(grep 'probe=release pool=default' "$OUT/probe_raw.txt")
thr=$(grep 'probe=threshold pool=default' "$OUT/probe_raw.txt")
if [ "${SD:-0}" -gt 0 ] && [ "${SE:-0}" -gt 0 ]; then
  row "pool growth step (measured)" PASS "1 B request: default $(mib "$SD"), explicit $(mib "$SE"); 33 MiB -> $(mib "$(pgrowth default 34603008)"), 100 MiB -> $(mib "$(pgrowth default 104857600)"); after frees: trim before sync keeps $(mib "$(field trim_before_sync "$rel")"), sync keeps $(mib "$(field after_sync "$rel")"); threshold 256 MiB keeps $(mib "$(field kept_after_sync "$thr")")"
else
  row "pool growth step (measured)" FAIL "no probe result: $(tail -2 "$OUT/probe_raw.err")"
  STEP=$((32 << 20))
fi
sed 's/^RESULT /    /' "$OUT/probe_raw.txt" >&2

# 2c. Under libvgpu the count follows each pool exactly: after every request the process's count is
#     its context plus the pool's growth, and back to the context after frees + synchronize, trims
#     and a release threshold (cuStreamSynchronize/cuMemPoolSetAttribute are hooked).
vg probe "$OUT/pool_probe" steps > "$OUT/probe_vg.txt" 2> "$OUT/probe_vg.err"
pctx=$(field tracked_self "$(grep 'probe=start' "$OUT/probe_vg.txt")")
bad=0; nsingle=0; first_bad=
while read -r line; do
  g=$(field growth "$line"); ts=$(field tracked_self "$line")
  nsingle=$((nsingle + 1))
  [ $((ts - pctx)) -ne "$g" ] && { bad=$((bad + 1)); [ -z "$first_bad" ] && first_bad="$line"; }
done < <(grep 'probe=single' "$OUT/probe_vg.txt")
while read -r line; do
  ts=$(field tracked_self "$line")
  [ "$ts" -ne "$pctx" ] && { bad=$((bad + 1)); [ -z "$first_bad" ] && first_bad="$line"; }
done < <(grep -E 'probe=(release|threshold)' "$OUT/probe_vg.txt")
if [ -n "$pctx" ] && [ "$nsingle" -ge 30 ] && [ $bad -eq 0 ]; then
  row "pool count = pool reservation" PASS "$nsingle requests (default + explicit pool), frees+sync, trim, threshold: count = context $(mib "$pctx") + reserved, exactly"
else
  row "pool count = pool reservation" FAIL "$bad mismatches of $nsingle (ctx ${pctx:-?}): ${first_bad:-$(tail -2 "$OUT/probe_vg.err")}"
fi

# 2d. Stream-ordered allocation until OOM never counts above the limit (sampled after every call),
#     ends less than one growth of the last request below it, and equals NVML's view of the process.
for pool in default explicit; do
  detail=; ok=1
  for c in 1 64 100 1:thr; do
    cm=${c%%:*}; extra=; [ "$c" != "$cm" ] && extra=1
    [ -n "$extra" ] && [ $pool = explicit ] && continue
    l=$(vg "poom_${pool}_$cm" "$OUT/pool_probe" oom "$cm" $pool $extra 2>/dev/null | grep RESULT)
    t=$(field tracked_all "$l"); mx=$(field max_tracked "$l"); nv=$(field nvml_self "$l"); tot=$(field meminfo_total "$l")
    grow=$(( ((cm << 20) + STEP - 1) / STEP * STEP )); [ $grow -lt "$STEP" ] && grow=$STEP
    d=$(( ${t:-0} - ${nv:-0} )); d=${d#-}
    if [ -z "$t" ] || [ "$mx" -gt "$LIMIT" ] || [ "$t" -le $((LIMIT - grow)) ] || [ $d -gt $((2 << 20)) ] || [ "${tot:-0}" -ne "$LIMIT" ]; then
      ok=0; detail+=" [${cm} MiB${extra:+ thr=max}: FAIL ${l:-no result}]"
    else
      detail+=" ${cm} MiB${extra:+ (threshold max)}: max $(mib "$mx"), NVML $(mib "$nv");"
    fi
  done
  [ $ok = 1 ] && row "async $pool pool until OOM" PASS "never above $(mib "$LIMIT"):$detail" || row "async $pool pool until OOM" FAIL "$detail"
done

# 2e. Growth the estimate missed is undone: free space that looked usable was not (its free still
#     pending on a busy stream), the pool grew by a step that does not fit, libvgpu freed it,
#     trimmed the pool and refused.
l=$(vg undo "$OUT/pool_probe" undo 2> "$OUT/undo.err" | grep RESULT)
urc=$(field rc "$l"); ura=$(field tracked_right_after "$l"); ut=$(field tracked_all "$l"); unv=$(field nvml_self "$l")
if [ -z "$l" ]; then
  row "async growth undone at the limit" FAIL "no result: $(tail -2 "$OUT/undo.err")"
elif [ "$urc" = 0 ] && [ "$(field reserved_after "$l")" = "$(field reserved_before "$l")" ]; then
  row "async growth undone at the limit" SKIP "the driver reused the pending block (no growth to undo): $l"
elif [ "$urc" = 2 ] && [ "$ura" -le "$LIMIT" ] && [ "$ut" -le "$LIMIT" ] && grep -q 'OOM' "$OUT/undo.err"; then
  row "async growth undone at the limit" PASS "refused (OOM logged), count $(mib "$ura") right after, pool back to $(mib "$(field reserved_after "$l")"), NVML $(mib "$unv") after sync"
else
  row "async growth undone at the limit" FAIL "$l; $(tail -2 "$OUT/undo.err")"
fi

# 3. Every allocation kind: tracked (this process's slot) vs NVML's per-process usage after each
#    step; the difference may not exceed the context's own size.
vg kinds "$OUT/mem_driver" kinds > "$OUT/kinds.txt" 2> "$OUT/kinds.err"
ctx=$(grep 'step=context ' "$OUT/kinds.txt" | sed -nE 's/.*nvml_self=([-0-9]+).*/\1/p')
worst=0
worst_step=
while read -r line; do
  s=$(field step "$line"); tr=$(field tracked_self "$line"); nv=$(field nvml_self "$line")
  [ "${nv:--1}" -lt 0 ] && continue
  d=$((tr > nv ? tr - nv : nv - tr))
  [ $d -gt $worst ] && { worst=$d; worst_step=$s; }
done < <(grep RESULT "$OUT/kinds.txt")
nsteps=$(grep -c RESULT "$OUT/kinds.txt")
if [ "$nsteps" -lt 12 ] || [ -z "$ctx" ] || [ "$ctx" -lt 0 ]; then
  row "tracked vs NVML, every kind" FAIL "incomplete ($nsteps steps, ctx ${ctx:-?}): $(tail -2 "$OUT/kinds.err")"
elif [ $worst -le "$ctx" ]; then
  row "tracked vs NVML, every kind" PASS "worst |tracked-NVML| $(mib $worst) at $worst_step <= context $(mib "$ctx")"
else
  row "tracked vs NVML, every kind" FAIL "worst |tracked-NVML| $(mib $worst) at $worst_step > context $(mib "$ctx")"
fi
sed 's/^RESULT mode=kinds /    /' "$OUT/kinds.txt" >&2

# 4. PyTorch: mem_get_info shows the limit; allocating 64 MiB tensors stops at the limit.
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  T=$(vg torch python3 gpu/torch_mem.py "$LIMIT" $CHUNK_MIB 2> "$OUT/torch.err")
  tot=$(field total "$(grep torch_info <<< "$T")")
  l=$(grep torch_oom <<< "$T")
  t=$(field tracked_all "$l")
  if [ "${tot:-0}" -eq "$LIMIT" ] && [ -n "$t" ] && [ "$t" -le "$LIMIT" ] && [ "$t" -gt $((LIMIT - CHUNK)) ]; then
    row "torch mem_get_info + OOM" PASS "total $(mib "$tot"), tracked at OOM $(mib "$t"), tensors $(mib "$(field allocated "$l")")"
  else
    row "torch mem_get_info + OOM" FAIL "total $(mib "${tot:-0}"), tracked $(mib "${t:-0}"): $(tail -2 "$OUT/torch.err")"
  fi
else
  row "torch mem_get_info + OOM" SKIP "no PyTorch with CUDA"
fi

# 5. nvidia-smi inside the container (same cache file) while a process holds memory.
cache=$OUT/smi.cache
rm -f "$cache"
env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT="${LIMIT_MIB}m" CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" \
  LIBCUDA_LOG_LEVEL=0 "$OUT/mem_driver" oom 512 6 > "$OUT/smi_holder.txt" &
holder=$!
for _ in $(seq 50); do grep -q RESULT "$OUT/smi_holder.txt" 2>/dev/null && break; sleep 0.1; done
held=$(field tracked_all "$(grep RESULT "$OUT/smi_holder.txt")")
smi=$(env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT="${LIMIT_MIB}m" CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" \
  LIBCUDA_LOG_LEVEL=0 nvidia-smi --query-gpu=memory.total,memory.used,memory.free --format=csv,noheader,nounits -i 0)
wait $holder
smi_total=$(cut -d, -f1 <<< "$smi" | tr -d ' ')
smi_used=$(cut -d, -f2 <<< "$smi" | tr -d ' ')
held_mib=$(( ${held:-0} >> 20 ))
if [ "${smi_total:-0}" -eq "$LIMIT_MIB" ] && [ $(( ${smi_used:-0} - held_mib )) -le 1 ] && [ $(( held_mib - ${smi_used:-0} )) -le 1 ]; then
  row "nvidia-smi inside shows the limit" PASS "total ${smi_total} MiB, used ${smi_used} MiB (tracked ${held_mib} MiB)"
else
  row "nvidia-smi inside shows the limit" FAIL "nvidia-smi: '$smi', tracked ${held_mib} MiB"
fi

# 6. Two processes share one limit: both allocate until OOM at the same time and hold.
cache=$OUT/two.cache
rm -f "$cache"
for i in 1 2; do # both create their contexts first, then allocate together (barrier files)
  env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT="${LIMIT_MIB}m" CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" \
    LIBCUDA_LOG_LEVEL=0 VGPU_TEST_BARRIER="$OUT/two.barrier" "$OUT/mem_driver" oom $CHUNK_MIB 4 > "$OUT/two.$i.txt" &
done
for _ in $(seq 600); do [ "$(ls "$OUT"/two.barrier.* 2>/dev/null | wc -l)" -ge 2 ] && break; sleep 0.1; done
touch "$OUT/two.barrier.go"
wait
a1=$(field allocated "$(grep RESULT "$OUT/two.1.txt")"); a2=$(field allocated "$(grep RESULT "$OUT/two.2.txt")")
t1=$(field tracked_all "$(grep RESULT "$OUT/two.1.txt")"); t2=$(field tracked_all "$(grep RESULT "$OUT/two.2.txt")")
tmax=$(( ${t1:-0} > ${t2:-0} ? ${t1:-0} : ${t2:-0} ))
if [ -n "$a1" ] && [ -n "$a2" ] && [ $tmax -le "$LIMIT" ] && [ $tmax -gt $((LIMIT - 2 * CHUNK)) ] && [ $((a1 + a2)) -le "$LIMIT" ]; then
  row "two processes share one limit" PASS "allocated $(mib "$a1") + $(mib "$a2"), container tracked $(mib $tmax)"
else
  row "two processes share one limit" FAIL "allocated ${a1:-?} + ${a2:-?}, tracked max $(mib $tmax)"
fi

# 7. The same driver OOM run inside a fresh pid namespace.
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  L=$(vg unshare unshare --pid --fork --mount-proc "$OUT/mem_driver" oom $CHUNK_MIB | grep RESULT)
  check_oom "driver OOM in unshare --pid" "$L"
else
  row "driver OOM in unshare --pid" SKIP "needs root and unshare"
fi

# 8. Overhead: paired rounds, baseline (no preload) and libvgpu (limit set), alternating order.
echo "== benchmark: $ROUNDS paired rounds" >&2
declare -A R
bench() { # mode n preload?
  local env=()
  [ "$3" = 1 ] && env=(LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT="${LIMIT_MIB}m"
    CUDA_DEVICE_MEMORY_SHARED_CACHE="$OUT/bench.cache" LIBCUDA_LOG_LEVEL=0)
  local v
  v=$(env "${env[@]}" "$OUT/bench" "$1" "$2" | sed -nE 's/.*us_per_op=([0-9.]+).*/\1/p')
  echo "${v:-NA}"
}
for r in $(seq "$ROUNDS"); do
  for mode in launch alloc; do
    n=200000; [ $mode = alloc ] && n=20000
    if [ $((r % 2)) = 1 ]; then order="0 1"; else order="1 0"; fi
    for p in $order; do R[$mode.$p]+="$(bench $mode $n $p) "; done
  done
done
stats() { # values... -> "median min max"
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f %.3f %.3f", m, v[1], v[NR] }'
}
for mode in launch alloc; do
  goal=2; [ $mode = alloc ] && goal=5
  if [[ "${R[$mode.0]} ${R[$mode.1]}" == *NA* ]]; then
    row "overhead $mode (goal <= +$goal %)" FAIL "a benchmark run produced no number: base [${R[$mode.0]}] libvgpu [${R[$mode.1]}]"
    continue
  fi
  read -r bm bmin bmax <<< "$(stats ${R[$mode.0]})"
  read -r pm pmin pmax <<< "$(stats ${R[$mode.1]})"
  pairs=()
  b=(${R[$mode.0]}); p=(${R[$mode.1]})
  for i in "${!b[@]}"; do pairs+=("$(awk -v x="${p[$i]}" -v y="${b[$i]}" 'BEGIN { printf "%.2f", (x / y - 1) * 100 }')"); done
  read -r om omin omax <<< "$(stats "${pairs[@]}")"
  verdict=PASS; awk -v o="$om" -v g=$goal 'BEGIN { exit !(o > g) }' && verdict=FAIL
  label="overhead $mode (goal <= +$goal %)"
  [ $mode = launch ] && what="empty-kernel launch" || what="1 MiB cudaMalloc+cudaFree"
  row "$label" "$verdict" "$what: baseline median ${bm} us [${bmin}-${bmax}], libvgpu ${pm} us [${pmin}-${pmax}], paired overhead median ${om} % [${omin}..${omax}]"
done

echo
echo "libvgpu GPU memory tests — $GPU — limit ${LIMIT_MIB} MiB, chunk ${CHUNK_MIB} MiB, context (NVML) $(mib "${CTX_NVML:-0}")"
printf '%-34s %-5s %s\n' CHECK RESULT DETAIL
printf '%s\n' "${ROWS[@]}"
echo "gpu-memory: $(printf '%s\n' "${ROWS[@]}" | grep -c ' PASS ') passed, $FAILS failed"
rm -rf "$OUT"
exit $FAILS

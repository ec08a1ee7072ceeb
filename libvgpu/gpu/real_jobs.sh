#!/usr/bin/env bash
# real_jobs.sh — issue 35's "Real jobs stay whole" on a real GPU machine (two GPUs for part b):
#   (a) train: a PyTorch training loop (3-layer 4096-wide MLP on a fixed synthetic task, STEPS
#       steps) on GPU 0, without the library and under it with CUDA_DEVICE_MEMORY_LIMIT and
#       CUDA_DEVICE_SM_LIMIT: it trains (loss falls), NVML's peak for the process stays within
#       limit + context (the context measured without the library), the SM share (steps/s ÷ the
#       run without the library) is within 5 pp of the limit, and the region counts what NVML holds.
#   (b) ddp: a 2-rank DDP job over NCCL (torchrun, one rank per GPU, NVLS off), without the library,
#       with a memory limit (ddp-mem) and with memory + SM limits (ddp-mem-sm): it completes, loss
#       falls on each rank, each rank's NVML peak stays within limit + context, and per GPU the
#       region's count of the ranks equals what NVML says they hold (NCCL's cuMemCreate/IPC buffers
#       charged once, not again by the peer that maps them); with the SM limit the share stays at
#       most the limit + 5 pp and above half the limit (no stall).
# Both ranks and the trainer share nothing: each run gets its own region file. NVML is read by a
# monitor process without the library (real_jobs.py monitor), every 50 ms.
# Usage (GPU machine, from anywhere): libvgpu/gpu/real_jobs.sh [LIBVGPU_SO]
#   default library: libvgpu/build/libvgpu.so (built with shrreg-tool when missing).
#   Environment: LIMIT_MIB (4096), SM_LIMIT (25, part a), DDP_SM_LIMIT (50), STEPS (300),
#   DDP_STEPS (200), PARTS ("train ddp"), OUT (results go to $OUT/real_jobs; else a temporary dir).
# Prints a PASS/FAIL table (also $OUT/real_jobs/table.txt); exit 0 only when every check passed.
# Worst case about 9.5 minutes (every run at its timeout); a normal run takes 2-3 minutes.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
LIMIT_MIB=${LIMIT_MIB:-4096} SM_LIMIT=${SM_LIMIT:-25} DDP_SM_LIMIT=${DDP_SM_LIMIT:-50}
STEPS=${STEPS:-300} DDP_STEPS=${DDP_STEPS:-200} PARTS=${PARTS:-train ddp}
export DDP_SM_LIMIT
BASE=${OUT:-$(mktemp -d /tmp/real_jobs.XXXXXX)}
RES=$BASE/real_jobs
mkdir -p "$RES"
LIB=${1:-$ROOT/build/libvgpu.so}
TOOL=${SHRREG_TOOL:-$ROOT/build/shrreg-tool}
die() { echo "real_jobs: $*" >&2; exit 2; }
if [ ! -f "$LIB" ] || [ ! -x "$TOOL" ]; then
  timeout 300 make -s -C "$ROOT" lib build/shrreg-tool > "$RES/build.log" 2>&1 || die "build failed: $(tail -5 "$RES/build.log")"
fi
[ -f "$LIB" ] || die "no library at $LIB"
[ -x "$TOOL" ] || die "no shrreg-tool at $TOOL"
python3 -c 'import torch, pynvml' 2> "$RES/python.err" || die "python3 lacks torch or pynvml: $(tail -1 "$RES/python.err")"
command -v nvidia-smi > /dev/null || die "no nvidia-smi"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | tee "$RES/gpus.txt"
NGPU=$(wc -l < "$RES/gpus.txt")
echo "library: $LIB; limits: memory $LIMIT_MIB MiB, SM $SM_LIMIT % (train) / $DDP_SM_LIMIT % (ddp-mem-sm); results: $RES"
START=$SECONDS

# job NAME TIMEOUT_S [VAR=VALUE...] -- COMMAND...: runs COMMAND with the NVML monitor beside it;
# the library's environment when LD_PRELOAD is among the variables. Never exits the script.
job() {
  local name=$1 limit=$2 dir=$RES/$1
  shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  mkdir -p "$dir"
  if [ $((SECONDS - START)) -gt $((570 - limit)) ]; then
    echo "$name: NOT RUN (the call's 10 minutes would not hold its ${limit} s timeout)"
    return 0
  fi
  rm -f "$dir/stop"
  env -u LD_PRELOAD python3 "$HERE/real_jobs.py" monitor "$dir/monitor.json" "$dir/stop" 2> "$dir/monitor.err" &
  local mon=$!
  local rc=0
  env "${envs[@]}" MONITOR_FILE="$dir/monitor.json" SHRREG_TOOL="$TOOL" \
    timeout -k 10 "$limit" "$@" > "$dir/log" 2>&1 || rc=$?
  echo "$rc" > "$dir/rc"
  touch "$dir/stop"
  for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$mon" 2> /dev/null || break; sleep 0.5; done
  kill "$mon" 2> /dev/null || true
  wait "$mon" 2> /dev/null || true
  if [ "$rc" = 0 ]; then
    echo "$name: exit 0 in $(grep -c . "$dir/log") log lines ($dir/log)"
  else
    echo "$name: exit $rc$([ "$rc" = 124 ] && echo " (timed out after ${limit} s)"); last lines of $dir/log:"
    tail -5 "$dir/log" | sed 's/^/  | /'
  fi
}
libenv() { # the library's environment for run directory $1
  echo LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT="${LIMIT_MIB}m" CUDA_DEVICE_MEMORY_SHARED_CACHE="$RES/$1/vgpu.cache"
}

if [[ " $PARTS " == *" train "* ]]; then
  job train-none 90 CUDA_VISIBLE_DEVICES=0 -- python3 "$HERE/real_jobs.py" train "$RES/train-none/result.json" "$STEPS"
  # shellcheck disable=SC2046 # libenv's words are VAR=VALUE pairs without spaces
  job train-lib 150 CUDA_VISIBLE_DEVICES=0 $(libenv train-lib) CUDA_DEVICE_SM_LIMIT="$SM_LIMIT" -- \
    python3 "$HERE/real_jobs.py" train "$RES/train-lib/result.json" "$STEPS"
fi
if [[ " $PARTS " == *" ddp "* ]]; then
  if [ "$NGPU" -lt 2 ]; then
    echo "this machine has $NGPU GPU(s); the DDP part needs 2 (device kind nvidia-h100-x2)" | tee "$RES/ddp.skipped"
  else
    ddp() { python3 -m torch.distributed.run --standalone --nproc_per_node=2 "$HERE/real_jobs.py" ddp "$RES/$1/rank{rank}.json" "$DDP_STEPS"; }
    export -f ddp
    export HERE RES DDP_STEPS
    common=(CUDA_VISIBLE_DEVICES=0,1 NCCL_NVLS_ENABLE=0 OMP_NUM_THREADS=4)
    job ddp-none 90 "${common[@]}" -- bash -c 'ddp ddp-none'
    # shellcheck disable=SC2046
    job ddp-mem 90 "${common[@]}" $(libenv ddp-mem) -- bash -c 'ddp ddp-mem'
    # shellcheck disable=SC2046
    job ddp-mem-sm 150 "${common[@]}" $(libenv ddp-mem-sm) CUDA_DEVICE_SM_LIMIT="$DDP_SM_LIMIT" -- bash -c 'ddp ddp-mem-sm'
  fi
fi
set +e
env -u LD_PRELOAD python3 "$HERE/real_jobs.py" report "$RES" "$LIMIT_MIB" "$SM_LIMIT" | tee "$RES/table.txt"
rc=${PIPESTATUS[0]}
echo "elapsed $((SECONDS - START)) s"
exit "$rc"

#!/usr/bin/env bash
# Runs test/preload/cases*.c under LD_PRELOAD=libvgpu.so against the fake libcuda/libnvidia-ml,
# one fresh cache file per case. Prints one line per case and "preload: N passed, M failed".
# Usage: BUILD=build test/run_preload.sh [case-name-filter]   (PRELOAD_SKIP="case...": not run)
# VGPU_LIB=<path> tests another copy of libvgpu.so (the glibc-floor run: the shipped library with
# test programs linked against an older glibc). Needs only bash and coreutils, so it also runs in a
# minimal root filesystem.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LIB=${VGPU_LIB:-$PWD/$BUILD/libvgpu.so}
CASES=$PWD/$BUILD/preload/cases
# The same kind of cases, by topic (test/preload/cases.h): threads and processes, symbol resolution.
PROCS=$PWD/$BUILD/preload/cases_procs
SYMBOLS=$PWD/$BUILD/preload/cases_symbols
FILTER=${1:-}
TMP=$(mktemp -d /tmp/libvgpu-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
. test/lib.sh
preload_env "$LIB" # PRELOAD: LIB, after the sanitizer runtimes in the sanitizer build
pass=0
fail=0

nvml_config() { # two 80 GiB GPUs whose uuids match the fake libcuda's defaults
  cat > "$TMP/nvml.conf" <<CONF
device 0 uuid=GPU-00000000-0000-0000-0000-000000000000 name=Fake_H100 total=85899345920 used=0
device 1 uuid=GPU-00000000-0000-0000-0000-000000000001 name=Fake_H100 total=85899345920 used=0
CONF
  echo "$TMP/nvml.conf"
}

# run NAME [VAR=VALUE...] [--stderr REGEX] [--no-stderr REGEX]   (PROG=<binary> run ...: another program)
run() {
  local name=$1
  shift
  local envs=() want=() unwanted=()
  while [ $# -gt 0 ]; do
    case $1 in
      --stderr) want+=("$2"); shift 2 ;;
      --no-stderr) unwanted+=("$2"); shift 2 ;;
      *) envs+=("$1"); shift ;;
    esac
  done
  local label=${name}${envs[*]:+ (${envs[*]})}
  if [ -n "$FILTER" ] && [[ $name != *$FILTER* ]]; then return; fi
  # PRELOAD_SKIP="name...": cases the caller cannot run (test/arm64/run.sh: what qemu-user does not
  # emulate); listed, never counted as passed.
  if [[ " ${PRELOAD_SKIP:-} " == *" $name "* ]]; then echo "skip $label"; return; fi
  local dir=$TMP/$name.$RANDOM
  mkdir -p "$dir"
  local ok=1
  env -i PATH="$PATH" HOME="$dir" ASAN_OPTIONS="$ASAN_OPTIONS" \
    LD_LIBRARY_PATH="$PWD/$BUILD/fake" LD_PRELOAD="$PRELOAD" \
    CUDA_DEVICE_MEMORY_SHARED_CACHE="$dir/vgpu.cache" CUDA_DEVICE_MEMORY_LIMIT=64m \
    FAKE_NVML_CONFIG=/nonexistent "${envs[@]}" \
    timeout 150 "${PROG:-$CASES}" "$name" > "$dir/out" 2> "$dir/err" || ok=0
  for re in "${want[@]}"; do grep -Eq "$re" "$dir/err" || { ok=0; echo "  missing on stderr: $re"; }; done
  for re in "${unwanted[@]}"; do grep -Eq "$re" "$dir/err" && { ok=0; echo "  unexpected on stderr: $re"; }; done
  if [ $ok = 1 ]; then
    pass=$((pass + 1)); echo "ok   $label"
  else
    fail=$((fail + 1)); echo "FAIL $label"; sed 's/^/  | /' "$dir/err" | tail -15
  fi
}

NV=$(nvml_config)
run limit --stderr 'HAMI-core Error\(.*\)\]: libvgpu: Device 0 OOM: requested 40MB but only 32MB available'
run double_free
run pitch_managed
run vmm
run arrays
run pools
# Pools growing in 32 MiB steps like the real driver's (test/preload/pools.c).
POOLS=$PWD/$BUILD/preload/pools
G32=FAKE_CUDA_POOL_GRANULE=33554432
PROG=$POOLS run pool_overshoot $G32 CUDA_DEVICE_MEMORY_LIMIT=48m --stderr 'OOM: requested 32MB but only 16MB available'
PROG=$POOLS run pool_undo $G32 CUDA_DEVICE_MEMORY_LIMIT=48m --stderr 'OOM: requested 32MB but only 16MB available'
PROG=$POOLS run pool_exact $G32 CUDA_DEVICE_MEMORY_LIMIT=1g --no-stderr 'OOM|beyond the limit'
PROG=$POOLS run pool_threads $G32 CUDA_DEVICE_MEMORY_LIMIT=80m LIBCUDA_LOG_LEVEL=0
PROG=$POOLS run pool_processes $G32 CUDA_DEVICE_MEMORY_LIMIT=100m LIBCUDA_LOG_LEVEL=0
# Every other way to hold device memory (test/preload/memkinds.c), the fake modelling each lifetime.
MEMK=$PWD/$BUILD/preload/memkinds
PROG=$MEMK run vmm_mapped --stderr 'OOM: requested 16MB but only 8MB available'
PROG=$MEMK run vmm_retain
PROG=$MEMK run vmm_share
PROG=$MEMK run vmm_threads LIBCUDA_LOG_LEVEL=0
PROG=$MEMK run graph_mem FAKE_CUDA_GRAPH_GRANULE=33554432 --stderr 'OOM: requested 96MB'
PROG=$MEMK run graph_capture FAKE_CUDA_GRAPH_GRANULE=33554432
PROG=$MEMK run ctx_limits
PROG=$MEMK run ctx_destroy_many
PROG=$MEMK run untracked FAKE_NVML_CONFIG="$TMP/untracked.nvml.conf"
# Routes around the limits (issue 35; test/preload/routes.c, libvgpu/README.md "Routes around the limits").
ROUTES=$PWD/$BUILD/preload/routes
PROG=$ROUTES run pools_many CUDA_DEVICE_MEMORY_LIMIT=1g LIBCUDA_LOG_LEVEL=0
PROG=$ROUTES run async_no_ctx --stderr 'OOM: requested 128MB'
PROG=$ROUTES run launch_no_ctx CUDA_DEVICE_SM_LIMIT=30 FAKE_CUDA_KERNEL_US=1000
PROG=$ROUTES run launch_other_ctx CUDA_DEVICE_SM_LIMIT=30 FAKE_CUDA_KERNEL_US=1000
PROG=$ROUTES run launch_legacy CUDA_DEVICE_SM_LIMIT=30 FAKE_CUDA_KERNEL_US=1000
PROG=$ROUTES run memset CUDA_DEVICE_SM_LIMIT=30 FAKE_CUDA_KERNEL_US=1000
PROG=$ROUTES run copies_ungated CUDA_DEVICE_SM_LIMIT=30 FAKE_CUDA_KERNEL_US=1000
PROG=$ROUTES run graph_v1 FAKE_CUDA_GRAPH_GRANULE=2097152
PROG=$ROUTES run dlvsym
PROG=$ROUTES run ipc_export
PROG=$ROUTES run dmabuf_vmm
PROG=$ROUTES run dmabuf_interior
PROG=$ROUTES run granularity FAKE_CUDA_ALLOC_GRANULE=2097152
cp "$NV" "$TMP/nvml-mod.conf"
PROG=$ROUTES run module_refuse FAKE_CUDA_MODULE_BYTES=41943040 FAKE_CUDA_CONTEXT_BYTES=8388608 \
  FAKE_NVML_CONFIG="$TMP/nvml-mod.conf" --stderr 'module load .* over the limit'
PROG=$ROUTES run lmem --stderr 'OOM: requested 33MB'
PROG=$ROUTES run opencl_refused --stderr 'OpenCL refused on a GPU with a memory or SM limit'
PROG=$ROUTES run opencl_refused CUDA_DEVICE_MEMORY_LIMIT=0 CUDA_DEVICE_SM_LIMIT=40
PROG=$ROUTES run opencl_unlimited CUDA_DEVICE_MEMORY_LIMIT=0 --no-stderr 'OpenCL refused'
# More routes (test/preload/routes_mem.c): the reconciliation refuses while the container is over.
ROUTES_MEM=$PWD/$BUILD/preload/routes_mem
for c in reconcile_refuses reconcile_many_procs reconcile_64_procs reconcile_65_procs reconcile_hostpid child_no_preload; do
  cp "$NV" "$TMP/$c.nvml.conf"
  PROG=$ROUTES_MEM run $c FAKE_NVML_CONFIG="$TMP/$c.nvml.conf" --stderr 'OOM: requested 1MB'
done
PROG=$ROUTES_MEM run arrays_pages FAKE_CUDA_ARRAY_PAGE=131072 --stderr 'OOM: requested 0MB'
PROG=$ROUTES_MEM run arrays_no_deferred FAKE_CUDA_ARRAY_PAGE=131072 FAKE_CUDA_ARRAY_NO_DEFERRED=1 --stderr 'OOM: requested 2MB'
cp "$NV" "$TMP/arrays_nvml.conf"
PROG=$ROUTES_MEM run arrays_nvml FAKE_CUDA_ARRAY_PAGE=196608 FAKE_CUDA_ARRAY_REQ_SHORT=1 FAKE_CUDA_CONTEXT_BYTES=8388608 \
  FAKE_NVML_CONFIG="$TMP/arrays_nvml.conf" --stderr 'an array of 4096 bytes charged takes the container over its limit'
PROG=$ROUTES_MEM run managed_pool FAKE_CUDA_POOL_GRANULE=2097152 --stderr 'OOM: requested 128MB'
run contexts LIBVGPU_CONTEXT_SIZE=8m
# LIBVGPU_CONTEXT_SIZE is a minimum: it cannot hide what NVML measures for a context.
cp "$NV" "$TMP/nvml-ctx.conf"
run context_floor LIBVGPU_CONTEXT_SIZE=1 FAKE_CUDA_CONTEXT_BYTES=41943040 FAKE_NVML_CONFIG="$TMP/nvml-ctx.conf"
cp "$NV" "$TMP/nvml-ctx0.conf"
run context_floor LIBVGPU_CONTEXT_SIZE=0 FAKE_CUDA_CONTEXT_BYTES=41943040 FAKE_NVML_CONFIG="$TMP/nvml-ctx0.conf"
PROG=$SYMBOLS run dlsym
PROG=$SYMBOLS run getproc
PROG=$SYMBOLS run getproc_fallback FAKE_CUDA_TRAMPOLINES=1
PROG=$PROCS run threads LIBCUDA_LOG_LEVEL=0
PROG=$PROCS run processes LIBCUDA_LOG_LEVEL=0
PROG=$PROCS run fork LIBVGPU_CONTEXT_SIZE=8m
PROG=$PROCS run sigkill LIBCUDA_LOG_LEVEL=0 SIGKILL_ITERATIONS=${SIGKILL_ITERATIONS:-300}
PROG=$PROCS run dead_memory
run launch
run launch CUDA_DEVICE_SM_LIMIT=50
# The SM limit throttles through the hooks: the fake's kernels take 1 ms on a serial engine, and
# the limited rate is compared with the solo unlimited rate measured in the same run.
THROTTLE=$PWD/$BUILD/preload/sm_throttle
PROG=$THROTTLE run throttle CUDA_DEVICE_SM_LIMIT=30 FAKE_CUDA_KERNEL_US=1000 --stderr 'sm_throttle: .* limit 30%'
# Context switches are charged, not forgiven, at what they cost on this "card" (issue 30): two
# contexts take turns with 150 us kernels on fake GPUs whose switches cost 50, 150, 400 and
# 1000 us; the library is not told, it measures. Kernels plus switches stay at the limit.
for sw in 50 150 400 1000; do
  PROG=$THROTTLE run switch CUDA_DEVICE_SM_LIMIT=30 FAKE_CUDA_KERNEL_US=150 FAKE_CUDA_SWITCH_US=$sw --stderr "sm_throttle: switch: $sw us switches, limit 30%"
done
# Route 17 (issue 35): a fifth context (the limiter's table holds four) runs 10 ms kernels after
# four others took the slots with 100 us ones: charged what it holds, not an estimate.
PROG=$THROTTLE run contexts CUDA_DEVICE_SM_LIMIT=30 FAKE_CUDA_KERNEL_US=100 --stderr "sm_throttle: fifth context.* limit 30%"
# Route 20 (issue 35): a kernel running for seconds is charged while it runs (from 2 s on), and the
# launches behind it wait.
PROG=$THROTTLE run persistent CUDA_DEVICE_SM_LIMIT=50 FAKE_CUDA_KERNEL_US=100 --stderr "sm_throttle: persistent: limit 50%"
# Many busy streams in one process (issue 35), more than the fake GPU's 8 hardware queues: the
# limiter's timing events must not hold kernels in the fake's queues (fakeCudaQueueHeld); every
# stream progresses and the limit holds, with no device time uncharged, and the limiter adds few
# driver calls per launch (each costs 1.5 us of host time here, as on a GPU). The throughput share
# of solo is printed, not asserted: it depends on the host (test/preload/sm_throttle.c).
for n in 1 8 33 128; do
  for l in 90 25; do
    PROG=$THROTTLE run streams CUDA_DEVICE_SM_LIMIT=$l FAKE_CUDA_KERNEL_US=1000 FAKE_CUDA_CALL_NS=1500 STREAMS=$n \
      ${SANITIZE:+STREAMS_BOUNDS_ONLY=1} --stderr "sm_throttle: streams: $n streams, limit $l%"
  done
done
# The bench's host-bound shape (gpu/limiter_bench.cu --shape streams: two in flight per stream,
# refilled at once, 200 us kernels, 1.5 us per driver call): the limit holds and every stream
# progresses. Its throughput against the unlimited phase is printed, not asserted (host-bound on a
# shared runner it swings 2x between phases); test/unit/limiter_streams_test asserts it in virtual time.
PROG=$PWD/$BUILD/preload/streams_bench run streams_bench CUDA_DEVICE_SM_LIMIT=90 STREAMS=33 \
  FAKE_CUDA_KERNEL_US=200 FAKE_CUDA_CALL_NS=1500 STREAMS_BENCH_S=1 --stderr "streams_bench: 33 streams, limit 90%"
run no_gpu_use
run cvd_reorder FAKE_CUDA_DEVICES=2 CUDA_VISIBLE_DEVICES=1,0 CUDA_DEVICE_MEMORY_LIMIT_0=100m CUDA_DEVICE_MEMORY_LIMIT_1=50m
run cvd_uuid FAKE_CUDA_DEVICES=2 FAKE_NVML_CONFIG="$NV" CUDA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000001 CUDA_DEVICE_MEMORY_LIMIT_0=10m CUDA_DEVICE_MEMORY_LIMIT_1=50m
run nvml FAKE_CUDA_DEVICES=2 FAKE_NVML_CONFIG="$NV" CUDA_DEVICE_MEMORY_LIMIT_0=64m CUDA_DEVICE_MEMORY_LIMIT=
run nvml_only FAKE_NVML_CONFIG="$NV"
run unlimited CUDA_DEVICE_MEMORY_LIMIT=0
# Numbers as HAMi-core reads them: octal and hex give the same 64 MiB limit there and here.
run limit CUDA_DEVICE_MEMORY_LIMIT=0100m --stderr 'CUDA_DEVICE_MEMORY_LIMIT="0100m" is read as 67108864 \(octal/hex'
run limit CUDA_DEVICE_MEMORY_LIMIT=0x4000000
# A per-device 0 means "the global value" (HAMi-core), not "unlimited".
run limit CUDA_DEVICE_MEMORY_LIMIT_0=0
# What cannot be parsed never lifts the limit: the most restrictive valid limit, else refuse all.
run limit CUDA_DEVICE_MEMORY_LIMIT_0=1mb CUDA_DEVICE_MEMORY_LIMIT_1=2g FAKE_CUDA_DEVICES=2 \
  --stderr 'invalid CUDA_DEVICE_MEMORY_LIMIT_0="1mb": trailing characters.*does NOT lift the limit'
run failsafe CUDA_DEVICE_MEMORY_LIMIT=1mb --stderr 'invalid CUDA_DEVICE_MEMORY_LIMIT="1mb".*every allocation is refused'
run failsafe CUDA_DEVICE_MEMORY_LIMIT=99999999999999999999 --stderr 'too large'
run failsafe CUDA_DEVICE_MEMORY_LIMIT=08 --stderr 'not a number'
run failsafe CUDA_DEVICE_MEMORY_LIMIT=-1 --stderr 'not a number'
run oom_log LIBCUDA_LOG_LEVEL=0 --stderr 'Device 0 OOM: requested 32MB but only 16MB available \(requested 33554432 bytes, available 16777216 bytes'
run oom_log LIBCUDA_LOG_LEVEL=4 --stderr 'HAMI-core Info.*Initialized' --stderr 'HAMI-core Debug'
run oom_log --no-stderr 'HAMI-core (Info|Debug)'
run disabled CUDA_DISABLE_CONTROL=true
# A tenant's later process cannot raise the container's limit with its own environment: the first
# process created the region with 64 MiB; the second asks for 1 GiB, a per-device 0, no control,
# no context charge and no SM policy, and still gets its OOM at 64 MiB.
if [ -z "$FILTER" ] || [[ tenant_env == *$FILTER* ]]; then
  shared=$TMP/tenant-env; mkdir -p "$shared"
  run limit CUDA_DEVICE_MEMORY_SHARED_CACHE="$shared/vgpu.cache"
  run oom_log CUDA_DEVICE_MEMORY_SHARED_CACHE="$shared/vgpu.cache" CUDA_DEVICE_MEMORY_LIMIT=1g \
    CUDA_DEVICE_MEMORY_LIMIT_0=0 CUDA_DISABLE_CONTROL=true LIBVGPU_CONTEXT_SIZE=0 \
    GPU_CORE_UTILIZATION_POLICY=disable LIBCUDA_LOG_LEVEL=0 \
    --stderr 'Device 0 OOM: requested 32MB but only 16MB available'
fi
run runtime_limit
run ctor VGPU_CTOR_ALLOC=1
PROG=$PROCS run slot_lost --stderr 'was freed by another process while this one \(pid [0-9]+\) lived; registering again, its usage published again'
PROG=$SYMBOLS run nvml_v2_getproc_v1 FAKE_NVML_CONFIG="$NV"

# A pre-existing file of another layout (HAMi-core's 2026-03 "v1.1-broken") is left untouched.
if [ -z "$FILTER" ] || [[ version_mismatch == *$FILTER* ]]; then
  d=$TMP/vm; mkdir -p "$d"
  # magic 19920718 (0x012FF74E), version 1.1, then zeros up to the broken layout's size
  printf '\x4e\xf7\x2f\x01\x01\x00\x00\x00\x01\x00\x00\x00' > "$d/vgpu.cache"
  truncate -s 2008985 "$d/vgpu.cache"
  before=$(sha256sum < "$d/vgpu.cache")
  if env -i PATH="$PATH" ASAN_OPTIONS="$ASAN_OPTIONS" LD_LIBRARY_PATH="$PWD/$BUILD/fake" LD_PRELOAD="$PRELOAD" \
      CUDA_DEVICE_MEMORY_SHARED_CACHE="$d/vgpu.cache" CUDA_DEVICE_MEMORY_LIMIT=64m \
      "$CASES" oom_log 2> "$d/err" && [ "$before" = "$(sha256sum < "$d/vgpu.cache")" ] \
      && grep -q 'region version mismatch: .*v1.1-broken' "$d/err" && [ -s "$d/vgpu-libvgpu-v1.2.cache" ]; then
    pass=$((pass + 1)); echo "ok   version_mismatch"
  else
    fail=$((fail + 1)); echo "FAIL version_mismatch"; sed 's/^/  | /' "$d/err" | tail -5
  fi
fi

# Processes that never touch the GPU: no file, no thread, same output.
if [ -z "$FILTER" ]; then
  d=$TMP/plain; mkdir -p "$d"
  out=$(env -i PATH="$PATH" ASAN_OPTIONS="$ASAN_OPTIONS" LD_PRELOAD="$PRELOAD" \
    CUDA_DEVICE_MEMORY_SHARED_CACHE="$d/vgpu.cache" sh -c 'echo hello' 2>&1)
  if [ "$out" = hello ] && [ ! -e "$d/vgpu.cache" ]; then
    pass=$((pass + 1)); echo "ok   non_gpu_process"
  else
    fail=$((fail + 1)); echo "FAIL non_gpu_process: $out"
  fi
fi

echo "preload: $pass passed, $fail failed"
[ $fail = 0 ]

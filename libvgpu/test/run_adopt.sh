#!/usr/bin/env bash
# Limits survive a stripped environment (README): the real libvgpu.so, preloaded into
# test/preload/stripped.c (fake libcuda) started with `env -i` and no limit variable, in a private
# mount namespace where a tmpfs is mounted on /usr/local (so /usr/local/vgpu, HAMi's hook directory
# and the library's VGPU_HOOK_DIR, holds what each case puts there) and on /tmp (the default cache
# path). A "container" is a first process started the HAMi way (CUDA_DEVICE_MEMORY_LIMIT=64m,
# CUDA_DEVICE_MEMORY_SHARED_CACHE=/usr/local/vgpu/<uuid>.cache) holding 8 MiB.
# Needs unshare(1) and mount(8) (root, or an unprivileged user namespace).
# Usage: BUILD=build test/run_adopt.sh   (VGPU_LIB=<path>: another libvgpu.so)
# Last line: "stripped-env: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
if [ -z "${VGPU_ADOPT_INNER:-}" ]; then
  if [ "$(id -u)" = 0 ]; then ns=(unshare -m); else ns=(unshare -rm); fi
  if ! "${ns[@]}" true 2> /dev/null; then
    echo "FAIL cannot create a mount namespace (${ns[*]})"
    echo "stripped-env: 0 passed, 1 failed"
    exit 1
  fi
  exec "${ns[@]}" env VGPU_ADOPT_INNER=1 "$0" "$@"
fi
LIB=${VGPU_LIB:-$PWD/$BUILD/libvgpu.so}
PROG=$PWD/$BUILD/preload/stripped
FAKE=$PWD/$BUILD/fake
. test/lib.sh
preload_env "$LIB" # PRELOAD: LIB, after the sanitizer runtimes in the sanitizer build
mount --make-rprivate / && mount -t tmpfs tmpfs /usr/local && mount -t tmpfs tmpfs /tmp || {
  echo "FAIL cannot mount tmpfs on /usr/local and /tmp in the namespace"
  echo "stripped-env: 0 passed, 1 failed"
  exit 1
}
if [ ! -r "$LIB" ] || [ ! -x "$PROG" ]; then # /tmp and /usr/local are fresh here
  echo "FAIL $LIB or $PROG not reachable inside the namespace (not under /tmp or /usr/local)"
  echo "stripped-env: 0 passed, 1 failed"
  exit 1
fi
HOOK=/usr/local/vgpu
REGION=$HOOK/6f1c2a9e-3b7d-4e2a-9c5f-1d2e3f4a5b6c.cache
pass=0 fail=0 holder_pid=

# A process of the container with HAMi's environment, holding 8 MiB until stop_holder.
start_holder() {
  mkfifo /tmp/holder.in
  env -i PATH="$PATH" ASAN_OPTIONS="$ASAN_OPTIONS" LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$PRELOAD" \
    CUDA_DEVICE_MEMORY_LIMIT=64m CUDA_DEVICE_SM_LIMIT=30 CUDA_DEVICE_MEMORY_SHARED_CACHE="$REGION" \
    "$PROG" holder 8 < /tmp/holder.in > /tmp/holder.out 2> /tmp/holder.err &
  holder_pid=$!
  exec 9> /tmp/holder.in
  for _ in $(seq 200); do grep -q ready /tmp/holder.out 2> /dev/null && return; sleep 0.05; done
  echo "  holder did not start: $(cat /tmp/holder.err)"
}
stop_holder() {
  exec 9>&-
  wait "$holder_pid"
  rm -f /tmp/holder.in
}
reset_hook() { rm -rf "$HOOK" && mkdir -p "$HOOK"; }

# stripped NAME [VAR=VALUE...] [--stderr REGEX] -- TOKEN...: the program, stripped environment.
stripped() {
  local name=$1 envs=() want=() ok=1
  shift
  while [ "$1" != -- ]; do
    case $1 in --stderr) want+=("$2"); shift 2 ;; *) envs+=("$1"); shift ;; esac
  done
  shift
  env -i PATH="$PATH" ASAN_OPTIONS="$ASAN_OPTIONS" LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$PRELOAD" \
    "${envs[@]}" timeout 60 "$PROG" allocs "$@" > /tmp/out 2> /tmp/err || ok=0
  for re in "${want[@]}"; do grep -Eq "$re" /tmp/err || { ok=0; echo "  missing on stderr: $re"; }; done
  if [ $ok = 1 ]; then
    pass=$((pass + 1)); echo "ok   $name"
  else
    fail=$((fail + 1)); echo "FAIL $name"; sed 's/^/  | /' /tmp/err | tail -8
  fi
}

# The container's region holds 64 MiB, 8 of them used: a stripped process gets the other 56, is
# counted in that region, and sees 64 MiB as the device's total.
reset_hook
start_holder
stripped adopts_region -- 32:ok 32:oom 24:ok 1:oom total=64 "used=$REGION:64"
# A tenant pointing the cache elsewhere, without limit variables, still gets the container's region.
stripped adopts_despite_cache_var CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/mine.cache \
  --stderr 'CUDA_DEVICE_MEMORY_SHARED_CACHE="/tmp/mine.cache" without any limit variable: ignored' \
  -- 32:ok 32:oom "used=$REGION:40"
# With the environment's limit variables present, the environment's contract as before (the
# region wins where the process attaches to it).
stripped env_contract CUDA_DEVICE_MEMORY_LIMIT=1g CUDA_DEVICE_MEMORY_SHARED_CACHE="$REGION" \
  -- 56:ok 1:oom
# A second region a tenant put beside it (one without limits): which one is the container's cannot
# be told, so nothing is adopted and nothing is unlimited: every allocation is refused.
cp /dev/null /tmp/unused
env -i PATH="$PATH" LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$PRELOAD" CUDA_DEVICE_MEMORY_LIMIT=0 \
  CUDA_DEVICE_MEMORY_SHARED_CACHE="$HOOK/zz-unlimited.cache" "$PROG" allocs 1:ok > /dev/null 2>&1
stripped two_regions_failsafe --stderr 'cannot be used \(2 region files' -- 1:oom
stop_holder

# The region's path is a symbolic link (to an unlimited region elsewhere): not followed.
reset_hook
env -i PATH="$PATH" LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$PRELOAD" CUDA_DEVICE_MEMORY_LIMIT=0 \
  CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/elsewhere.cache "$PROG" allocs 1:ok > /dev/null 2>&1
ln -s /tmp/elsewhere.cache "$REGION"
stripped symlink_failsafe --stderr 'it is a symbolic link' -- 1:oom
# A FIFO there: never blocks, never unlimited.
reset_hook
mkfifo "$REGION"
stripped fifo_failsafe --stderr 'not a regular file' -- 1:oom
# A file that is not a region (the library would otherwise initialize it with its own limits).
reset_hook
head -c 4096 /dev/urandom > "$REGION"
stripped garbage_failsafe --stderr 'not a region' -- 1:oom
# A directory flooded with entries: the listing is bounded.
reset_hook
for i in $(seq 600); do : > "$HOOK/side$i"; done
stripped flood_failsafe --stderr 'more than 512 entries' -- 1:oom

# No region and no limit variables: unlimited, as before (HAMi directory empty, or absent).
reset_hook
stripped no_region_unlimited -- 1024:ok 1024:ok
rm -rf "$HOOK"
stripped no_hook_dir_unlimited -- 1024:ok 1024:ok

echo "stripped-env: $pass passed, $fail failed"
[ "$fail" = 0 ]

#!/usr/bin/env bash
# degraded_probe.sh — degraded mode on a real GPU: with the cache directory unusable, the memory
# limit still holds. For each case `mem_driver oom 64` allocates 64 MiB chunks until
# CUDA_ERROR_OUT_OF_MEMORY under CUDA_DEVICE_MEMORY_LIMIT; NVML's per-process usage is the
# physical truth. Cases: shared region (baseline), directory missing, symlink at the path, FIFO at
# the path, full tmpfs (root: private mount namespace), and without libvgpu (what unlimited means).
# Usage, on the GPU machine from the repository root: libvgpu/gpu/degraded_probe.sh [LIMIT_MIB]
# OLD_LIB=<path to another libvgpu.so> adds a dir-missing row for that library (before/after).
set -uo pipefail
cd "$(dirname "$0")/.."
LIMIT_MIB=${1:-1024}
OUT=$(mktemp -d /tmp/libvgpu-degraded.XXXXXX)
LIB=$PWD/build/libvgpu.so
make -s lib >&2 || { echo "make lib failed" >&2; exit 100; }
make -s -C gpu OUT="$OUT" mem_driver >&2 || exit 101
GPU=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i 0 2>/dev/null | head -1)
echo "GPU: $GPU; limit $LIMIT_MIB MiB; 64 MiB chunks"
printf '%-22s %-10s %-12s %-12s %s\n' case allocated nvml_self context "error line"
field() { sed -nE "s/.*(^| )$1=([^ ]*).*/\2/p" <<< "$2" | head -1; }
probe() { # name cache-path [wrapper...]
  local name=$1 cache=$2
  shift 2
  local l
  l=$("$@" env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT="${LIMIT_MIB}m" \
      CUDA_DEVICE_MEMORY_SHARED_CACHE="$cache" LIBCUDA_LOG_LEVEL=0 \
      timeout 120 "$OUT/mem_driver" oom 64 2> "$OUT/$name.err" | grep RESULT)
  local cause
  cause=$(grep -o 'unusable ([a-z-]*' "$OUT/$name.err" | head -1 | sed 's/unusable (//')
  printf '%-22s %-10s %-12s %-12s %s\n' "$name" "$(( $(field allocated "$l") >> 20 )) MiB" \
    "$(( $(field nvml_self "$l") >> 20 )) MiB" "$(( $(field ctx_nvml "$l") >> 20 )) MiB" "${cause:-none}"
}
mkdir -p "$OUT/shared" "$OUT/link" "$OUT/fifo" "$OUT/disk"
probe shared "$OUT/shared/vgpu.cache"
probe dir-missing "$OUT/absent/vgpu.cache"
ln -s "$OUT/link/elsewhere.cache" "$OUT/link/vgpu.cache"
probe symlink "$OUT/link/vgpu.cache"
check_link=$([ -e "$OUT/link/elsewhere.cache" ] && echo "FOLLOWED" || echo "not followed")
mkfifo "$OUT/fifo/vgpu.cache"
probe fifo "$OUT/fifo/vgpu.cache"
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
  export -f probe field
  export LIB LIMIT_MIB OUT
  unshare -m bash -c 'mount --make-rprivate / ; mount -t tmpfs -o size=4m tmpfs "$OUT/disk" &&
    dd if=/dev/zero of="$OUT/disk/filler" bs=4096 2>/dev/null; probe full-disk "$OUT/disk/vgpu.cache"'
else
  echo "full-disk: not run (needs root for a private mount namespace)"
fi
if [ -n "${OLD_LIB:-}" ]; then LIB=$OLD_LIB probe old-lib:dir-missing "$OUT/absent2/vgpu.cache"; fi
echo "symlink target: $check_link"
l=$(timeout 120 "$OUT/mem_driver" oom 1024 | grep RESULT) # no libvgpu: the whole GPU
printf '%-22s %-10s %-12s\n' no-libvgpu "$(( $(field allocated "$l") >> 20 )) MiB" "$(( $(field nvml_self "$l") >> 20 )) MiB"

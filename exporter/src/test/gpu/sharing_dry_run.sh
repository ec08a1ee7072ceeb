#!/usr/bin/env bash
# sharing_dry_run.sh — runs sharing_proof.sh end to end on a machine WITHOUT a GPU, to check its
# plumbing: the same duty program linked against the repository's fake libcuda (libvgpu really
# preloaded into the vGPU pod, its region really written), the PID namespaces, the kubepods cgroups
# (a cgroup v2 hierarchy: /sys/fs/cgroup, else a hybrid machine's /sys/fs/cgroup/unified; the
# mirrored-procfs fallback where neither is writable), ProofServe, the probe, the scrapes and the
# analysis. The fake libnvidia-ml plays the driver, scripted once the pods' host pids are known:
# whole 50 %, vgpu 25 % (realtime samples every 200 ms), NVML memory = allocation + 512 MiB.
# Run as root from anywhere, with a JDK 25 (ProofServe is compiled from source here):
#   JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64 exporter/src/test/gpu/sharing_dry_run.sh
# Needs the exporter built (exporter/target/exporter.jar and lib/). Knobs: MEASURE (20), WINDOW (5).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
work="$(mktemp -d /tmp/vgpu-sharing-dry.XXXXXX)"
fakedir="$work/fake"
mkdir -p "$fakedir" "$work/out"
make -s -C "$repo/libvgpu" fakes lib
cp "$repo/libvgpu/build/fake/libnvidia-ml.so.1" "$repo/libvgpu/build/fake/libcuda.so.1" "$fakedir/"
uuid="GPU-d0d0d0d0-0000-4000-8000-000000000000"
conf="$work/fake-nvml.conf"
echo "device 0 uuid=$uuid name=Dry_Run total=85899345920 used=0 util=0 memutil=0" >"$conf"
cgroup_root=/sys/fs/cgroup
[ -f "$cgroup_root/cgroup.controllers" ] || [ ! -f /sys/fs/cgroup/unified/cgroup.controllers ] || cgroup_root=/sys/fs/cgroup/unified

export FAKE_NVML_CONFIG="$conf" FAKE_CUDA_UUIDS="$uuid" FAKE_CUDA_KERNEL_US=10000 \
  LD_LIBRARY_PATH="$fakedir" PROOF_CUDA_LIB="$fakedir" LIBVGPU_SO="${LIBVGPU_SO:-$repo/libvgpu/build/libvgpu.so}" \
  CGROUP_ROOT="${CGROUP_ROOT:-$cgroup_root}" OUT="$work/out" MEASURE="${MEASURE:-20}" \
  WINDOW="${WINDOW:-5}" PORT="${PORT:-19397}"
"$here/sharing_proof.sh" &
proof=$!

# Script the fake driver once the pods' host pids are known: samples every 200 ms from now until
# well after the run, returned only once their time has come (realtime=1), as the driver does.
for _ in $(seq 600); do
  [ -f "$work/out/containers.txt" ] && [ "$(wc -l <"$work/out/containers.txt")" -ge 2 ] && break
  sleep 0.1
done
now=$(date +%s%6N)
now=$((now / 200000 * 200000))
{
  echo "option realtime=1"
  echo "device 0 uuid=$uuid name=Dry_Run total=85899345920 used=6442450944 util=75 memutil=5 period=200000"
  while read -r name _ pid _ _ busy alloc; do
    echo "process 0 pid=$pid used=$((alloc + (512 << 20)))"
    for ((t = now - 2000000; t <= now + 200000000; t += 200000)); do
      echo "sample 0 pid=$pid sm=$busy mem=1 ts=$t"
    done
  done <"$work/out/containers.txt"
} >"$conf.tmp"
mv "$conf.tmp" "$conf"
set +e
wait "$proof"
status=$?
set -e
echo "dry run: sharing_proof.sh exited $status; output in $work/out"
exit "$status"

#!/usr/bin/env bash
# dry_run.sh — runs attribution_proof.sh end to end on a machine WITHOUT a GPU, to check its
# plumbing (pid namespaces, cgroup/procfs placement, exporter start, probe, scrapes, analysis):
# the workloads are CPU stand-ins (cpu_workload.c) and the repository's fake libnvidia-ml plays the
# driver, scripted with the stand-ins' host pids once they are known (busy 60 %, medium 40 %, idle
# 0; NVML memory = allocation + 512 MiB of "context"). Needs the fake built (make -C libvgpu) or
# builds it; JAVA_HOME as for the proof.
#   JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64 exporter/src/test/gpu/dry_run.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
work="$(mktemp -d /tmp/vgpu-proof-dry.XXXXXX)"
fakedir="$work/fake"
mkdir -p "$fakedir" "$work/out"
# The fake NVML (libvgpu's Makefile) and the CPU stand-in (this directory's).
make -s -C "$repo/libvgpu" fakes
cp "$repo/libvgpu/build/fake/libnvidia-ml.so.1" "$fakedir/"
make -s -C "$here" W="$work" cpu-workload
uuid="GPU-dry00000-0000-0000-0000-000000000000"
conf="$work/fake-nvml.conf"
echo "device 0 uuid=$uuid name=Dry_Run total=85899345920 used=0 util=0 memutil=0" >"$conf"

export FAKE_NVML_CONFIG="$conf" FAKE_GPU_UUID="$uuid" LD_LIBRARY_PATH="$fakedir" \
  PROOF_WORKLOAD_BIN="$work/cpu_workload" OUT="$work/out" WINDOW="${WINDOW:-4}" \
  SCRAPES="${SCRAPES:-2}" GAP="${GAP:-2}" PORT="${PORT:-19395}"
"$here/attribution_proof.sh" &
proof=$!

# Script the fake driver once the stand-ins' host pids are known: samples every 200 ms from now
# until well after the run, as the driver would keep producing them.
for _ in $(seq 300); do
  [ -f "$work/out/containers.txt" ] && [ "$(wc -l <"$work/out/containers.txt")" -ge 3 ] && break
  sleep 0.1
done
now=$(date +%s%6N)
{
  echo "device 0 uuid=$uuid name=Dry_Run total=85899345920 used=8589934592 util=100 memutil=5"
  while read -r name _ pid alloc; do
    echo "process 0 pid=$pid used=$((alloc + (512 << 20)))"
    case "$name" in busy) sm=60 ;; medium) sm=40 ;; *) sm=0 ;; esac
    if [ "$sm" -gt 0 ]; then
      for ((t = now - 2000000; t <= now + 120000000; t += 200000)); do
        echo "sample 0 pid=$pid sm=$sm mem=1 ts=$t"
      done
    fi
  done <"$work/out/containers.txt"
} >"$conf.tmp"
mv "$conf.tmp" "$conf"
set +e
wait "$proof"
status=$?
set -e
echo "dry run: attribution_proof.sh exited $status; output in $work/out"
exit "$status"

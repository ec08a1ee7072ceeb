#!/usr/bin/env bash
# usage_proof.sh — proves the exporter's usage accounting on a real GPU (docs/usage-accounting.md).
#
# Three "pods" (busy: back-to-back 4096 x 4096 matrix products, SM-saturating; medium: pulsed,
# 20 ms kernel / 30 ms sleep; idle: context and memory only), each in its own pid namespace and kubepods cgroup, as in
# attribution_proof.sh. The exporter runs on the host against real NVML; nvml_probe reads NVML
# independently every 50 ms (each per-process sample once, through its own cursor, and the GPU's
# total energy counter). Scrapes every 10 s over a MEASURE-second window; analyze_usage.py checks:
#   - per pod, increase(vgpu_container_sm_busy_seconds_total) over the window within 2 % of the
#     probe's integral of NVML samples over the same window (0.5 s absolute for the idle pod);
#   - the exporter's device energy increase within 1 % of the GPU's own counter delta, and the pods'
#     plus the unattributed energy within 1 % of it too;
#   - conservation at every scrape: containers + unattributed + expired == device (float rounding).
#
# Run on the GPU machine from the repository root, as root, with a Java 25 runtime:
#   JAVA_HOME=/path/to/java25 exporter/src/test/gpu/usage_proof.sh
# Knobs (env): MEASURE (s, default 120), PORT (19395), GPU (0). Results in $OUT (or a temp dir):
# results.txt, scrape-*.prom, probe.log, exporter.log, workload-*.log. Exit 0 = every check passed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
MEASURE="${MEASURE:-120}"
WINDOW=5
PORT="${PORT:-19395}"
GPU="${GPU:-0}"
work="$(mktemp -d /tmp/vgpu-usage-proof.XXXXXX)"
out="${OUT:-$work/out}"
mkdir -p "$out"
log() { echo "[proof $(date +%T)] $*" | tee -a "$out/results.txt" >&2; }

[ "$(id -u)" = 0 ] || { echo "run as root (cgroups, unshare)" >&2; exit 2; }
. "$repo/scripts/lib.sh"
need_jdk25 # JAVA_HOME, or the machine's Temurin 25
[ -f "${VGPU_EXPORTER_JAR:-$repo/exporter/target/exporter.jar}" ] || { echo "exporter/target/exporter.jar missing: build the exporter first" >&2; exit 2; }
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"

pids_to_kill=()
children=()
cleanup() {
  # workloads first (SIGTERM: they unregister their slot like HAMi-core's exit handler)
  for p in "${children[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids_to_kill[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids_to_kill[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for d in "${cgroups[@]:-}"; do
    [ -n "$d" ] || continue
    rmdir "$d" "$(dirname "$d")" 2>/dev/null || true
  done
  rmdir /sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice /sys/fs/cgroup/kubepods.slice 2>/dev/null || true
}
cgroups=()
trap cleanup EXIT

log "building workload and nvml_probe in $work"
# The programs: this directory's Makefile.
if [ -n "${PROOF_WORKLOAD_BIN:-}" ]; then
  cp "$PROOF_WORKLOAD_BIN" "$work/workload" # dry_run.sh: a CPU stand-in, no CUDA
  make -s -C "$here" W="$work" nvml-probe
else
  make -s -C "$here" W="$work" nvml-probe workload
fi

total=$((MEASURE + 100)) # an upper bound: the probe and workloads outlast a slow exporter start
"$work/nvml_probe" "$out/probe.log" "$total" 50 2>"$out/probe.err" &
pids_to_kill+=($!)

# name  mode    MiB
specs=("busy matmul 1024" "medium medium 2048" "idle idle 3072")
: >"$out/containers.txt"
declare -A hostpid
n=0
for spec in "${specs[@]}"; do
  read -r name mode mib <<<"$spec"
  n=$((n + 1))
  uid="$(printf '%08d-0000-4000-8000-%012d' "$n" "$n")"
  dir="$work/containers/${uid}_${name}"
  mkdir -p "$dir"
  CUDA_VISIBLE_DEVICES="$GPU" unshare --pid --fork --mount-proc --kill-child \
    "$work/workload" "$mode" "$dir/$(cat /proc/sys/kernel/random/uuid).cache" "$mib" "$total" \
    >"$out/workload-$name.log" 2>&1 &
  upid=$!
  pids_to_kill+=("$upid")
  child=""
  for _ in $(seq 100); do
    child="$(pgrep -P "$upid" | head -1 || true)"
    [ -n "$child" ] && grep -q "^workload" "$out/workload-$name.log" 2>/dev/null && break
    sleep 0.1
  done
  [ -n "$child" ] || { log "workload $name did not start"; cat "$out/workload-$name.log" >&2; exit 1; }
  hostpid[$name]="$child"
  children+=("$child")
  echo "$name $uid $child $((mib << 20))" >>"$out/containers.txt"
  log "workload $name: host pid $child (pid 1 in its namespace), pod $uid"
done

# Place each workload in a kubepods cgroup (systemd driver naming) so /proc/<pid>/cgroup names its
# pod, as kubelet would. If this host forbids it, mirror the three processes into a procfs tree
# with those cgroup files instead (the resolver then reads that tree).
procfs=/proc
cgroup_ok=0
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then # cgroup v2 only: real cgroups, never plain dirs
  cgroup_ok=1
  while read -r name uid pid _; do
    cid="$(printf '%s' "$name" | sha256sum | cut -c1-64)"
    d="/sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${uid//-/_}.slice/cri-containerd-$cid.scope"
    if mkdir -p "$d" 2>/dev/null; then
      cgroups+=("$d")
      echo "$pid" >"$d/cgroup.procs" 2>/dev/null || true
    fi
    grep -q "pod${uid//-/_}" "/proc/$pid/cgroup" || cgroup_ok=0
  done <"$out/containers.txt"
fi
if [ "$cgroup_ok" = 0 ]; then
  procfs="$work/procfs"
  log "cannot move processes into kubepods cgroups here: using a mirrored procfs at $procfs"
  while read -r name uid pid _; do
    cid="$(printf '%s' "$name" | sha256sum | cut -c1-64)"
    mkdir -p "$procfs/$pid"
    cp "/proc/$pid/stat" "/proc/$pid/status" "$procfs/$pid/"
    echo "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${uid//-/_}.slice/cri-containerd-$cid.scope" >"$procfs/$pid/cgroup"
  done <"$out/containers.txt"
else
  log "workloads placed in kubepods cgroups; exporter reads the real /proc"
fi

log "starting the exporter (NVML window ${WINDOW}s) on 127.0.0.1:$PORT"
JAVA_HOME="$JAVA_HOME" "$repo/bin/vgpu-exporter" serve \
  --path.cache-root="$work/containers" --path.procfs="$procfs" --kubernetes=false \
  --node-name=gpu-proof --nvml.library=libnvidia-ml.so.1 --nvml.window="${WINDOW}s" \
  --web.listen-address=127.0.0.1 --web.listen-port="$PORT" >"$out/exporter.log" 2>&1 &
pids_to_kill+=($!)

fetch() {
  python3 - "$1" <<'PY'
import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())
PY
}
await_http "http://127.0.0.1:$PORT/metrics" 30 "" 0.5 || log "the exporter did not answer /metrics within 30 s"
fetch "http://127.0.0.1:$PORT/readyz" >"$out/readyz.txt" 2>&1 || true
log "exporter up; warming up 12 s"
sleep 12

: >"$out/scrapes.txt"
start="$(date +%s%6N)"
steps=$((MEASURE / 10))
for i in $(seq 0 "$steps"); do
  target=$((start + i * 10000000))
  now="$(date +%s%6N)"
  [ "$target" -gt "$now" ] && sleep "$(python3 -c "print(($target - $now) / 1e6)")"
  t="$(date +%s%6N)"
  fetch "http://127.0.0.1:$PORT/metrics" >"$out/scrape-$i.prom"
  echo "$i $t" >>"$out/scrapes.txt"
done
fetch "http://127.0.0.1:$PORT/api/v1/containers" >"$out/containers.json" 2>/dev/null || true
if command -v nvidia-smi >/dev/null; then
  nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv >>"$out/nvidia-smi.txt" 2>&1 || true
fi

log "analysing"
set +e
python3 "$here/analyze_usage.py" "$out" | tee -a "$out/results.txt"
status=${PIPESTATUS[0]}
set -e
log "results in $out (exit $status)"
exit "$status"

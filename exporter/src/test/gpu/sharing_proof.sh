#!/usr/bin/env bash
# sharing_proof.sh — issue 28's GPU proof: a whole-GPU pod and a vGPU pod share one GPU, and the
# exporter's per-container numbers match NVML read independently.
#
# Two "pods" on the same GPU, each a CUDA program with a known duty cycle (duty.c: every 50 ms one
# kernel spinning BUSY % of the period on every SM, timed by the GPU's own clock), each in its own
# PID namespace (unshare --pid --fork --mount-proc) and its own kubepods cgroup v2 path
# (kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice/cri-containerd-<id>.scope):
#   whole  no preload, no region: the exporter finds its process by its cgroup (sharing="whole");
#   vgpu   libvgpu preloaded (CUDA_DEVICE_MEMORY_LIMIT, its region under the exporter's cache root
#          <podUID>_vgpu/vgpu.cache): a region container (sharing="vgpu").
# Where cgroup v2 is not writable (no cgroup.controllers under CGROUP_ROOT, or the move fails) the
# processes are mirrored into a procfs tree whose cgroup files name those paths, and the exporter
# reads that tree instead of /proc (said in results.txt); everything else is unchanged.
# The exporter runs against real NVML with the pods' metadata from a file (ProofServe.java: the
# GPU machine has no API server; no kubelet either, so the cgroup alone attributes the whole pod).
# nvml_probe reads NVML independently every 50 ms (each per-process sample once, through its own
# cursor; the running processes and their memory). After a warm-up the exporter is scraped every
# WINDOW s for MEASURE s; analyze_sharing.py prints per container the SM mean of the exporter and
# of the probe over the same span and the memory of both, and FAILS unless every SM mean is within
# 2 pp and every memory figure is exact (bytes).
#
# Run on the GPU machine as root, from the repository root or anywhere:
#   JAVA_HOME=/path/to/java25 PROOF_CLASSES=/dir/with/ProofServe.class exporter/src/test/gpu/sharing_proof.sh
# (sharing_bundle.sh prepares all of it: a jlink'ed Java 25, the exporter's jars, ProofServe.class.)
# Needs: gcc, libcuda.so.1 and libnvidia-ml.so.1 (the driver), python3; libvgpu is built from
# libvgpu/ (make lib) unless LIBVGPU_SO names one. The dry run (sharing_dry_run.sh) runs this same
# script on a machine without a GPU against the repository's fake libcuda and libnvidia-ml.
# Knobs (env): MEASURE (s, 60), WINDOW (s, 10), WHOLE_BUSY (%, 50), VGPU_BUSY (%, 25), PORT (19396),
# GPU (0), CGROUP_ROOT (/sys/fs/cgroup), PROOF_CUDA_LIB (directory with the libcuda.so.1 to link
# duty against; default: the linker's path). Results in $OUT (or a temp dir): results.txt,
# scrape-*.prom, probe.log, exporter.log, pod-*.log, nvidia-smi.txt. Exit 0 = every check passed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
MEASURE="${MEASURE:-60}"
WINDOW="${WINDOW:-10}"
WHOLE_BUSY="${WHOLE_BUSY:-50}"
VGPU_BUSY="${VGPU_BUSY:-25}"
PORT="${PORT:-19396}"
GPU="${GPU:-0}"
CGROUP_ROOT="${CGROUP_ROOT:-/sys/fs/cgroup}"
work="$(mktemp -d /tmp/vgpu-sharing-proof.XXXXXX)"
out="${OUT:-$work/out}"
mkdir -p "$out"
log() { echo "[sharing $(date +%T)] $*" | tee -a "$out/results.txt" >&2; }

[ "$(id -u)" = 0 ] || { echo "run as root (cgroups, unshare)" >&2; exit 2; }
. "$repo/scripts/lib.sh"
need_jdk25
jar="${VGPU_EXPORTER_JAR:-$repo/exporter/target/exporter.jar}"
[ -f "$jar" ] || { echo "$jar missing: build the exporter first" >&2; exit 2; }
classes="${PROOF_CLASSES:-}"
if [ -z "$classes" ]; then # compile ProofServe here (needs a JDK, not a jlink'ed runtime)
  classes="$work/proof"
  mkdir -p "$classes"
  "$JAVA_HOME/bin/javac" -d "$classes" -cp "$jar:$(dirname "$jar")/lib/*" "$here/ProofServe.java"
fi
[ -f "$classes/ProofServe.class" ] || { echo "no ProofServe.class in $classes" >&2; exit 2; }

pids_to_kill=()
children=()
cgroups=()
cleanup() {
  for p in "${children[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids_to_kill[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids_to_kill[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  for d in "${cgroups[@]:-}"; do # the scope, then its pod slice; the shared parents if now empty
    [ -n "$d" ] || continue
    rmdir "$d" "$(dirname "$d")" 2>/dev/null || true
  done
  rmdir "$CGROUP_ROOT/kubepods.slice/kubepods-besteffort.slice" "$CGROUP_ROOT/kubepods.slice" 2>/dev/null || true
}
trap cleanup EXIT

lib="${LIBVGPU_SO:-$repo/libvgpu/build/libvgpu.so}"
if [ ! -f "$lib" ]; then
  log "building libvgpu (make -C libvgpu lib)"
  make -s -C "$repo/libvgpu" lib >"$out/libvgpu-build.log" 2>&1 || { tail -20 "$out/libvgpu-build.log" >&2; exit 2; }
fi
log "building duty and nvml_probe in $work"
cuda_lib="${PROOF_CUDA_LIB:-}"
if [ -z "$cuda_lib" ]; then # the driver's libcuda.so.1, wherever this distribution keeps it
  cuda_lib="$(ldconfig -p | awk '/libcuda\.so\.1 .*x86-64/ {print $NF; exit}')"
  cuda_lib="${cuda_lib:+$(dirname "$cuda_lib")}"
fi
make -s -C "$here" W="$work" CUDA_LIB="$cuda_lib" nvml-probe duty

total=$((3 * WINDOW + 25 + MEASURE + 60)) # outlasts warm-up, a slow exporter start and the scrapes
"$work/nvml_probe" "$out/probe.log" "$total" 50 2>"$out/probe.err" &
pids_to_kill+=($!)

# name container busy% alloc-MiB preload
specs=("whole torch $WHOLE_BUSY 2048 no" "vgpu vgpu $VGPU_BUSY 1024 yes")
: >"$out/containers.txt"
: >"$work/pods.txt"
n=0
for spec in "${specs[@]}"; do
  read -r name ctr busy mib preload <<<"$spec"
  n=$((n + 1))
  uid="$(printf '%08d-0000-4000-8000-%012d' "$n" "$n")"
  cid="$(printf '%s' "$name/$ctr" | sha256sum | cut -c1-64)"
  env=(env -u LD_PRELOAD CUDA_VISIBLE_DEVICES="$GPU")
  if [ "$preload" = yes ]; then
    dir="$work/containers/${uid}_${ctr}"
    mkdir -p "$dir"
    env+=(LD_PRELOAD="$lib" CUDA_DEVICE_MEMORY_LIMIT=8g CUDA_DEVICE_MEMORY_SHARED_CACHE="$dir/vgpu.cache")
  fi
  # unshare's child (pid 1 of the new namespace) execs env, which execs duty: one host pid.
  unshare --pid --fork --mount-proc --kill-child "${env[@]}" "$work/duty" "$busy" "$mib" "$total" \
    >"$out/pod-$name.log" 2>&1 &
  upid=$!
  pids_to_kill+=("$upid")
  child=""
  for _ in $(seq 300); do
    child="$(pgrep -P "$upid" | head -1 || true)"
    [ -n "$child" ] && grep -q "^duty pid" "$out/pod-$name.log" 2>/dev/null && break
    sleep 0.1
  done
  grep -q "^duty pid" "$out/pod-$name.log" 2>/dev/null || { log "pod $name did not start"; cat "$out/pod-$name.log" >&2; exit 1; }
  children+=("$child")
  echo "$name $uid $child $ctr $cid $busy $((mib << 20))" >>"$out/containers.txt"
  echo "$uid proof $name-0 $ctr $cid" >>"$work/pods.txt"
  log "pod $name: host pid $child ($(awk '{print "pid " $3 " in its namespace"}' <<<"$(grep '^duty pid' "$out/pod-$name.log")")), uid $uid, busy $busy %, $mib MiB, preload $preload"
done

# Each pod's process into its kubepods cgroup (systemd driver naming), as the kubelet would.
scope() { echo "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${1//-/_}.slice/cri-containerd-$2.scope"; }
procfs=/proc
cgroup_ok=0
if [ -f "$CGROUP_ROOT/cgroup.controllers" ]; then # cgroup v2 only: real cgroups, never plain dirs
  cgroup_ok=1
  while read -r name uid pid _ cid _; do
    d="$CGROUP_ROOT/$(scope "$uid" "$cid")"
    if mkdir -p "$d" 2>/dev/null; then
      cgroups+=("$d")
      echo "$pid" >"$d/cgroup.procs" 2>/dev/null || true
    fi
    grep -q "pod${uid//-/_}.slice/cri-containerd-$cid.scope" "/proc/$pid/cgroup" || cgroup_ok=0
  done <"$out/containers.txt"
fi
if [ "$cgroup_ok" = 0 ]; then
  procfs="$work/procfs"
  log "FALLBACK: no writable cgroup v2 at $CGROUP_ROOT: a mirrored procfs at $procfs names the kubepods paths"
  while read -r name uid pid _ cid _; do
    mkdir -p "$procfs/$pid"
    cp "/proc/$pid/stat" "/proc/$pid/status" "/proc/$pid/maps" "$procfs/$pid/"
    echo "0::/$(scope "$uid" "$cid")" >"$procfs/$pid/cgroup"
  done <"$out/containers.txt"
else
  log "pods placed in kubepods cgroups under $CGROUP_ROOT; the exporter reads the real /proc"
fi

log "starting the exporter (real NVML, window ${WINDOW}s) on 127.0.0.1:$PORT"
"$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED -Xmx128m \
  -cp "$jar:$(dirname "$jar")/lib/*:$classes" ProofServe "$work/pods.txt" \
  --path.cache-root="$work/containers" --path.procfs="$procfs" --kubernetes=false \
  --node-name=gpu-proof --nvml.library=libnvidia-ml.so.1 --nvml.window="${WINDOW}s" \
  --nvml.sample-interval=500ms --attribution.feedback=false \
  --web.listen-address=127.0.0.1 --web.listen-port="$PORT" >"$out/exporter.log" 2>&1 &
exporter=$!
pids_to_kill+=("$exporter")

fetch() {
  python3 - "$1" <<'PY'
import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())
PY
}
await_http "http://127.0.0.1:$PORT/metrics" 60 "$exporter" 0.5 || { log "the exporter did not answer"; tail -30 "$out/exporter.log" >&2; exit 1; }
log "exporter up; warming up $((2 * WINDOW + 5)) s so every window holds steady samples only"
sleep $((2 * WINDOW + 5))

: >"$out/scrapes.txt"
start="$(date +%s%6N)"
for i in $(seq 0 $((MEASURE / WINDOW))); do
  target=$((start + i * WINDOW * 1000000))
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
for c in "${children[@]}"; do kill "$c" 2>/dev/null || true; done # duty prints its measured busy share
sleep 1
for f in "$out"/pod-*.log; do log "$(basename "$f" .log): $(grep '^measured busy' "$f" || echo 'no measured busy line')"; done

log "analysing"
set +e
python3 "$here/analyze_sharing.py" "$out" | tee -a "$out/results.txt"
status=${PIPESTATUS[0]}
set -e
log "results in $out (exit $status)"
exit "$status"

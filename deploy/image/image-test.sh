#!/usr/bin/env bash
# `make image-test`: proves the container image here, offline. Installs docker.io (and
# docker-registry, for the README's push road through a loopback registry) if missing,
# starts a private dockerd by hand (own socket and data root, no bridge, no iptables), builds the
# base and the image with --network none, runs the exporter image on a fixture cache root with
# host networking exactly as the chart's read-only mode runs it (non-root, read-only root
# filesystem, no capabilities, read-only cache mount), scrapes /metrics and lints it with promtool,
# runs the README's kubectl-exec recipes (doctor, inspect, shrreg-tool --inspect, cleanup) through
# `docker exec` in that container and cleanup/unlock --apply in a write-mode one, runs the
# installer entrypoint against a scratch "host" directory, and reports image size and the
# exporter's idle RSS. A few minutes on a fresh machine (docker.io install, debootstrap), seconds once
# the base is built; `make test` runs it last.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
. "$repo/scripts/lib.sh" # await_http
work="$repo/deploy/image/target/image-test"
sock=/run/vgpu-docker.sock
image="${IMAGE:-vgpu-exporter:0.1.0}"
name="vgpu-image-test-$$"
wname="vgpu-image-test-rw-$$"
port="${PORT:-19494}"
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
finish() {
  echo "image-test: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}

if ! command -v dockerd >/dev/null 2>&1 && [ ! -x /usr/sbin/dockerd ]; then
  [ "$(id -u)" -eq 0 ] || { echo "image-test: docker.io missing and not root" >&2; exit 1; }
  echo "image-test: installing docker.io"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io >/dev/null
fi
dockerd_bin="$(command -v dockerd || echo /usr/sbin/dockerd)"
docker=(/usr/bin/docker -H "unix://$sock")

started_dockerd=""
if ! "${docker[@]}" info >/dev/null 2>&1; then
  mkdir -p /var/lib/vgpu-docker /run/vgpu-docker
  "$dockerd_bin" --host "unix://$sock" --data-root /var/lib/vgpu-docker --exec-root /run/vgpu-docker \
    --pidfile /run/vgpu-docker.pid --bridge none --iptables=false --ip6tables=false --ip-masq=false \
    >/var/log/vgpu-dockerd.log 2>&1 &
  started_dockerd=$!
  for _ in $(seq 60); do "${docker[@]}" info >/dev/null 2>&1 && break; sleep 1; done
fi
cleanup() {
  "${docker[@]}" rm -f "$name" "$wname" >/dev/null 2>&1
  [ -n "${demo_pid:-}" ] && kill "$demo_pid" 2>/dev/null
  [ -n "${registry_pid:-}" ] && kill "$registry_pid" 2>/dev/null
  if [ -n "$started_dockerd" ]; then
    kill "$started_dockerd" 2>/dev/null
    wait "$started_dockerd" 2>/dev/null
  fi
}
trap cleanup EXIT
"${docker[@]}" info >/dev/null 2>&1 && ok "dockerd up ($("${docker[@]}" version -f '{{.Server.Version}}'), storage $("${docker[@]}" info -f '{{.Driver}}'))" \
  || { bad "dockerd did not start: see /var/log/vgpu-dockerd.log"; finish; }

# The README's road, as written: `make image` builds into "your" docker (here the private daemon,
# through DOCKER_HOST, which the docker CLI reads), `docker tag` names it for a registry, and
# without a registry `docker save | gzip` / `gunzip -c | docker load` carries it to a node.
if DOCKER_HOST="unix://$sock" IMAGE="$image" make -s -C "$repo" image; then
  ok "make image built $image into the docker at DOCKER_HOST (--network none)"
else
  bad "make image"; finish
fi
size="$("${docker[@]}" image inspect -f '{{.Size}}' "$image" | awk '{printf "%.1f MB", $1/1e6}')"
road=registry.example.com/gpu/vgpu-exporter:0.1.0
mkdir -p "$work"
if "${docker[@]}" tag "$image" "$road" && "${docker[@]}" save "$road" | gzip >"$work/../vgpu-exporter.tar.gz" \
   && "${docker[@]}" rmi "$road" >/dev/null && ! "${docker[@]}" image inspect "$road" >/dev/null 2>&1 \
   && gunzip -c "$work/../vgpu-exporter.tar.gz" | "${docker[@]}" load >/dev/null \
   && [ "$("${docker[@]}" image inspect -f '{{.Id}}' "$road")" = "$("${docker[@]}" image inspect -f '{{.Id}}' "$image")" ]; then
  ok "README road: docker tag, docker save | gzip, gunzip -c | docker load gives back the same image"
else
  bad "README road: tag / save / load"
fi
"${docker[@]}" rmi "$road" >/dev/null 2>&1
rm -f "$work/../vgpu-exporter.tar.gz"

# The README's push road for real: a registry (Debian's docker-registry, the reference
# distribution registry) on loopback, which docker trusts without TLS; `docker tag` + `docker push`,
# every local name of the image removed but the original, then `docker pull` gives back the image
# with the same id.
if ! command -v docker-registry >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry >/dev/null 2>&1
fi
if command -v docker-registry >/dev/null 2>&1; then
  reg="$work/registry"
  rm -rf "$reg" && mkdir -p "$reg/data"
  regport=$((port + 1))
  printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
    "$reg/data" "$regport" >"$reg/config.yml"
  docker-registry serve "$reg/config.yml" >"$reg/log" 2>&1 &
  registry_pid=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$regport/v2/" >/dev/null && break; sleep 0.2; done
  pushed=127.0.0.1:$regport/gpu/vgpu-exporter:0.1.0
  want="$("${docker[@]}" image inspect -f '{{.Id}}' "$image")"
  if "${docker[@]}" tag "$image" "$pushed" && "${docker[@]}" push "$pushed" >"$reg/push.log" 2>&1 \
     && "${docker[@]}" rmi "$pushed" >/dev/null && ! "${docker[@]}" image inspect "$pushed" >/dev/null 2>&1 \
     && "${docker[@]}" pull "$pushed" >"$reg/pull.log" 2>&1 \
     && [ "$("${docker[@]}" image inspect -f '{{.Id}}' "$pushed")" = "$want" ] \
     && curl -sf "http://127.0.0.1:$regport/v2/gpu/vgpu-exporter/tags/list" | grep -q '"0.1.0"'; then
    ok "README road: docker tag, docker push to a registry (it lists the tag), docker pull gives back the same image"
  else
    bad "README road: tag / push / pull through a registry on 127.0.0.1:$regport (logs in $reg)"
    tail -5 "$reg/push.log" "$reg/pull.log" "$reg/log" 2>/dev/null
  fi
  "${docker[@]}" rmi "$pushed" >/dev/null 2>&1
  kill "$registry_pid" 2>/dev/null
  wait "$registry_pid" 2>/dev/null
else
  bad "docker-registry missing (apt-get install docker-registry): the push road cannot be run"
fi

# A fixture node: the demo's cache files (real v1.2 regions written for real processes), copied.
rm -rf "$work"
mkdir -p "$work/live" "$work/fixture" "$work/host-vgpu" "$work/fixture-rw"
"$repo/bin/vgpu-exporter" demo --port "$((port + 1))" --duration 30s --path.cache-root="$work/live" \
  >"$work/demo.log" 2>&1 &
demo_pid=$!
# The demo prints its banner once every container (and its cache file) exists.
for _ in $(seq 90); do grep -q '^vgpu-exporter demo: ' "$work/demo.log" 2>/dev/null && break; sleep 1; done
sleep 3
cp -r "$work/live/." "$work/fixture/"
kill "$demo_pid" 2>/dev/null
wait "$demo_pid" 2>/dev/null
demo_pid=""
dirs="$(find "$work/fixture" -mindepth 1 -maxdepth 1 -type d -name '*_*' | wc -l)"
chmod -R a+rX "$work/fixture"
cp -a "$work/fixture/." "$work/fixture-rw/"
[ "$dirs" -gt 0 ] && ok "fixture cache root with $dirs container directories" || { bad "no fixture cache files (see $work/demo.log)"; finish; }

# The exporter as the chart's read-only mode runs it.
"${docker[@]}" rm -f "$name" >/dev/null 2>&1
"${docker[@]}" run -d --name "$name" --network host --pid host --read-only --tmpfs /tmp:size=16m \
  --user 65534:65534 --cap-drop ALL --security-opt no-new-privileges \
  -v "$work/fixture:/usr/local/vgpu/containers:ro" "$image" \
  serve --web.listen-port="$port" --kubernetes=false --nvml=false --attribution.feedback=false \
  --node-name=image-test >/dev/null || { bad "docker run"; finish; }
if await_http "http://127.0.0.1:$port/readyz" 30 "" 0.5; then
  ok "/readyz 200 from the container"
else
  bad "/readyz never 200 (last $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz"))"
  "${docker[@]}" logs "$name" 2>&1 | tail -20
  finish
fi
curl -s "http://127.0.0.1:$port/healthz" -o /dev/null -w '%{http_code}' | grep -q 200 && ok "/healthz 200" || bad "/healthz"
curl -s "http://127.0.0.1:$port/metrics" >"$work/metrics.txt"
# One vgpu_container_region_info series per container directory with a readable region.
ctrs="$(grep -c '^vgpu_container_region_info{' "$work/metrics.txt")"
[ "$ctrs" -eq "$dirs" ] && ok "/metrics exports all $dirs fixture containers" || bad "/metrics has $ctrs containers, fixture has $dirs"
grep -q '^vgpu_container_memory_used_bytes{.*node="image-test"' "$work/metrics.txt" && ok "per-container memory labelled with the node" || bad "no vgpu_container_memory_used_bytes for node image-test"
promtool check metrics <"$work/metrics.txt" >"$work/promtool.txt" 2>&1 && ok "promtool check metrics" || { bad "promtool check metrics"; head "$work/promtool.txt"; }
pid="$("${docker[@]}" inspect -f '{{.State.Pid}}' "$name")"
uid="$(awk '/^Uid:/{print $2}' "/proc/$pid/status")"
[ "$uid" = 65534 ] && ok "runs as uid 65534" || bad "runs as uid $uid"
sleep 5
rss="$(awk '/^VmRSS:/{printf "%.0f MiB", $2/1024}' "/proc/$pid/status")"

# README "Operate: kubectl exec recipes", through `docker exec` into the running container: the
# same user, read-only root filesystem, mounts, PATH and environment a `kubectl exec` into the
# chart's read-only pod gets. Commands exactly as documented.
ex=("${docker[@]}" exec "$name")
recipes_start=$SECONDS
"${ex[@]}" vgpu-exporter version >"$work/version.txt" 2>&1; rc=$?
[ "$rc" -eq 0 ] && [ -s "$work/version.txt" ] && ok "kubectl-exec recipe: vgpu-exporter is on PATH (version exits 0)" \
  || { bad "vgpu-exporter version: exit $rc"; head -5 "$work/version.txt"; }
# The launcher passes the JVM flags itself: java has no JDK_JAVA_OPTIONS to announce.
! grep -q 'Picked up' "$work/version.txt" && ok "exec'd commands print no 'Picked up JDK_JAVA_OPTIONS'" \
  || bad "exec'd command output starts with: $(head -1 "$work/version.txt")"
"${ex[@]}" vgpu-exporter doctor >"$work/doctor.txt" 2>&1; rc=$?
# 0/1/2 are verdicts (ok, warnings, failures); 3 "could not run", 126/127 no launcher or no runtime.
if [ "$rc" -le 2 ] && grep -q '^verdict: ' "$work/doctor.txt"; then
  ok "kubectl-exec recipe: doctor ran read-only as uid 65534 and gave a verdict (exit $rc)"
else
  bad "doctor: exit $rc"; tail -20 "$work/doctor.txt"
fi
"${ex[@]}" vgpu-exporter inspect >"$work/inspect.txt" 2>&1; rc=$?
seen=0
for d in "$work"/fixture/*_*/; do grep -qF "$(basename "$d")" "$work/inspect.txt" && seen=$((seen + 1)); done
[ "$rc" -eq 0 ] && [ "$seen" -eq "$dirs" ] && ok "kubectl-exec recipe: inspect reads all $dirs containers (exit 0)" \
  || { bad "inspect: exit $rc, names $seen of $dirs containers"; tail -20 "$work/inspect.txt"; }
file="$(cd "$work/fixture" && find . -name '*.cache' | sort | head -1)"
file="/usr/local/vgpu/containers/${file#./}"
"${ex[@]}" shrreg-tool --inspect --host --file "$file" >"$work/shrreg-inspect.txt" 2>&1; rc=$?
# 0 ok, 1 a problem found (the fixture's processes are gone): the region was read either way.
if [ "$rc" -le 1 ] && grep -qi 'device' "$work/shrreg-inspect.txt"; then
  ok "kubectl-exec recipe: shrreg-tool --inspect reads $file read-only (exit $rc)"
else
  bad "shrreg-tool --inspect --file $file: exit $rc"; head -20 "$work/shrreg-inspect.txt"
fi
# Read-only mode: the cleanup dry run plans, --apply changes nothing (the mount refuses the write).
sum_before="$(find "$work/fixture" -name '*.cache' -exec md5sum {} + | sort)"
"${ex[@]}" vgpu-exporter cleanup >"$work/cleanup-dry.txt" 2>&1; dry_rc=$?
"${ex[@]}" vgpu-exporter cleanup --apply >"$work/cleanup-ro.txt" 2>&1; rc=$?
if [ "$dry_rc" -le 1 ] && [ "$sum_before" = "$(find "$work/fixture" -name '*.cache' -exec md5sum {} + | sort)" ] \
   && { [ "$dry_rc" -eq 0 ] || [ "$rc" -eq 2 ]; }; then
  ok "kubectl-exec recipe: cleanup dry run exits $dry_rc read-only; --apply there changes nothing (exit $rc)"
else
  bad "read-only cleanup: dry run exit $dry_rc, --apply exit $rc, files changed: $([ "$sum_before" = "$(find "$work/fixture" -name '*.cache' -exec md5sum {} + | sort)" ] && echo no || echo yes)"
  tail -5 "$work/cleanup-ro.txt"
fi

# Write mode (HAMi-replacement: uid 0, DAC_OVERRIDE only, cache root read-write): cleanup --apply
# and unlock --apply reach shrreg-tool through PATH and change the regions.
"${docker[@]}" rm -f "$wname" >/dev/null 2>&1
"${docker[@]}" run -d --name "$wname" --network host --pid host --read-only --tmpfs /tmp:size=16m \
  --user 0:0 --cap-drop ALL --cap-add DAC_OVERRIDE --security-opt no-new-privileges \
  -v "$work/fixture-rw:/usr/local/vgpu/containers" "$image" \
  serve --web.listen-port="$((port + 2))" --kubernetes=false --nvml=false --attribution.feedback=true \
  --node-name=image-test >/dev/null || bad "docker run (write mode)"
wx=("${docker[@]}" exec "$wname")
sum_before="$(find "$work/fixture-rw" -name '*.cache' -exec md5sum {} + | sort)"
"${wx[@]}" vgpu-exporter cleanup >"$work/cleanup-rw-dry.txt" 2>&1; dry_rc=$?
"${wx[@]}" vgpu-exporter cleanup --apply >"$work/cleanup-rw.txt" 2>&1; rc=$?
"${wx[@]}" vgpu-exporter cleanup >"$work/cleanup-rw-after.txt" 2>&1
# Each planned change (file and --pids PID:HOSTPID guard) must be gone from a fresh dry run.
planned="$(grep -o -- '--file [^ ]* .*--pids [^ ]*' "$work/cleanup-rw-dry.txt" | sed 's/--expect-inode [^ ]* //')"
pending="$(grep -o -- '--file [^ ]* .*--pids [^ ]*' "$work/cleanup-rw-after.txt" | sed 's/--expect-inode [^ ]* //')"
left="$(awk 'NR == FNR {want[$0] = 1; next} $0 in want {n++} END {print n + 0}' <(printf '%s\n' "$planned") <(printf '%s\n' "$pending"))"
if [ "$dry_rc" -eq 1 ] && [ -n "$planned" ] && [ "$rc" -eq 0 ] && [ "$left" -eq 0 ] \
   && [ "$sum_before" != "$(find "$work/fixture-rw" -name '*.cache' -exec md5sum {} + | sort)" ] \
   && ! grep -q 'Cannot run program' "$work/cleanup-rw.txt"; then
  ok "kubectl-exec recipe, write mode: cleanup --apply freed the $(wc -l <<<"$planned") planned region(s)' dead slots through shrreg-tool on PATH"
else
  bad "write-mode cleanup: dry run exit $dry_rc, --apply exit $rc, $left planned change(s) still pending"; tail -8 "$work/cleanup-rw.txt"
fi
"${wx[@]}" vgpu-exporter unlock --apply >"$work/unlock-rw.txt" 2>&1; rc=$?
[ "$rc" -eq 0 ] && ok "kubectl-exec recipe, write mode: unlock --apply exit 0" || { bad "write-mode unlock --apply: exit $rc"; tail -8 "$work/unlock-rw.txt"; }
"${docker[@]}" rm -f "$wname" >/dev/null 2>&1
recipes_seconds=$((SECONDS - recipes_start))
# The exec'd JVMs share the pod's memory limit with serve: report the read-only container's peak
# (cgroup v1 memory controller, where dockerd puts it) for the chart's 256Mi limit.
cid="$("${docker[@]}" inspect -f '{{.Id}}' "$name")"
peak_file="$(find /sys/fs/cgroup/memory -maxdepth 3 -type d -name "$cid" -print -quit 2>/dev/null)/memory.max_usage_in_bytes"
if [ -r "$peak_file" ]; then peak="$(awk '{printf "%.0f MiB", $1/1048576}' "$peak_file")"; else peak="unknown (no cgroup v1 memory controller)"; fi

# The installer entrypoint against a scratch host directory.
if "${docker[@]}" run --rm --network none --read-only --user 0:0 --cap-drop ALL --security-opt no-new-privileges \
     -v "$work/host-vgpu:/usr/local/vgpu" --entrypoint /opt/vgpu/bin/vgpu-install "$image" \
     --to=/usr/local/vgpu --preload /opt/vgpu/lib/libvgpu.so /opt/vgpu/bin/shrreg-tool >"$work/install.log" 2>&1 \
   && cmp -s "$work/host-vgpu/libvgpu.so" "$repo/libvgpu/build/libvgpu.so" \
   && cmp -s "$work/host-vgpu/shrreg-tool" "$repo/libvgpu/build/shrreg-tool" \
   && [ -x "$work/host-vgpu/shrreg-tool" ] \
   && grep -qx /usr/local/vgpu/libvgpu.so "$work/host-vgpu/ld.so.preload"; then
  ok "installer placed libvgpu.so, shrreg-tool and ld.so.preload (no capabilities)"
else
  bad "installer"; cat "$work/install.log"
fi
"$work/host-vgpu/shrreg-tool" --version >/dev/null 2>&1; rc=$?
[ "$rc" -ne 126 ] && [ "$rc" -ne 127 ] && ok "installed shrreg-tool runs on the host (exit $rc)" || bad "installed shrreg-tool does not run (exit $rc)"
# What the image ships keeps the glibc floor (README of libvgpu, "glibc floor"): tenant images as
# old as glibc 2.17 load the installed preload.
if floor="$("$repo/libvgpu/test/check_glibc_floor.sh" "$work/host-vgpu/libvgpu.so" "$work/host-vgpu/shrreg-tool" 2>&1)"; then
  ok "installed libvgpu.so and shrreg-tool need at most GLIBC_2.17"
else
  bad "glibc floor of the installed files:"; grep FAIL <<<"$floor"
fi

echo "image-test: image $image is $size; exporter idle RSS in the container $rss (${dirs} containers); kubectl-exec recipes ${recipes_seconds:-?} s, container memory peak with serve and the exec'd tools ${peak:-?}"
finish

#!/usr/bin/env bash
# `make image-test-arm64`: the linux/arm64 image built here (ARCH=arm64 deploy/image/build.sh) and
# run under emulation. Nothing here has an ARM CPU, so the image's own file system (docker export)
# is run in a user and mount namespace whose private binfmt_misc hands aarch64 programs to
# qemu-aarch64-static (libvgpu/test/arm64/run.sh sets that up), chrooted, as the image's user
# (65534) with the image's environment: its static launcher, its aarch64 Java 25 runtime, JNA's
# aarch64 stub against an aarch64 libnvidia-ml (the fake one, mounted where the NVIDIA container
# toolkit puts the driver's), SafeOpen's openat2 path on the fixture node's cache files.
# Checks: the image is linux/arm64 and every ELF object in it is aarch64; `vgpu-exporter version`;
# `serve` becomes ready and exports every fixture container and the fake GPU; promtool accepts the
# scrape; `doctor` runs; SIGTERM stops it. Several minutes (the JVM is emulated); not part of
# `make test`.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
self="$repo/deploy/image/image-test-arm64.sh"
work="$repo/deploy/image/target/image-test-arm64"
port="${PORT:-19594}"
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
finish() {
  echo "image-test-arm64: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}

if [ "${1:-}" = --inner ]; then
  # In the namespace (root there, the host's uids mapped 1:1, aarch64 programs go to qemu).
  rootfs="$work/rootfs"
  mkdir -p "$rootfs/proc" "$rootfs/dev" "$rootfs/tmp" "$rootfs/usr/local/vgpu/containers"
  mount --rbind /proc "$rootfs/proc" && mount --rbind /dev "$rootfs/dev" \
    && mount -t tmpfs -o size=64m,mode=1777 tmpfs "$rootfs/tmp" \
    && mount --bind "$work/fixture" "$rootfs/usr/local/vgpu/containers" \
    && mount -o remount,bind,ro "$rootfs/usr/local/vgpu/containers" \
    || { bad "namespace mounts"; finish; }
  mapfile -t image_env <"$work/image.env"
  chroot="$(command -v chroot)" # the image's PATH replaces this one below
  in_image() { # CMD... as the image runs it: its user, its environment, its root. Call it in a
    # subshell: it execs, so a background one's $! is the exporter itself (SIGTERM reaches the JVM).
    exec env -i "${image_env[@]}" FAKE_NVML_CONFIG=/etc/fake-nvml.conf \
      "$chroot" --userspec=65534:65534 "$rootfs" "$@"
  }
  start=$SECONDS
  if out="$(in_image /opt/vgpu-exporter/bin/vgpu-exporter version 2>&1)" && grep -qi 'vgpu-exporter' <<<"$out"; then
    ok "vgpu-exporter version under emulation ($((SECONDS - start)) s): $(head -1 <<<"$out")"
  else
    bad "vgpu-exporter version: $out"
  fi
  curl -s -o /dev/null "http://127.0.0.1:$port/healthz" && { bad "port $port already answers: something else runs there"; finish; }
  start=$SECONDS
  (in_image /opt/vgpu-exporter/bin/vgpu-exporter serve --web.listen-port="$port" --kubernetes=false \
    --nvml=true --attribution.feedback=false --node-name=arm64-test) >"$work/serve.log" 2>&1 &
  pid=$!
  code=000
  for _ in $(seq 900); do # an emulated JVM on a loaded 2-core runner: 260 s seen at load 18
    code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")"
    [ "$code" = 200 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
  done
  [ "$code" = 200 ] && ok "serve ready under emulation in $((SECONDS - start)) s" \
    || { bad "serve not ready (readyz $code)"; tail -20 "$work/serve.log"; }
  # The NVML sampler's first poll and the first discovery pass, then a settled scrape.
  for _ in $(seq 60); do
    curl -s "http://127.0.0.1:$port/metrics" >"$work/metrics.txt"
    grep -q '^vgpu_gpu_memory_total_bytes{.*GPU-arm64-fake' "$work/metrics.txt" && break
    sleep 1
  done
  dirs="$(find "$work/fixture" -mindepth 1 -maxdepth 1 -type d -name '*_*' | wc -l)"
  ctrs="$(grep '^vgpu_container_memory_limit_bytes{' "$work/metrics.txt" | sed 's/.*container="\([^"]*\)".*pod_uid="\([^"]*\)".*/\2 \1/' | sort -u | wc -l)"
  [ "$ctrs" -ge "$dirs" ] && [ "$dirs" -gt 0 ] && ok "/metrics exports the $dirs fixture containers (cache files read by SafeOpen on aarch64)" \
    || bad "/metrics has $ctrs containers, the fixture $dirs"
  grep -q '^vgpu_gpu_memory_total_bytes{.*GPU-arm64-fake.* 8.589934592E9$\|^vgpu_gpu_memory_total_bytes{.*GPU-arm64-fake.* 8589934592$' "$work/metrics.txt" \
    && ok "NVML through JNA's aarch64 stub: the fake GPU's memory total is exported" \
    || { bad "no vgpu_gpu_memory_total_bytes for the fake aarch64 NVML's GPU"; grep -i 'nvml' "$work/serve.log" | tail -5; }
  if command -v promtool >/dev/null; then
    [ -s "$work/metrics.txt" ] && promtool check metrics <"$work/metrics.txt" >"$work/promtool.txt" 2>&1 \
      && ok "promtool check metrics ($(grep -c '^[a-z]' "$work/metrics.txt") samples)" \
      || { bad "promtool check metrics"; head "$work/promtool.txt"; }
  else
    bad "promtool missing (make deps)"
  fi
  # As image-test.sh's kubectl-exec recipe: 0 healthy, 1 warnings, 2 findings; a verdict either way.
  (in_image /opt/vgpu-exporter/bin/vgpu-exporter doctor) >"$work/doctor.txt" 2>&1
  rc=$?
  [ "$rc" -le 2 ] && grep -q '^verdict: ' "$work/doctor.txt" && ok "doctor under emulation: $(grep '^verdict: ' "$work/doctor.txt") (exit $rc)" \
    || { bad "doctor exit $rc"; tail -5 "$work/doctor.txt"; }
  kill -TERM "$pid"
  for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    bad "serve did not stop within 60 s of SIGTERM"; kill -KILL "$pid"
  else
    wait "$pid"; rc=$?
    if { [ "$rc" -eq 0 ] || [ "$rc" -eq 143 ]; } && ! curl -s -o /dev/null "http://127.0.0.1:$port/healthz"; then
      ok "serve stopped on SIGTERM (exit $rc, port $port closed)"
    else
      bad "serve exit $rc on SIGTERM, or port $port still answers"
    fi
  fi
  finish
fi

# Outside: the private docker daemon image-test.sh uses, the image, its file system, a fixture node.
sock=/run/vgpu-docker.sock
docker=(/usr/bin/docker -H "unix://$sock")
image="${IMAGE:-vgpu-exporter:0.1.0-arm64}"
[ -x /usr/bin/qemu-aarch64-static ] || { bad "qemu-aarch64-static missing (make deps)"; finish; }
started_dockerd=""
if ! "${docker[@]}" info >/dev/null 2>&1; then
  command -v dockerd >/dev/null 2>&1 || [ -x /usr/sbin/dockerd ] || { bad "docker.io missing (make image-test installs it)"; finish; }
  mkdir -p /var/lib/vgpu-docker /run/vgpu-docker
  "$(command -v dockerd || echo /usr/sbin/dockerd)" --host "unix://$sock" --data-root /var/lib/vgpu-docker \
    --exec-root /run/vgpu-docker --pidfile /run/vgpu-docker.pid --bridge none --iptables=false \
    --ip6tables=false --ip-masq=false >/var/log/vgpu-dockerd.log 2>&1 &
  started_dockerd=$!
  for _ in $(seq 60); do "${docker[@]}" info >/dev/null 2>&1 && break; sleep 1; done
fi
cid=""
cleanup() {
  [ -n "$cid" ] && "${docker[@]}" rm -f "$cid" >/dev/null 2>&1
  [ -n "${demo_pid:-}" ] && kill "$demo_pid" 2>/dev/null
  if [ -n "$started_dockerd" ]; then kill "$started_dockerd" 2>/dev/null; wait "$started_dockerd" 2>/dev/null; fi
}
trap cleanup EXIT

start=$SECONDS
if ARCH=arm64 IMAGE="$image" "$repo/deploy/image/build.sh" "${docker[@]}" >"$work.build.log" 2>&1; then
  ok "ARCH=arm64 build.sh built $image ($((SECONDS - start)) s, $("${docker[@]}" image inspect -f '{{.Size}}' "$image" | awk '{printf "%.1f MB", $1/1e6}'))"
else
  bad "ARCH=arm64 build.sh (see $work.build.log)"; tail -5 "$work.build.log"; finish
fi
platform="$("${docker[@]}" image inspect -f '{{.Os}}/{{.Architecture}}' "$image")"
[ "$platform" = linux/arm64 ] && ok "image platform $platform" || bad "image platform $platform"

rm -rf "$work"
mkdir -p "$work/rootfs" "$work/live" "$work/fixture"
cid="$("${docker[@]}" create --platform linux/arm64 "$image")" && "${docker[@]}" export "$cid" | tar -x -C "$work/rootfs" \
  || { bad "docker create / export"; finish; }
"${docker[@]}" image inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$image" | sed '/^$/d' >"$work/image.env"
mapfile -t elves < <(find "$work/rootfs" -type f -exec file -N {} + | grep -E ': +ELF ' | sed 's/: .*//')
foreign="$(for f in "${elves[@]}"; do file -N "$f" | grep -v 'ARM aarch64'; done)"
[ ${#elves[@]} -gt 0 ] && [ -z "$foreign" ] && ok "every ELF object in the image is aarch64 (${#elves[@]})" \
  || bad "non-aarch64 ELF objects in the image: $(head -3 <<<"$foreign")"
jna="$(find "$work/rootfs/opt/vgpu-exporter/lib" -name 'jna-*.jar' | head -1)"
[ -n "$jna" ] && unzip -l "$jna" | grep -q 'com/sun/jna/linux-aarch64/libjnidispatch.so' \
  && ok "JNA's linux-aarch64 stub is in the image ($(basename "$jna"))" || bad "no linux-aarch64 stub in JNA's jar"

# The driver's library where the NVIDIA container toolkit mounts it: here the aarch64 fake.
fake_nvml="$repo/libvgpu/build-arm64/fake/libnvidia-ml.so.1"
[ -f "$fake_nvml" ] || make -s -C "$repo/libvgpu" ARCH=arm64 all >/dev/null
cp "$fake_nvml" "$work/rootfs/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1"
echo 'device 0 uuid=GPU-arm64-fake name=NVIDIA_GH200_(fake) total=8589934592 used=1073741824 util=12 memutil=3' \
  >"$work/rootfs/etc/fake-nvml.conf"

# A fixture node: the demo's cache files (real v1.2 regions; the layout is the same on aarch64).
"$repo/bin/vgpu-exporter" demo --port "$((port + 1))" --duration 30s --path.cache-root="$work/live" \
  >"$work/demo.log" 2>&1 &
demo_pid=$!
for _ in $(seq 90); do grep -q '^vgpu-exporter demo: ' "$work/demo.log" 2>/dev/null && break; sleep 1; done
sleep 3
cp -r "$work/live/." "$work/fixture/"
kill "$demo_pid" 2>/dev/null
wait "$demo_pid" 2>/dev/null
demo_pid=""
chmod -R a+rX "$work/fixture"
[ "$(find "$work/fixture" -name '*.cache' | wc -l)" -gt 0 ] && ok "fixture cache root" || { bad "no fixture cache files (see $work/demo.log)"; finish; }

# The rest runs in the emulating namespace; its ok/FAIL lines and count are this test's.
ARM64_QEMU=/usr/bin/qemu-aarch64-static "$repo/libvgpu/test/arm64/run.sh" -- "$self" --inner >"$work/inner.log" 2>&1
inner_rc=$?
cat "$work/inner.log"
line="$(grep -E '^image-test-arm64: [0-9]+ passed, [0-9]+ failed$' "$work/inner.log" | tail -1)"
if [ -n "$line" ]; then
  passed=$((passed + $(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")))
  failed=$((failed + $(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"$line")))
  [ "$inner_rc" -ne 0 ] && [ "$(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"$line")" -eq 0 ] && bad "the emulated part exited $inner_rc"
else
  bad "the emulated part printed no summary (exit $inner_rc)"
fi
echo "image-test-arm64: $((SECONDS - start)) s from the build on"

# One name for both architectures: the amd64 image (make image) and this one pushed to a registry on
# loopback under per-arch tags, then a manifest list under the plain tag that the chart names.
amd64_image="${AMD64_IMAGE:-vgpu-exporter:0.1.0}"
if ! "${docker[@]}" image inspect "$amd64_image" >/dev/null 2>&1; then
  IMAGE="$amd64_image" "$repo/deploy/image/build.sh" "${docker[@]}" >"$work/build-amd64.log" 2>&1 \
    || { bad "the amd64 image for the manifest list (see $work/build-amd64.log)"; finish; }
fi
command -v docker-registry >/dev/null || { bad "docker-registry missing (make image-test installs it)"; finish; }
reg="$work/registry"
regport=$((port + 3))
mkdir -p "$reg/data"
printf 'version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
  "$reg/data" "$regport" >"$reg/config.yml"
docker-registry serve "$reg/config.yml" >"$reg/log" 2>&1 &
registry_pid=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$regport/v2/" >/dev/null && break; sleep 0.2; done
name="127.0.0.1:$regport/gpu/vgpu-exporter"
export DOCKER_CONFIG="$work/docker-config" # `docker manifest` keeps its lists there
mkdir -p "$DOCKER_CONFIG"
if "${docker[@]}" tag "$amd64_image" "$name:0.1.0-amd64" && "${docker[@]}" tag "$image" "$name:0.1.0-arm64" \
   && "${docker[@]}" push "$name:0.1.0-amd64" >"$reg/push.log" 2>&1 \
   && "${docker[@]}" push "$name:0.1.0-arm64" >>"$reg/push.log" 2>&1 \
   && "${docker[@]}" manifest create --insecure "$name:0.1.0" "$name:0.1.0-amd64" "$name:0.1.0-arm64" >>"$reg/push.log" 2>&1 \
   && "${docker[@]}" manifest push --insecure "$name:0.1.0" >>"$reg/push.log" 2>&1; then
  platforms="$("${docker[@]}" manifest inspect --insecure "$name:0.1.0" \
    | python3 -c 'import json,sys; print(" ".join(sorted(m["platform"]["os"] + "/" + m["platform"]["architecture"] for m in json.load(sys.stdin)["manifests"])))')"
  [ "$platforms" = "linux/amd64 linux/arm64" ] && ok "manifest list $name:0.1.0 names $platforms" \
    || bad "manifest list names '$platforms'"
else
  bad "push / manifest create / manifest push (see $reg/push.log)"; tail -5 "$reg/push.log"
fi
"${docker[@]}" rmi "$name:0.1.0-amd64" "$name:0.1.0-arm64" >/dev/null 2>&1
kill "$registry_pid" 2>/dev/null
wait "$registry_pid" 2>/dev/null
finish

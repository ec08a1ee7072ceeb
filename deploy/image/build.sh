#!/usr/bin/env bash
# Stages the image context under deploy/image/target/context and builds the image with no network:
#   deploy/image/build.sh DOCKER_CMD...    (e.g. docker -H unix:///run/vgpu-docker.sock)
# Env: IMAGE (default vgpu-exporter:0.1.0), BASE_IMAGE (any glibc image you have, e.g. debian:12-slim;
# unset: vgpu-base:local, rebuilt here from the host's glibc), JAVA_HOME (a JDK 25, for jlink).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
here="$repo/deploy/image"
ctx="$here/target/context"
image="${IMAGE:-vgpu-exporter:0.1.0}"
base="${BASE_IMAGE:-vgpu-base:local}"
docker=("$@")
[ ${#docker[@]} -gt 0 ] || docker=(docker)
. "$repo/scripts/lib.sh"
need_jdk25
jdk=$JAVA_HOME
[ -x "$jdk/bin/jlink" ] || { echo "build: no JDK 25 jlink at $jdk (set JAVA_HOME)" >&2; exit 1; }

# The app, built if missing; libvgpu, shrreg-tool, the launcher and vgpu-install by make.
if [ ! -f "$repo/exporter/target/exporter.jar" ]; then
  (cd "$repo" && ./mvnw -B -ntp -q -pl exporter -am package -DskipTests)
fi
make -s -C "$repo/libvgpu" all >/dev/null

rm -rf "$ctx"
mkdir -p "$ctx/vgpu/lib" "$ctx/vgpu/bin" "$ctx/bin"
cp "$repo/exporter/target/exporter.jar" "$ctx/"
cp -r "$repo/exporter/target/lib" "$ctx/lib"
cp "$repo/libvgpu/build/libvgpu.so" "$ctx/vgpu/lib/libvgpu.so"
cp "$repo/libvgpu/build/shrreg-tool" "$ctx/vgpu/bin/shrreg-tool"
make -s -C "$repo" image-progs # deploy/image/target/bin: vgpu-install, vgpu-exporter-launcher
cp "$here/target/bin/vgpu-install" "$ctx/vgpu/bin/vgpu-install"
cp "$here/target/bin/vgpu-exporter-launcher" "$ctx/bin/vgpu-exporter"
# Modules: what jdeps reports for the app's class path, plus those reached only by reflection or
# service loading (HTTP client of fabric8, JNA/Caffeine's Unsafe, JMX for JVM metrics, DNS).
modules="$("$jdk/bin/jdeps" --ignore-missing-deps --print-module-deps --multi-release 25 \
  --class-path "$ctx/lib/*" "$ctx/exporter.jar" 2>/dev/null | tail -1)"
modules="$modules,java.net.http,jdk.unsupported,jdk.management,java.logging,java.xml,jdk.crypto.ec,jdk.naming.dns"
"$jdk/bin/jlink" --add-modules "$modules" --strip-debug --no-header-files --no-man-pages \
  --compress zip-6 --output "$ctx/jre"
echo "build: jlink runtime $(du -sh "$ctx/jre" | cut -f1) with $modules"

if [ -z "${BASE_IMAGE:-}" ]; then
  BASE_TAG="$base" "$here/build-base.sh" "${docker[@]}"
fi
"${docker[@]}" build --network none --build-arg BASE_IMAGE="$base" -t "$image" -f "$repo/Dockerfile" "$ctx"
echo "build: $image $("${docker[@]}" image inspect -f '{{.Size}}' "$image" | awk '{printf "%.1f MB", $1/1e6}')"

#!/usr/bin/env bash
# Stages the image context under deploy/image/target/context and builds the image with no network:
#   deploy/image/build.sh DOCKER_CMD...    (e.g. docker -H unix:///run/vgpu-docker.sock)
# Env: IMAGE (default vgpu-exporter:0.1.0), BASE_IMAGE (any glibc image you have, e.g. debian:12-slim;
# unset: vgpu-base:local, rebuilt here from the host's glibc), JAVA_HOME (a JDK 25, for jlink).
# ARCH=arm64 builds the linux/arm64 image (default tag vgpu-exporter:0.1.0-arm64, base
# vgpu-base:local-arm64) on this x86 machine: libvgpu and shrreg-tool from the cross build
# (libvgpu/build-arm64), the launcher and vgpu-install by the aarch64 cross compiler, the runtime
# jlink'ed by the host's jlink from Debian's aarch64 Java 25 jmods and the base from Debian's
# aarch64 glibc (both fetched and verified by arm64-runtime.sh). The Dockerfile only copies, so
# nothing runs under emulation.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
here="$repo/deploy/image"
arch="${ARCH:-amd64}"
case "$arch" in
  amd64)
    ctx="$here/target/context" progs_suffix="" vgpu_build="$repo/libvgpu/build" vgpu_make=() jmods=() platform=()
    image="${IMAGE:-vgpu-exporter:0.1.0}" base="${BASE_IMAGE:-vgpu-base:local}" ;;
  arm64)
    ctx="$here/target/context-arm64" progs_suffix=-arm64 vgpu_build="$repo/libvgpu/build-arm64"
    vgpu_make=(ARCH=arm64) jmods=(--module-path "$here/target/arm64/jdk/jmods") platform=(--platform linux/arm64)
    image="${IMAGE:-vgpu-exporter:0.1.0-arm64}" base="${BASE_IMAGE:-vgpu-base:local-arm64}"
    command -v aarch64-linux-gnu-gcc >/dev/null || { echo "build: aarch64-linux-gnu-gcc missing (make deps)" >&2; exit 1; }
    "$here/arm64-runtime.sh" ;;
  *) echo "build: ARCH must be amd64 or arm64, not $arch" >&2; exit 1 ;;
esac
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
make -s -C "$repo/libvgpu" "${vgpu_make[@]}" all >/dev/null

rm -rf "$ctx"
mkdir -p "$ctx/vgpu/lib" "$ctx/vgpu/bin" "$ctx/bin"
cp "$repo/exporter/target/exporter.jar" "$ctx/"
cp -r "$repo/exporter/target/lib" "$ctx/lib"
cp "$vgpu_build/libvgpu.so" "$ctx/vgpu/lib/libvgpu.so"
cp "$vgpu_build/shrreg-tool" "$ctx/vgpu/bin/shrreg-tool"
# deploy/image/target/bin[-arm64]: vgpu-install, vgpu-exporter-launcher
make -s -C "$repo" "image-progs${progs_suffix}"
cp "$here/target/bin${progs_suffix}/vgpu-install" "$ctx/vgpu/bin/vgpu-install"
cp "$here/target/bin${progs_suffix}/vgpu-exporter-launcher" "$ctx/bin/vgpu-exporter"
# Modules: what jdeps reports for the app's class path, plus those reached only by reflection or
# service loading (HTTP client of fabric8, JNA/Caffeine's Unsafe, JMX for JVM metrics, DNS).
modules="$("$jdk/bin/jdeps" --ignore-missing-deps --print-module-deps --multi-release 25 \
  --class-path "$ctx/lib/*" "$ctx/exporter.jar" 2>/dev/null | tail -1)"
modules="$modules,java.net.http,jdk.unsupported,jdk.management,java.logging,java.xml,jdk.crypto.ec,jdk.naming.dns"
"$jdk/bin/jlink" "${jmods[@]}" --add-modules "$modules" --strip-debug --no-header-files --no-man-pages \
  --compress zip-6 --output "$ctx/jre"
# Debian's runtime carries its native debug symbols beside the libraries (libjvm.debuginfo alone is
# 600 MB); the libraries only name them (.gnu_debuglink), nothing loads them.
find "$ctx/jre" -name '*.debuginfo' -delete
if [ "$arch" = arm64 ]; then
  # Debian's java.desktop links the system's X11, font, image and sound libraries, which the base
  # does not carry; a headless server never draws, loads a font, decodes an image or plays a sound
  # (the x86 base leaves the same libraries' dependencies out), so their stubs go.
  rm -f "$ctx"/jre/lib/lib{awt_xawt,jawt,splashscreen,jsound,fontmanager,javajpeg,lcms}.so
fi
echo "build: jlink runtime $(du -sh "$ctx/jre" | cut -f1) with $modules"

if [ -z "${BASE_IMAGE:-}" ]; then
  ARCH="$arch" BASE_TAG="$base" "$here/build-base.sh" "${docker[@]}"
fi
"${docker[@]}" build "${platform[@]}" --network none --build-arg BASE_IMAGE="$base" -t "$image" -f "$repo/Dockerfile" "$ctx"
echo "build: $image $("${docker[@]}" image inspect -f '{{.Size}}' "$image" | awk '{printf "%.1f MB", $1/1e6}')"

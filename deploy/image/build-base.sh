#!/usr/bin/env bash
# Builds the image's base offline: a FROM-scratch root filesystem holding only what the jlink'ed
# JVM, libvgpu.so and shrreg-tool load (the host's glibc pieces, found with ldd), an /etc/passwd
# and /etc/group with root and nobody, and /tmp; then `docker import`s it.
#   deploy/image/build-base.sh DOCKER_CMD... (e.g. docker -H unix:///run/vgpu-docker.sock)
# Needs deploy/image/target/context staged by build.sh (its binaries decide which libraries).
# ARCH=arm64: the same for deploy/image/target/context-arm64, with the libraries taken from the
# aarch64 sysroot arm64-runtime.sh fetched (readelf's NEEDED entries instead of ldd, which cannot
# run aarch64 programs here) and imported as a linux/arm64 image.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/base-etc.sh"
if [ "${ARCH:-amd64}" = arm64 ]; then
  exec "$here/build-base-arm64.sh" "$@"
fi
ctx="$here/target/context"
root="$here/target/base-rootfs"
tag="${BASE_TAG:-vgpu-base:local}"
[ -d "$ctx/jre" ] || { echo "build-base: stage the context first (deploy/image/build.sh)" >&2; exit 1; }
rm -rf "$root"
mkdir -p "$root"/{etc,tmp,lib64,usr/lib/x86_64-linux-gnu,lib/x86_64-linux-gnu}
chmod 1777 "$root/tmp"

# Every ELF object in the staged context, and what the dynamic loader resolves for it.
mapfile -t elves < <(find "$ctx" -type f \( -name '*.so*' -o -perm -u+x \) -exec file -N {} + \
  | grep -E ': +ELF .*(executable|shared object)' | sed 's/: .*//' \
  | grep -vE '/lib(awt_xawt|splashscreen|jsound)\.so$')  # X11/sound: never loaded by a headless server
mapfile -t libs < <(for f in "${elves[@]}"; do ldd "$f" 2>/dev/null || true; done \
  | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u)
for lib in "${libs[@]}" /lib64/ld-linux-x86-64.so.2; do
  real="$(readlink -f "$lib")"
  dest="$root$lib"
  mkdir -p "$(dirname "$dest")"
  cp -L "$real" "$dest"
done
# The JDK's own libraries are found through the runtime's RPATH; drop copies that ldd found there.
rm -rf "$root$ctx"
write_base_etc "$root"
tar -C "$root" -cf "$here/target/base-rootfs.tar" .
"$@" import --message "vgpu-exporter base: glibc from $(. /etc/os-release; echo "$PRETTY_NAME")" \
  "$here/target/base-rootfs.tar" "$tag" >/dev/null
echo "build-base: $tag ($(du -sh "$root" | cut -f1), ${#libs[@]} libraries)"

#!/usr/bin/env bash
# Makes sure an older userland exists for the glibc-floor run: Debian bullseye (glibc 2.31, the
# oldest release the Debian archive still serves) with libc6-dev, so test programs can be linked
# against its glibc (--sysroot) and run inside it (chroot). Built once with debootstrap and reused:
# later calls only check the marker file. Concurrent callers wait on a lock instead of racing.
#   test/oldglibc/rootfs.sh [DIR]        DIR defaults to $VGPU_OLD_ROOTFS or /var/cache/vgpu-bullseye
# Prints the directory on success. Needs root (debootstrap, chroot) and the Debian archive.
set -euo pipefail
root=${1:-${VGPU_OLD_ROOTFS:-/var/cache/vgpu-bullseye}}
marker="$root/.vgpu-rootfs-v3"  # bump when the steps below change
if [ -f "$marker" ]; then echo "$root"; exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "rootfs: building $root needs root (debootstrap)" >&2; exit 1; fi
mkdir -p "$(dirname "$root")"
exec 9> "$root.lock"
flock 9
if [ -f "$marker" ]; then echo "$root"; exit 0; fi
if ! command -v debootstrap > /dev/null; then
  echo "rootfs: installing debootstrap" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap > /dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap > /dev/null; }
fi
tmp="$root.partial"
rm -rf "$tmp" "$root"
start=$(date +%s)
# minbase + libc6-dev: glibc 2.31, its crt files and headers; no compiler (the host's gcc links).
# --foreign only downloads and unpacks; the packages are then extracted as they are, without
# running their maintainer scripts in the root (the slow second stage, which nothing here needs:
# the root only runs bash, coreutils and the test programs).
if ! debootstrap --foreign --variant=minbase --include=libc6-dev bullseye "$tmp" > "$root.log" 2>&1; then
  echo "rootfs: debootstrap bullseye failed; last lines of $root.log:" >&2
  tail -5 "$root.log" >&2
  exit 1
fi
for deb in "$tmp"/var/cache/apt/archives/*.deb; do
  dpkg-deb -x "$deb" "$tmp" || { echo "rootfs: cannot extract $deb" >&2; exit 1; }
done
rm -rf "$tmp/var/cache/apt/archives"/*.deb
# Absolute library symlinks (ld-linux, lib*.so) point into the host when the root is used as a
# --sysroot from outside: make them relative so they resolve inside the root either way.
relink_absolute() { # ROOT
  local r dir link target
  r=$(realpath "$1")
  for dir in $(for d in usr/lib64 usr/lib/x86_64-linux-gnu lib/x86_64-linux-gnu lib64; do
                 [ -d "$r/$d" ] && realpath "$r/$d"; done | sort -u); do
    for link in "$dir"/*; do
      [ -L "$link" ] || continue
      target=$(readlink "$link")
      [ "${target#/}" != "$target" ] || continue
      ln -sfn "$(realpath -m -s --relative-to="/${dir#"$r"/}" "$target")" "$link"
    done
  done
}
relink_absolute "$tmp"
mv "$tmp" "$root"
touch "$marker"
echo "rootfs: bullseye built in $(( $(date +%s) - start )) s ($(du -sh "$root" | cut -f1))" >&2
echo "$root"

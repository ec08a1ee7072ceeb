#!/usr/bin/env bash
# The glibc floor, functionally: the shipped libvgpu.so (built on this host, which has a newer
# glibc) preloaded into programs of an older userland. The root filesystem is Debian bullseye
# (glibc 2.31, test/oldglibc/rootfs.sh, built once and cached); the fake libcuda/libnvidia-ml and
# the preload test programs are linked against its glibc (--sysroot) into $BUILD-bullseye, and the
# whole preload suite (test/run_preload.sh: memory limit refusals, SM-limited launches, forks,
# SIGKILLs, ...) runs inside it with chroot, in a private mount namespace.
#   BUILD=build test/oldglibc/run.sh      Last line: "old-glibc: N passed, M failed".
# Needs root (chroot, mounts) and, the first time, the Debian archive (about a minute).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
finish() { echo "old-glibc: $pass passed, $fail failed"; [ "$fail" = 0 ]; exit $?; }

[ "$(id -u)" = 0 ] || { bad "needs root for chroot and mounts"; finish; }
[ -f "$BUILD/libvgpu.so" ] || { bad "$BUILD/libvgpu.so missing: make all first"; finish; }
root=$(test/oldglibc/rootfs.sh) || { bad "no bullseye root filesystem (see the message above)"; finish; }

# The userland must really be older than the build host, or this run proves nothing.
host_glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
old_glibc=$(chroot "$root" /usr/bin/getconf GNU_LIBC_VERSION | awk '{print $2}')
if [ -n "$old_glibc" ] && [ "$(printf '%s\n%s\n' "$old_glibc" "$host_glibc" | sort -V | head -1)" = "$old_glibc" ] \
    && [ "$old_glibc" != "$host_glibc" ]; then
  ok "root filesystem glibc $old_glibc is older than the build host's $host_glibc"
else
  bad "root filesystem glibc '$old_glibc' is not older than the host's $host_glibc"
fi

# Test programs linked against the old glibc; the library is the shipped one, byte for byte.
obuild=$BUILD-bullseye
if make -s BUILD="$obuild" SYSROOT="$root" fakes preloads > "$BUILD/oldglibc-build.log" 2>&1; then
  ok "fakes and preload programs linked against glibc $old_glibc"
else
  bad "building against $root failed:"; tail -15 "$BUILD/oldglibc-build.log"; finish
fi
cp "$BUILD/libvgpu.so" "$obuild/libvgpu.so"
newest=$(objdump -T "$obuild/preload/cases" | grep -oE 'GLIBC_[0-9.]+' | sed 's/GLIBC_//' | sort -V | tail -1)
if [ "$(printf '%s\n%s\n' "$newest" "$old_glibc" | sort -V | tail -1)" = "$old_glibc" ]; then
  ok "test program needs at most GLIBC_$newest (runs on $old_glibc)"
else
  bad "test program needs GLIBC_$newest, newer than the root's $old_glibc"
fi

# Inside the root: /proc, /dev and a fresh /tmp; the libvgpu tree at /libvgpu.
inner=$(mktemp /tmp/oldglibc-inner.XXXXXX)
trap 'rm -f "$inner"' EXIT
cat > "$inner" <<'IN'
set -uo pipefail
root=$1 tree=$2 obuild=$3
mkdir -p "$root/libvgpu"
mount --bind "$tree" "$root/libvgpu" || exit 90
mount -t proc proc "$root/proc" || exit 91
mount --rbind /dev "$root/dev" || exit 92
mount -t tmpfs -o size=512m tmpfs "$root/tmp" || exit 93
exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp /bin/bash -c '
  cd /libvgpu || exit 94
  lib=/libvgpu/'"$obuild"'/libvgpu.so
  # The loader of this root accepts the preload (a glibc it lacks would make it print an error
  # and skip the library) and maps it into a plain program of the root.
  maps=$(LD_PRELOAD=$lib /bin/cat /proc/self/maps 2> /tmp/preload.err)
  if grep -q "/libvgpu.so" <<< "$maps" && ! [ -s /tmp/preload.err ]; then
    echo "ok   /bin/cat of the root loads libvgpu.so under LD_PRELOAD"
  else
    echo "FAIL /bin/cat did not load libvgpu.so: $(head -3 /tmp/preload.err)"
  fi
  SIGKILL_ITERATIONS=${SIGKILL_ITERATIONS:-100} BUILD='"$obuild"' VGPU_LIB=$lib test/run_preload.sh'
IN
out=$(unshare -m --propagation private bash "$inner" "$root" "$PWD" "$obuild" 2>&1)
rc=$?
echo "$out" | grep -E '^(ok|FAIL|  )'
grep -q '^ok   /bin/cat' <<< "$out" && ok "preload accepted by the old loader" || bad "preload in the root (exit $rc)"
line=$(grep -E '^preload: [0-9]+ passed, [0-9]+ failed$' <<< "$out" | tail -1)
if [ -n "$line" ] && [ "$rc" = 0 ]; then
  ok "preload suite inside glibc $old_glibc: ${line#preload: }"
  pass=$((pass + $(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<< "$line") - 1))
else
  bad "preload suite inside glibc $old_glibc (exit $rc): ${line:-no summary}"
  tail -20 <<< "$out"
fi
finish

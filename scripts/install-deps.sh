#!/usr/bin/env bash
# Installs the Debian packages the test suite drives for real (idempotent; quiet when all present).
# Prometheus/promtool: exposition and rules; wrk: load; chromium: status page; clang/cppcheck/
# clang-tidy: C static checks and sanitizers; valgrind: leak checks; the aarch64 cross toolchain and
# qemu-user: libvgpu's arm64 build and its suites under emulation (libvgpu/test/arm64/run.sh).
set -euo pipefail
declare -A want=(
  [promtool]=prometheus [prometheus]=prometheus [wrk]=wrk [chromium]=chromium
  [clang]=clang [cppcheck]=cppcheck [clang-tidy]=clang-tidy [valgrind]=valgrind
  [unshare]=util-linux [jq]=jq [yq]=yq [gcc]=gcc [make]=make
  [debootstrap]=debootstrap  # libvgpu/test/oldglibc: the glibc-floor run in an older userland
  [node]=nodejs [npm]=npm  # scripts/test-deploy.sh: dashboard type-check against @grafana/schema
  [aarch64-linux-gnu-gcc]=gcc-aarch64-linux-gnu [qemu-aarch64]=qemu-user  # make -C libvgpu test-arm64
  [qemu-aarch64-static]=qemu-user-static [gpgv]=gpgv  # make image-test-arm64 (chrooted image, Debian's signatures)
)
missing=()
for cmd in "${!want[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${want[$cmd]}")
done
# libFuzzer / sanitizer runtimes come with libclang-rt-14-dev. Wanted whether or not clang is there
# yet: on a new machine clang is installed by this same run, and without the runtime the first
# `make test` would fuzz with the gcc fallback instead of libFuzzer.
if ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  missing+=(libclang-rt-14-dev)
fi
# The aarch64 libc (headers, libc.a for the static shrreg-tool, the loader qemu runs programs with):
# only recommended by the cross gcc, so not installed with --no-install-recommends.
[ -e /usr/aarch64-linux-gnu/lib/libc.a ] || missing+=(libc6-dev-arm64-cross)
# qemu-aarch64 looks for the aarch64 loader and libraries under its default prefix (Debian's
# qemu-user: /etc/qemu-binfmt/<arch>); the test scripts start programs with `env -i`, which drops
# QEMU_LD_PREFIX, so the prefix is this link (Debian's documented setup for qemu-user).
link_qemu_prefix() {
  [ -e /etc/qemu-binfmt/aarch64/lib/ld-linux-aarch64.so.1 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: not root; as root run: mkdir -p /etc/qemu-binfmt && ln -sfn /usr/aarch64-linux-gnu /etc/qemu-binfmt/aarch64" >&2
    return 1
  fi
  mkdir -p /etc/qemu-binfmt && ln -sfn /usr/aarch64-linux-gnu /etc/qemu-binfmt/aarch64
}
if [ ${#missing[@]} -eq 0 ]; then link_qemu_prefix; exit $?; fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: not root; install these packages first: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
link_qemu_prefix

#!/usr/bin/env bash
# Installs the Debian packages the test suite drives for real (idempotent; quiet when all present).
# Prometheus/promtool: exposition and rules; wrk: load; chromium: status page; clang/cppcheck/
# clang-tidy: C static checks and sanitizers; valgrind: leak checks.
set -euo pipefail
declare -A want=(
  [promtool]=prometheus [prometheus]=prometheus [wrk]=wrk [chromium]=chromium
  [clang]=clang [cppcheck]=cppcheck [clang-tidy]=clang-tidy [valgrind]=valgrind
  [unshare]=util-linux [jq]=jq [yq]=yq [gcc]=gcc [make]=make
  [debootstrap]=debootstrap  # libvgpu/test/oldglibc: the glibc-floor run in an older userland
  [node]=nodejs [npm]=npm  # scripts/test-deploy.sh: dashboard type-check against @grafana/schema
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
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: not root; install these packages first: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

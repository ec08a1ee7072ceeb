#!/usr/bin/env bash
# The exporter's safe open (region-codec NativeFs) uses raw O_*/RESOLVE_*/errno values and the
# openat2 syscall number: every one is compared here with what the C headers of each architecture
# say, aarch64 (the cross toolchain's) against its ARM_PPC table and x86_64 (the host's) against
# GENERIC, so a wrong value in the table fails the build instead of a node.
# Usage: test/arm64/safe_open_flags.sh [NativeFs.java]   Last line: "safe-open flags: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../../.."
SRC=${1:-region-codec/src/main/java/io/vgpu/regioncodec/internal/NativeFs.java}
pass=0 fail=0
[ -f "$SRC" ] || { echo "FAIL $SRC missing"; echo "safe-open flags: 0 passed, 1 failed"; exit 1; }

java_value() { # NAME -> the numeric value of `static final int|long NAME = ...;` (Java octal/hex)
  local v
  v=$(grep -E "static final (int|long) $1 = " "$SRC" | head -1 | sed -E 's/.*= *([-0-9xXa-fA-F]+)L?;.*/\1/')
  [ -n "$v" ] && printf '%d\n' "$v"
}
table_value() { # TABLE FIELD(directory|noFollow) -> from `new Flags("name", directory, noFollow)`
  local line
  line=$(grep -E "static final Flags $1 = new Flags\(" "$SRC" | head -1)
  [ -n "$line" ] || return 1
  local d n
  d=$(sed -E 's/.*new Flags\("[^"]*", *([0-9xX]+), *([0-9xX]+)\).*/\1/' <<< "$line")
  n=$(sed -E 's/.*new Flags\("[^"]*", *([0-9xX]+), *([0-9xX]+)\).*/\2/' <<< "$line")
  if [ "$2" = directory ]; then printf '%d\n' "$d"; else printf '%d\n' "$n"; fi
}
c_values() { # CC -> "NAME VALUE" lines for the constants below, as the C headers define them
  "$1" -x c -o "$tmp/probe.$2" - <<'C' && "$3" "$tmp/probe.$2"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/syscall.h>
#define P(x) printf("%s %lld\n", #x, (long long)(x))
int main(void) {
  P(O_RDONLY); P(O_RDWR); P(O_CLOEXEC); P(O_PATH); P(O_DIRECTORY); P(O_NOFOLLOW); P(AT_FDCWD);
  P(RESOLVE_NO_XDEV); P(RESOLVE_NO_MAGICLINKS); P(RESOLVE_NO_SYMLINKS); P(RESOLVE_IN_ROOT);
  P(SYS_openat2); P(EPERM); P(ENOENT); P(EACCES); P(ENOTDIR); P(ELOOP); P(EXDEV);
  return 0;
}
C
}
tmp=$(mktemp -d /tmp/safe-open-flags.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

check_arch() { # label CC RUNNER TABLE
  local label=$1 cc=$2 runner=$3 table=$4 name c j
  if ! c_values "$cc" "$label" "$runner" > "$tmp/$label.txt" 2> "$tmp/$label.err"; then
    fail=$((fail + 1)); echo "FAIL $label: cannot build/run the header probe: $(tail -3 "$tmp/$label.err")"; return
  fi
  while read -r name c; do
    case $name in
      O_DIRECTORY) j=$(table_value "$table" directory) ;;
      O_NOFOLLOW) j=$(table_value "$table" noFollow) ;;
      SYS_openat2) j=$(java_value SYS_OPENAT2) ;;
      *) j=$(java_value "$name") ;;
    esac
    if [ -n "$j" ] && [ "$j" = "$c" ]; then pass=$((pass + 1)); echo "ok   $label $name = $c ($table)"
    else fail=$((fail + 1)); echo "FAIL $label $name: headers say $c, NativeFs says ${j:-nothing}"; fi
  done < "$tmp/$label.txt"
}
# aarch64: built with the cross compiler, run under qemu (the binfmt entry of test/arm64/run.sh,
# or qemu-aarch64 directly).
run_arm() { if [ -n "${VGPU_ARM64_INNER:-}" ]; then "$1"; else qemu-aarch64 "$1"; fi; }
check_arch aarch64 aarch64-linux-gnu-gcc run_arm ARM_PPC
run_host() { "$1"; }
check_arch x86_64 gcc run_host GENERIC
echo "safe-open flags: $pass passed, $fail failed"
[ "$fail" = 0 ]

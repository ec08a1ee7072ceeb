#!/usr/bin/env bash
# The glibc floor (README "glibc floor"): every ELF file given must run on GLIBC_2.17.
#   test/check_glibc_floor.sh [--floor 2.17] FILE...
# A dynamic file passes when no symbol or version requirement names a GLIBC_x.y newer than the
# floor; a static executable passes when it has no dynamic section and no interpreter (it loads
# no glibc). Also self-tests the check and the pin header: a probe library built without
# src/glibc_floor.h must FAIL the check on this build host (glibc >= 2.34), and the same probe
# built with it must pass (skipped only where the host's glibc is itself older than 2.34, in which
# case the probe proves nothing and the line says so).
# Last line: "glibc-floor: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
floor=2.17
if [ "${1:-}" = --floor ]; then floor=$2; shift 2; fi
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

newer_than_floor() { # version -> true when newer than the floor
  [ "$1" != "$floor" ] && [ "$(printf '%s\n%s\n' "$floor" "$1" | sort -V | tail -1)" = "$1" ]
}

# check FILE: prints the verdict; returns 0 when the file stays within the floor.
check() {
  local f=$1 v worst="" offenders
  [ -f "$f" ] || { echo "$f: missing"; return 1; }
  if ! readelf -d "$f" 2>/dev/null | grep -q 'Dynamic section'; then
    if readelf -l "$f" 2>/dev/null | grep -q 'INTERP'; then echo "$f: has an interpreter but no dynamic section?"; return 1; fi
    echo "$f: statically linked, needs no glibc"
    return 0
  fi
  # Version requirements (what the loader checks) and versioned undefined symbols (which name it).
  local versions
  versions=$({ readelf -V -W "$f" | grep -oE 'Name: GLIBC_[0-9.]+' | sed 's/Name: GLIBC_//'
               objdump -T "$f" | grep -oE '\(?GLIBC_[0-9.]+\)?' | tr -d '()' | sed 's/GLIBC_//'; } | sort -Vu)
  for v in $versions; do
    if newer_than_floor "$v"; then worst=$v; fi
  done
  if [ -n "$worst" ]; then
    offenders=$(objdump -T "$f" | awk '/GLIBC_[0-9]/ {print $(NF-1) " " $NF}' | tr -d '()' \
      | while read -r ver sym; do newer_than_floor "${ver#GLIBC_}" && echo "$sym@$ver"; done | sort -u | head -20 | tr '\n' ' ')
    echo "$f: needs GLIBC_$worst > floor $floor: $offenders"
    return 1
  fi
  echo "$f: newest glibc needed $(tail -1 <<< "$versions" | sed 's/^/GLIBC_/') (floor $floor)"
  return 0
}

for f in "$@"; do
  if out=$(check "$f"); then ok "$out"; else bad "$out"; fi
done

# Self-test: the check catches a library built the default way on this host, and the header fixes it.
host_glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
tmp=$(mktemp -d /tmp/glibc-floor.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/probe.c" <<'C'
#include <dlfcn.h>
#include <pthread.h>
#include <sys/stat.h>
static void *run(void *arg) { return arg; }
int probe(const char *path) {
  struct stat st;
  pthread_t t;
  void *h = dlopen(path, RTLD_NOW);
  if (h) dlclose(h);
  if (pthread_create(&t, NULL, run, NULL) == 0) pthread_join(t, NULL);
  return stat(path, &st);
}
C
CC=${CC:-gcc}
if [ "$(printf '2.34\n%s\n' "$host_glibc" | sort -V | head -1)" = 2.34 ]; then
  "$CC" -D_GNU_SOURCE -shared -fPIC -o "$tmp/plain.so" "$tmp/probe.c" -ldl -lpthread
  if out=$(check "$tmp/plain.so"); then bad "self-test: a probe built without the pins passed on glibc $host_glibc: $out"
  else ok "self-test: a probe built without the pins is refused (${out#*: })"; fi
else
  echo "note: host glibc $host_glibc < 2.34, the unpinned probe would pass anyway: not counted"
fi
"$CC" -D_GNU_SOURCE -include src/glibc_floor.h -shared -fPIC -o "$tmp/pinned.so" "$tmp/probe.c" \
  -Wl,--no-as-needed -l:libpthread.so.0 -l:libdl.so.2
if out=$(check "$tmp/pinned.so"); then ok "self-test: the same probe with src/glibc_floor.h passes (${out#*: })"
else bad "self-test: the pinned probe: $out"; fi

echo "glibc-floor: $pass passed, $fail failed"
[ "$fail" = 0 ]

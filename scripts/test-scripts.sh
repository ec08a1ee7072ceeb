#!/usr/bin/env bash
# Shell-level checks: every shell script of the repository parses (bash -n), and no literal
# "/proc/" path outside the resolver's path helper.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
passed=0

# Every tracked file whose first line is a sh/bash shebang, wherever it lives (scripts/, bin/,
# .ci/, deploy/image/, libvgpu/test/, the benches), not only scripts/*.sh.
shell_scripts() {
  git ls-files -z | while IFS= read -r -d '' f; do
    [ -f "$f" ] && head -n 1 "$f" | grep -qE '^#!.*[/ ](ba)?sh( |$)' && printf '%s\n' "$f"
  done
}
# bash -n must reject a broken script, or the loop below checks nothing.
broken=$(mktemp)
printf '#!/usr/bin/env bash\nif true; then echo missing-fi\n' >"$broken"
if bash -n "$broken" 2>/dev/null; then
  echo "syntax check: bash -n accepted a broken script"
  fail=$((fail + 1))
fi
rm -f "$broken"
mapfile -t scripts < <(shell_scripts)
if [ "${#scripts[@]}" -lt 20 ]; then
  echo "syntax check: found only ${#scripts[@]} shell scripts (git ls-files failed or the shebang match broke): ${scripts[*]}"
  fail=$((fail + 1))
fi
for f in "${scripts[@]}"; do
  if bash -n "$f"; then passed=$((passed + 1)); else echo "syntax error: $f"; fail=$((fail + 1)); fi
done
for must in scripts/test-deploy.sh deploy/image/image-test.sh bin/vgpu-exporter .ci/run libvgpu/test/run_all.sh; do
  printf '%s\n' "${scripts[@]}" | grep -qx "$must" || { echo "syntax check: $must not among the checked scripts"; fail=$((fail + 1)); }
done

# Java main sources that name a path inside /proc themselves instead of going through
# hostpid-resolver's ProcFs, whose root --path.procfs moves (a fixture procfs in tests, the host's
# procfs mounted elsewhere in a container). The exporter's own /proc/self is exempt, and so is the
# bare "/proc" a setting defaults to.
# grep exits 1 for "no line": that is a clean tree here; any other failure (an unreadable tree,
# exit 2) fails the check instead of passing it.
grep_lines() {
  local rc=0
  grep "$@" || rc=$?
  [ "$rc" -le 1 ] || { echo "test-scripts: grep $* failed ($rc)" >&2; return "$rc"; }
}
proc_literals() {
  local hits
  hits=$(grep_lines -rnE --include='*.java' '"/proc/|Path\.of\("/proc",' "$@") || return
  printf '%s\n' "$hits" | grep_lines -v '/io/vgpu/hostpid/ProcFs\.java:' |
    grep_lines -vE '"/proc/self(/[^"]*)?"|^$'
}

# The check must see a planted offender and pass the exempt forms, or it checks nothing.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
mkdir -p "$probe/a/src/main/java/x" "$probe/b/src/main/java/io/vgpu/hostpid"
printf '%s\n' 'class A { Path p = Path.of("/proc/1/status"); Path q = Path.of("/proc", "1"); }' \
  >"$probe/a/src/main/java/x/A.java"
printf '%s\n' 'class B { Path s = Path.of("/proc/self/fd"); String d = "/proc"; }' \
  >"$probe/a/src/main/java/x/B.java"
printf '%s\n' 'class ProcFs { Path r = Path.of("/proc/"); }' \
  >"$probe/b/src/main/java/io/vgpu/hostpid/ProcFs.java"
if [ "$(proc_literals "$probe" | wc -l)" -ne 1 ] || ! proc_literals "$probe" | grep -q '/x/A\.java:1:'; then
  echo "proc-literal check: planted offender not found exactly once:"
  proc_literals "$probe"
  fail=$((fail + 1))
else
  passed=$((passed + 1))
fi

offenders=$(proc_literals exporter/src/main/java hostpid-resolver/src/main/java region-codec/src/main/java)
if [ -n "$offenders" ]; then
  echo "literal /proc/ paths outside hostpid-resolver's ProcFs (use ProcFs and its configurable root):"
  echo "$offenders"
  fail=$((fail + 1))
else
  passed=$((passed + 1))
fi

# README.md and docs/: links, the two setup commands, make targets and paths (scripts/check-docs.sh).
# It must fail on a planted broken link, a missing target and a missing setup command first.
bad_tree="$probe/docs-tree"
mkdir -p "$bad_tree/docs" "$bad_tree/scripts"
printf 'x:\n' >"$bad_tree/Makefile"
printf '# T\n\n    make demo\n\nSee [gone](docs/gone.md) and `make nope`, `make x`, `make x`.\n' >"$bad_tree/README.md"
printf '# D\n\n[up](../README.md#nothing)\n' >"$bad_tree/docs/a.md"
bad_rc=0
bad_out=$(scripts/check-docs.sh "$bad_tree" 2>&1) || bad_rc=$?
if [ "$bad_rc" -ne 0 ] && grep -q 'no .*docs/gone.md' <<<"$bad_out" && grep -q 'make nope' <<<"$bad_out" \
  && grep -q "make test' is not" <<<"$bad_out" && grep -q 'no heading #nothing' <<<"$bad_out"; then
  passed=$((passed + 1))
else
  echo "check-docs: a planted broken tree was not caught:"
  echo "$bad_out"
  fail=$((fail + 1))
fi
if scripts/check-docs.sh; then passed=$((passed + 1)); else fail=$((fail + 1)); fi

# Structure (scripts/check-structure.sh): no source file over 600 lines, no include cycle in libvgpu.
# It must fail a planted 601-line file and pass one of 600 (no exceptions), and fail a planted
# include cycle, or it checks nothing.
lines() { # N FILE: a file of exactly N lines
  mkdir -p "$(dirname "$2")"
  seq "$1" >"$2"
}
structure_probe() { # NAME EXPECTED-RC REGEX ARGS...: runs the check on a probe tree
  local name=$1 want=$2 re=$3 out rc=0
  shift 3
  out=$(scripts/check-structure.sh "$@" 2>&1) || rc=$?
  if [ "$rc" -eq "$want" ] && grep -qE "$re" <<<"$out"; then
    passed=$((passed + 1))
  else
    echo "check-structure: $name: exit $rc (want $want), output not matching /$re/:"
    echo "$out"
    fail=$((fail + 1))
  fi
}
size_tree="$probe/size-tree"
lines 600 "$size_tree/a/Fits.java"
lines 600 "$size_tree/a/fits.h"
structure_probe "600 lines" 0 '^$' --sizes "$size_tree"
lines 601 "$size_tree/a/big.inc"
structure_probe "601 lines" 1 'a/big.inc has 601 lines, over 600' --sizes "$size_tree"
rm "$size_tree/a/big.inc"
lines 601 "$size_tree/libvgpu/test/fake/fake_cuda.c" # once split by another change: no list exempts it
structure_probe "601 lines, a test fake" 1 'fake_cuda.c has 601 lines, over 600' --sizes "$size_tree"
inc_tree="$probe/include-tree"
mkdir -p "$inc_tree/libvgpu/src" "$inc_tree/libvgpu/include/vgpu" "$inc_tree/libvgpu/tools"
printf '#include "b.h"\n' >"$inc_tree/libvgpu/src/a.h"
printf '#include <vgpu/c.h>\n#include <stdio.h>\n' >"$inc_tree/libvgpu/src/b.h"
printf '#include "../../tools/t.c"\n' >"$inc_tree/libvgpu/include/vgpu/c.h"
printf '#include "a.h"\n' >"$inc_tree/libvgpu/tools/t.c"
structure_probe "include cycle" 1 'include cycle' --includes "$inc_tree"
printf '#include <stdint.h>\n' >"$inc_tree/libvgpu/include/vgpu/c.h"
printf '#include "t.h"\n' >"$inc_tree/libvgpu/tools/t.c"
printf '#include "vgpu/c.h"\n' >"$inc_tree/libvgpu/tools/t.h"
structure_probe "no include cycle" 0 '^$' --includes "$inc_tree"
printf '#include "t.h"\n' >"$inc_tree/libvgpu/tools/t.h"
structure_probe "self include" 1 'libvgpu/tools/t.h includes itself' --includes "$inc_tree"
# Call cycles between objects (make -C libvgpu lint): a -> b -> c -> a fails, a -> b -> c passes.
obj_tree="$probe/objects"
mkdir -p "$obj_tree"
printf 'void b(void);\nvoid a(void) { b(); }\n' >"$obj_tree/a.c"
printf 'void c(void);\nvoid b(void) { c(); }\n' >"$obj_tree/b.c"
printf 'void a(void);\nvoid c(void) { a(); }\n' >"$obj_tree/c.c"
(cd "$obj_tree" && "${CC:-cc}" -c a.c b.c c.c)
structure_probe "call cycle" 1 'call cycle among the objects' --calls "$obj_tree"
printf 'void c(void) {}\n' >"$obj_tree/c.c"
(cd "$obj_tree" && "${CC:-cc}" -c c.c)
structure_probe "no call cycle" 0 '^$' --calls "$obj_tree"
if scripts/check-structure.sh; then passed=$((passed + 1)); else fail=$((fail + 1)); fi

# scripts/lib.sh, the helpers the scripts share: each against a real process or server.
lib_check() { # NAME CMD...: the command must succeed
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); else echo "lib.sh: $name"; fail=$((fail + 1)); fi
}
fake_java() { # DIR VERSION: a "JDK" whose java -version names VERSION
  mkdir -p "$1/bin"
  printf '#!/bin/sh\necho '"'"'openjdk version "%s" 2024-01-01'"'"' >&2\n' "$2" >"$1/bin/java"
  chmod +x "$1/bin/java"
}
fake_java "$probe/jdk21" 21.0.2
fake_java "$probe/jdk25" 25.0.1
lib_check "jdk25 takes a JAVA_HOME of 25" [ "$(JAVA_HOME="$probe/jdk25" scripts/lib.sh jdk25)" = "$probe/jdk25" ]
lib_check "jdk25 passes over a JAVA_HOME of 21" [ "$(JAVA_HOME="$probe/jdk21" scripts/lib.sh jdk25 || true)" != "$probe/jdk21" ]
lib_check "need_jdk25 fails with a message when none is found" \
  bash -c '. scripts/lib.sh; jdk25() { return 1; }; out=$( (need_jdk25) 2>&1) && exit 1; grep -q "JDK 25 not found" <<<"$out"'
port=$(scripts/lib.sh free_port)
lib_check "free_port prints a port" [ "$port" -gt 0 ]
lib_check "await_http fails on a port nobody serves" bash -c '! scripts/lib.sh await_http "http://127.0.0.1:$1/" 1 "" 0.1 2>/dev/null' _ "$port"
sleep 30 &
dead=$!
kill "$dead"
wait "$dead" 2>/dev/null || true
lib_check "await_http gives up when the server's process is gone" \
  bash -c 'start=$SECONDS; ! scripts/lib.sh await_http "http://127.0.0.1:$1/" 60 "$2" 0.1 2>/dev/null && [ $((SECONDS - start)) -lt 10 ]' _ "$port" "$dead"
mkdir -p "$probe/www"
echo ok >"$probe/www/readyz"
(cd "$probe/www" && exec python3 -m http.server --bind 127.0.0.1 "$port" >/dev/null 2>&1) &
server=$!
lib_check "await_http sees a server that starts" scripts/lib.sh await_http "http://127.0.0.1:$port/readyz" 30 "$server" 0.1
lib_check "await_http fails on a 404" bash -c '! scripts/lib.sh await_http "http://127.0.0.1:$1/nothing" 1 "" 0.1 2>/dev/null' _ "$port"
kill "$server"
wait "$server" 2>/dev/null || true

# scripts/check-no-skips.sh: a skipped test fails `make test`, and so does a module that ran none.
skips="$probe/skips"
mkdir -p "$skips/clean/target/surefire-reports" "$skips/skipped/target/surefire-reports" "$skips/none"
echo '<testsuite name="a" tests="1"><testcase classname="p.A" name="x"/></testsuite>' \
  >"$skips/clean/target/surefire-reports/TEST-p.A.xml"
echo '<testsuite name="a" tests="2" skipped="1"><testcase classname="p.A" name="x"/><testcase classname="p.A" name="y"><skipped message="promtool not installed"/></testcase></testsuite>' \
  >"$skips/skipped/target/surefire-reports/TEST-p.A.xml"
lib_check "check-no-skips passes a module with no skip" scripts/check-no-skips.sh "$skips/clean"
lib_check "check-no-skips fails a skipped test and names it" \
  bash -c 'out=$(scripts/check-no-skips.sh "$1" 2>&1) && exit 1; grep -q "p.A.y: promtool not installed" <<<"$out"' _ "$skips/skipped"
lib_check "check-no-skips fails a module that ran no tests" bash -c '! scripts/check-no-skips.sh "$1" 2>/dev/null' _ "$skips/none"

echo "scripts: $passed passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# libvgpu/test/lib.sh — helpers shared by libvgpu's test scripts; source it. Bash and coreutils
# only (test/run_preload.sh also runs inside the old-glibc root filesystem, test/oldglibc/run.sh).
#
#   sanitizer_runtimes          the ASan and UBSan runtimes, colon-separated (what an instrumented
#                               libvgpu.so needs before it in LD_PRELOAD)
#   preload_env LIB             sets PRELOAD to LIB, preceded by the sanitizer runtimes when
#                               SANITIZE is set, and exports ASAN_OPTIONS' default for preloaded runs
#   account NAME RC LOG         adds a part's result to $pass and $fail: its log's last
#                               "<x>: N passed, M failed" line (a non-zero RC with no failure
#                               counted is one failure), else one test decided by RC. Prints
#                               "ok   NAME (N) Ts" or "FAIL NAME (M failed) Ts" with the failed
#                               cases and the log's end; T counts from the previous account call
#                               (or the source of this file). ACCOUNT_PREFIX goes before NAME.

sanitizer_runtimes() {
  echo "$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
}

preload_env() {
  PRELOAD=$1
  if [ -n "${SANITIZE:-}" ]; then PRELOAD="$(sanitizer_runtimes):$1"; fi
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:verify_asan_link_order=0}
}

pass=${pass:-0}
fail=${fail:-0}
account_mark=$SECONDS
account() {
  local name=${ACCOUNT_PREFIX:-}$1 rc=$2 log=$3 line p f took=$((SECONDS - account_mark))
  account_mark=$SECONDS
  line=$(grep -E ': [0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
  if [ -n "$line" ]; then
    p=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\1/' <<< "$line")
    f=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed$/\2/' <<< "$line")
    [ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
  elif [ "$rc" = 0 ]; then p=1; f=0; else p=0; f=1; fi
  pass=$((pass + p)); fail=$((fail + f))
  if [ "$f" = 0 ]; then echo "ok   $name ($p) ${took}s"; return 0; fi
  echo "FAIL $name ($f failed) ${took}s"
  # The failed cases with their detail lines, then the end of the log.
  grep -E '^(FAIL|  )' "$log" | head -60 | sed 's/^/  | /'
  tail -25 "$log" | sed 's/^/  | /'
  return 0
}

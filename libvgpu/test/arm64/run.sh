#!/usr/bin/env bash
# The aarch64 build (make ARCH=arm64 all -> build-arm64/) checked and run under qemu-user (issue 33).
#   test/arm64/run.sh [SUITE...]      default: $ARM64_SUITES, else every suite below
#   test/arm64/run.sh -- CMD...       one command in the same environment (see the end)
# Suites: floor (the aarch64 artifacts' machine and glibc floor, GLIBC_2.17), flags (the exporter's
# safe-open O_* table against aarch64's headers: test/arm64/safe_open_flags.sh), hooks (exports equal
# the hook lists), unit (every test/unit program; hami_coexist_test is the HAMi-coexistence one),
# preload (test/run_preload.sh), region (test/run_region.sh), stripped-env (test/run_adopt.sh),
# tools (shrreg-tool's suite incl. HAMi-core's own region files; hami: only those), stress (test/stress/run.sh,
# reduced: ARM64_STRESS_PROCS x ARM64_STRESS_THREADS for ARM64_STRESS_SECONDS, default 4 x 2 x 6 s).
#
# How aarch64 programs run here: inside a user and mount namespace of their own, a binfmt_misc
# instance (per user namespace since Linux 6.7) hands every aarch64 ELF to qemu-aarch64, so the
# unchanged x86 test scripts start aarch64 programs (and those exec further ones) as usual; the
# host's binfmt_misc is not touched. qemu finds the aarch64 loader and libc under its default
# prefix /etc/qemu-binfmt/aarch64 (scripts/install-deps.sh links it to /usr/aarch64-linux-gnu):
# the suites start programs with `env -i`, which would drop QEMU_LD_PREFIX.
# The preload path is VGPU_LIB=build-arm64/$LIB/libvgpu.so: both loaders expand $LIB, the aarch64
# one (guest) to lib/aarch64-linux-gnu (a link to build-arm64/libvgpu.so), the host one (env,
# timeout, bash and qemu itself, which see the same LD_PRELOAD) to lib/x86_64-linux-gnu, an empty
# x86 library: without it every host program would print "cannot be preloaded" into the stderr
# the cases check.
# Each line says how long its suite took. Last line: "libvgpu-arm64: N passed, M failed".
set -uo pipefail
SELF=$(readlink -f "$0")
cd "$(dirname "$0")/../.."
export BUILD=${BUILD:-build-arm64}
ROOT=$PWD
QEMU=${ARM64_QEMU:-$(command -v qemu-aarch64 || true)}
PREFIX=/etc/qemu-binfmt/aarch64

if [ -z "${VGPU_ARM64_INNER:-}" ]; then
  why=""
  [ -n "$QEMU" ] || why="qemu-aarch64 not installed (apt-get install qemu-user)"
  [ -e "$PREFIX/lib/ld-linux-aarch64.so.1" ] || why="${why:+$why; }$PREFIX/lib/ld-linux-aarch64.so.1 missing (apt-get install libc6-dev-arm64-cross; ln -s /usr/aarch64-linux-gnu $PREFIX)"
  [ -f "$BUILD/libvgpu.so" ] || why="${why:+$why; }$BUILD/libvgpu.so missing (make ARCH=arm64 all)"
  [ -f "$BUILD/lib/x86_64-linux-gnu/libvgpu.so" ] || why="${why:+$why; }$BUILD/lib/x86_64-linux-gnu/libvgpu.so missing (make ARCH=arm64 all)"
  if [ -n "$why" ]; then
    echo "FAIL $why"; echo "libvgpu-arm64: 0 passed, 1 failed"; exit 1
  fi
  if [ "$(id -u)" != 0 ]; then exec unshare --user --map-root-user --mount env VGPU_ARM64_INNER=1 "$SELF" "$@"; fi
  # As root: the whole uid/gid range mapped onto itself (shrreg-tool's permission cases drop to
  # 65534), written by this process (util-linux would need newuidmap and /etc/subuid for it). The
  # child waits on a pipe until its maps are written.
  go=$(mktemp -u /tmp/libvgpu-arm64-go.XXXXXX)
  mkfifo -m 600 "$go"
  unshare --user --mount bash -c 'read -r _ < "$1"; rm -f "$1"; shift; exec env VGPU_ARM64_INNER=1 "$@"' \
    _ "$go" "$SELF" "$@" &
  inner=$!
  for _ in $(seq 100); do # until it has unshared
    [ "$(readlink /proc/$inner/ns/user)" != "$(readlink /proc/self/ns/user)" ] && break
    sleep 0.1
  done
  if ! { echo '0 0 65536' > /proc/$inner/uid_map && echo '0 0 65536' > /proc/$inner/gid_map; }; then
    kill $inner; rm -f "$go"
    echo "FAIL cannot write the namespace's uid/gid maps"; echo "libvgpu-arm64: 0 passed, 1 failed"; exit 1
  fi
  echo go > "$go"
  wait $inner
  exit $?
fi

mount --make-rprivate / &&
  mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc &&
  printf '%s' ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:'"$QEMU"':F' \
    > /proc/sys/fs/binfmt_misc/register || {
  echo "FAIL cannot register qemu-aarch64 in a binfmt_misc of this user namespace (Linux >= 6.7 needed: $(uname -r))"
  echo "libvgpu-arm64: 0 passed, 1 failed"
  exit 1
}

# The preload path both loaders resolve (see the top).
mkdir -p "$BUILD/lib/aarch64-linux-gnu" "$BUILD/lib/x86_64-linux-gnu"
ln -sfn ../../libvgpu.so "$BUILD/lib/aarch64-linux-gnu/libvgpu.so"
ln -sfn lib/aarch64-linux-gnu "$BUILD/\$LIB" # for the scripts' own [ -r "$LIB" ] checks
# ("$BUILD/lib/x86_64-linux-gnu/libvgpu.so": the empty x86_64 one, built by arm64.mk.)
export VGPU_LIB="$ROOT/$BUILD/\$LIB/libvgpu.so"
export CC=aarch64-linux-gnu-gcc

LOGDIR=$(mktemp -d /tmp/libvgpu-arm64.XXXXXX)
trap 'rm -rf "$LOGDIR"' EXIT
. test/lib.sh # account: counts each suite into $pass and $fail
ACCOUNT_PREFIX="arm64 "

# Every shipped artifact and every test program is an aarch64 ELF: a run against the x86 build
# (which the binfmt entry would not catch: x86 programs run natively) would prove nothing.
arch_check() {
  local f bad=0
  for f in "$BUILD/libvgpu.so" "$BUILD/shrreg-tool" "$BUILD"/fake/*.so.1 "$BUILD"/unit/*_test "$BUILD"/preload/*; do
    [ -f "$f" ] || continue
    readelf -h "$f" | grep -q 'Machine: *AArch64' || { echo "not aarch64: $f"; bad=1; }
  done
  [ $bad = 0 ] && echo "artifacts: every one is an aarch64 ELF"
  return $bad
}

suite_floor() {
  arch_check > "$LOGDIR/arch.log" 2>&1
  account "artifacts are aarch64" $? "$LOGDIR/arch.log"
  test/check_glibc_floor.sh "$BUILD/libvgpu.so" "$BUILD/shrreg-tool" > "$LOGDIR/floor.log" 2>&1
  account glibc-floor $? "$LOGDIR/floor.log"
}
suite_hooks() {
  test/check_hooks.sh "$BUILD/libvgpu.so" > "$LOGDIR/hooks.log" 2>&1
  account check-hooks $? "$LOGDIR/hooks.log"
}
# What qemu-user 7.2 does not emulate, so what is left out here (listed, never counted as passed):
#  - a robust mutex's owner death (it keeps no robust futex list): test/arm64/robust_probe.c checks
#    it; when the lock is not recovered, the cases that SIGKILL a holder of libvgpu's reservation
#    mutex would wait forever: region_lock_test's reserveLock case, preload `sigkill`, stress kills;
#  - threads started in the child of a fork of a threaded process (qemu aborts in its TCG):
#    preload `fork`, region_fail's fork() children in the region suite.
# ARM64_QUICK=1 (what `make test` runs) also leaves out what is long under emulation and does not
# depend on the architecture: the limiter's simulations (limiter_shapes/sharing_test) and the
# SM-throttle timing cases (throttle, switch, streams); `make test-arm64` runs them.
robust_ok=1
probe_emulation() {
  [ -x "$BUILD/arm64-probe/robust_probe" ] || { echo "FAIL $BUILD/arm64-probe/robust_probe not built (make ARCH=arm64 all)"; return 1; }
  local out rc
  out=$(timeout 30 "$BUILD/arm64-probe/robust_probe" 2>&1); rc=$?
  echo "note: $out"
  case $rc in
    0) robust_ok=1 ;;
    1) robust_ok=0; echo "note: owner death is not emulated: cases that kill a lock holder are left out" ;;
    *) echo "FAIL robust_probe exit $rc"; return 1 ;;
  esac
}
quick=${ARM64_QUICK:-}
skipped() { echo "skip arm64 $*"; }

# unit_one TEST [CASE-FILTER]: one unit program (or one of its cases) under qemu.
unit_one() {
  local t=$1 filter=${2:-} name
  name=$(basename "$t")${2:+/$2}
  timeout 600 "$t" ${filter:+"$filter"} > "$LOGDIR/${name//\//_}.log" 2>&1
  account "unit/$name" $? "$LOGDIR/${name//\//_}.log"
}
suite_unit() {
  local t name c
  for t in "$BUILD"/unit/*_test; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    case $name in
      limiter_shapes_test | limiter_sharing_test)
        if [ -n "$quick" ]; then skipped "unit/$name (ARM64_QUICK: an arch-neutral simulation, minutes under qemu)"; continue; fi ;;
      hami_coexist_test)
        # Under qemu and a loaded machine, one case races two 1-s bounds (the orphaned semaphore's
        # release and libvgpu's registration wait) and the registration may give up first.
        if [ -n "$quick" ]; then
          skipped "unit/$name/hamiKilledHoldingSemaphore_libvgpuProceeds (ARM64_QUICK: two 1-s bounds race under emulation)"
          for c in unlockedCompaction lockedCompaction_atHami concurrentChurn libvgpuKilledHoldingSemaphore \
            hamiKilledMidSlotWrite stoppedHamiHolder; do
            unit_one "$t" "$c"
          done
          continue
        fi ;;
      region_lock_test)
        if [ $robust_ok = 0 ]; then
          skipped "unit/$name/reserveLock_holderKilled_nextLockerProceeds (robust mutex owner death not emulated)"
          for c in lock_holderKilled_nextLockerProceeds seqlock_readers_neverSeeTornSlot sweep_freesDead_keepsLiveAndFresh \
            foreignLeftoverSlot_notCounted_reusedClean claim_fullTable_reportsFull; do
            unit_one "$t" "$c"
          done
          continue
        fi ;;
    esac
    unit_one "$t"
  done
}
suite_preload() {
  local skip="fork"
  [ $robust_ok = 0 ] && skip="$skip sigkill"
  [ -n "$quick" ] && skip="$skip throttle switch streams"
  skipped "preload cases: $skip (see the top of test/arm64/run.sh)"
  PRELOAD_SKIP=$skip SIGKILL_ITERATIONS=${SIGKILL_ITERATIONS:-30} test/run_preload.sh > "$LOGDIR/preload.log" 2>&1
  account preload $? "$LOGDIR/preload.log"
}
suite_region() {
  skipped "region: region_fail's fork() child checks (REGION_FAIL_NO_FORK_CHILD; qemu aborts in them)"
  REGION_FAIL_NO_FORK_CHILD=1 test/run_region.sh > "$LOGDIR/region.log" 2>&1
  account region $? "$LOGDIR/region.log"
}
suite_stripped-env() {
  test/run_adopt.sh > "$LOGDIR/adopt.log" 2>&1
  account stripped-env $? "$LOGDIR/adopt.log"
}
# shrreg-tool: its fuzz cases, a tenant-garbled semaphore, HAMi-core's own region files and the
# disk-full case. Not the CLI test: ~8 minutes under qemu (hundreds of tool runs), and its
# libvgpu-written-region check reads a live process's start time, which qemu fakes in
# /proc/<own pid>/stat (the slot then reads as pid-reused): an emulation artifact.
suite_tools() {
  skipped "shrreg-tool cli sub-suite (minutes under qemu; qemu fakes /proc/self/stat's start time)"
  SHRREG_SUBSUITES="fuzz semaphore hami-fixtures disk-full" test/tools/run.sh > "$LOGDIR/tools.log" 2>&1
  account shrreg-tool $? "$LOGDIR/tools.log"
}
# The exporter's safe-open flag table (region-codec NativeFs) against aarch64's and x86_64's headers.
suite_flags() {
  test/arm64/safe_open_flags.sh > "$LOGDIR/flags.log" 2>&1
  account safe-open-flags $? "$LOGDIR/flags.log"
}
# HAMi-core's own region files read by the aarch64 shrreg-tool (the quick part of `tools`).
suite_hami() {
  test/tools/hami_fixtures.sh "$BUILD/shrreg-tool" > "$LOGDIR/hami.log" 2>&1
  account hami-core-fixtures $? "$LOGDIR/hami.log"
}
suite_stress() {
  local kills=${ARM64_STRESS_KILLS:-1}
  if [ $robust_ok = 0 ] && [ "$kills" != 0 ]; then
    skipped "stress kills (robust mutex owner death not emulated): the run has none"
    kills=0
  fi
  STRESS_PROCS=${ARM64_STRESS_PROCS:-4} STRESS_THREADS=${ARM64_STRESS_THREADS:-2} \
    STRESS_SECONDS=${ARM64_STRESS_SECONDS:-6} STRESS_KILLS=$kills \
    test/stress/run.sh > "$LOGDIR/stress.log" 2>&1
  account stress $? "$LOGDIR/stress.log"
}

# `test/arm64/run.sh -- CMD...`: one command in this environment (binfmt, VGPU_LIB, CC), e.g.
# `test/arm64/run.sh -- test/run_preload.sh dlvsym` or `-- build-arm64/unit/track_test`.
if [ "${1:-}" = -- ]; then shift; "$@"; exit $?; fi
ALL="floor flags hooks unit preload region stripped-env tools stress"
# ARM64_QUICK=1 and no suite named: the CI set.
QUICK_SET="floor flags hooks unit preload region stripped-env hami stress"
default=$ALL
[ -n "$quick" ] && default=$QUICK_SET
suites=${*:-${ARM64_SUITES:-$default}}
probe_emulation > "$LOGDIR/probe.log" 2>&1
account "emulation probe" $? "$LOGDIR/probe.log"
grep '^note' "$LOGDIR/probe.log"
for s in $suites; do
  if [[ " $ALL hami " != *" $s "* ]]; then
    echo "FAIL unknown suite $s (known: $ALL hami)"; fail=$((fail + 1)); continue
  fi
  "suite_$s"
done
echo "libvgpu-arm64: $pass passed, $fail failed"
[ "$fail" = 0 ]

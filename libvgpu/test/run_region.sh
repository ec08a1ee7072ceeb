#!/usr/bin/env bash
# Degraded mode through the real preload hooks (fake driver): for every way the shared region can
# be unusable, the 64 MiB limit still holds container-wide, exactly one error line names the cause
# and what the process does, the side file <cache>.degraded records it where the directory allows,
# and nothing at the path is followed or changed. What the process does (issue 35, route 12):
#   shared   the path is spoiled (symlink, FIFO, directory): every process of the container uses
#            the alternate file beside it, one limit for all (region_fail `degraded`, `shared_pair`);
#   refused  no shared file possible (the alternate spoiled too, a full slot table, a full disk):
#            every allocation on a limited device is refused (region_fail `refused`);
#   local    the directory is missing (no file can be shared): counted per process (`degraded`).
# Also: an SM limit in a process-local region (the limiter throttles), and a full disk at creation
# (a full tmpfs in a private mount namespace: root, or an unprivileged user namespace; if neither
# is possible the case FAILS, it is not skipped).
# Usage: BUILD=build test/run_region.sh    Last line: "region: N passed, M failed".
# REGION_FAIL_NO_FORK_CHILD=1: region_fail leaves out its fork() children (test/arm64/run.sh: qemu-user).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LIB=${VGPU_LIB:-$PWD/$BUILD/libvgpu.so}
APP=$PWD/$BUILD/preload/region_fail
TMP=$(mktemp -d /tmp/libvgpu-region.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
. test/lib.sh
preload_env "$LIB" # PRELOAD: LIB, after the sanitizer runtimes in the sanitizer build
pass=0
fail=0
check() { # description, then a command that must succeed
  local what=$1
  shift
  if "$@"; then pass=$((pass + 1)); echo "ok   $what"; else fail=$((fail + 1)); echo "FAIL $what"; fi
}

app() { # cache-path case -> stderr in $TMP/err, exit status returned
  env -i PATH="$PATH" ASAN_OPTIONS="$ASAN_OPTIONS" LD_LIBRARY_PATH="$PWD/$BUILD/fake" \
    LD_PRELOAD="$PRELOAD" CUDA_DEVICE_MEMORY_SHARED_CACHE="$1" CUDA_DEVICE_MEMORY_LIMIT=64m \
    FAKE_NVML_CONFIG=/nonexistent ${REGION_FAIL_NO_FORK_CHILD:+REGION_FAIL_NO_FORK_CHILD=1} timeout 60 "$APP" "$2" 2> "$TMP/err"
}

one_cause_line() { # cause [outcome regex]: exactly one DEGRADED line, naming it, the outcome and a fix
  local n
  n=$(grep -c 'DEGRADED: ' "$TMP/err")
  [ "$n" = 1 ] && grep -q "HAMI-core Error.*unusable ($1: .*DEGRADED: ${2:-}.*fix: " "$TMP/err" ||
    { echo "  expected one line for cause $1 (${2:-any}), got $n:"; sed 's/^/  | /' "$TMP/err" | head -5; false; }
}
SHARED='using .*-libvgpu-v1.2.cache instead, shared by the container'
REFUSED='every allocation on a device with a memory limit is refused'
LOCAL='limits are enforced for this process and its children only'

side_file() { # cache-path cause
  grep -q "^libvgpu-degraded v1 cause=$2 pid=[0-9]* time=[0-9]*$" "$1.degraded" ||
    { echo "  side file $1.degraded: $(head -c 200 "$1.degraded" 2>&1)"; false; }
}

degraded_case() { # name cache-path cause outcome-regex [region_fail case]
  local rc=0 what=${5:-degraded}
  app "$2" "$what" || rc=$?
  check "$1: limit held ($what, exit $rc)" [ "$rc" = 0 ]
  check "$1: one error line names the cause ($3), what happens and the fix" one_cause_line "$3" "$4"
}
shared_pair() { # name cache-path: a second program shares the alternate file's limit
  local rc=0
  app "$2" shared_pair || rc=$?
  check "$1: a second process shares one limit with the first (exit $rc)" [ "$rc" = 0 ]
  [ "$rc" = 0 ] || sed 's/^/  | /' "$TMP/err" | tail -5
}

# 1. The cache directory is not mounted.
degraded_case dir-missing "$TMP/absent/vgpu.cache" dir-missing "$LOCAL"
check "dir-missing: nothing created" [ ! -e "$TMP/absent" ]

# 2. Something at the path that cannot be opened read-write (a directory; as non-root, also a
#    file without write permission).
mkdir -p "$TMP/isdir/vgpu.cache"
degraded_case unopenable "$TMP/isdir/vgpu.cache" unopenable "$SHARED"
shared_pair unopenable "$TMP/isdir/vgpu.cache"
check "unopenable: side file" side_file "$TMP/isdir/vgpu.cache" unopenable

# 3. A symlink at the path (a tenant pointing the region at another file): never followed.
mkdir -p "$TMP/link" && echo "victim" > "$TMP/link/target"
ln -s "$TMP/link/target" "$TMP/link/vgpu.cache"
degraded_case symlink "$TMP/link/vgpu.cache" symlink "$SHARED"
shared_pair symlink "$TMP/link/vgpu.cache"
check "symlink: the alternate file is a region" [ -f "$TMP/link/vgpu-libvgpu-v1.2.cache" ] && [ ! -L "$TMP/link/vgpu-libvgpu-v1.2.cache" ]
check "symlink: target untouched" [ "$(cat "$TMP/link/target")" = victim ]
check "symlink: still a link" [ -L "$TMP/link/vgpu.cache" ]
check "symlink: side file" side_file "$TMP/link/vgpu.cache" symlink

# 3b. The alternate file spoiled too: no region to share, every allocation refused (fail safe).
mkdir -p "$TMP/link2" && ln -s "$TMP/link/target" "$TMP/link2/vgpu.cache" && ln -s "$TMP/link/target" "$TMP/link2/vgpu-libvgpu-v1.2.cache"
degraded_case symlink-both "$TMP/link2/vgpu.cache" symlink "$REFUSED" refused
check "symlink-both: target untouched" [ "$(cat "$TMP/link/target")" = victim ]

# 4. A FIFO at the path: never blocks, never read.
mkdir -p "$TMP/fifo" && mkfifo "$TMP/fifo/vgpu.cache"
degraded_case fifo "$TMP/fifo/vgpu.cache" not-regular "$SHARED"
shared_pair fifo "$TMP/fifo/vgpu.cache"
check "fifo: still a FIFO" [ -p "$TMP/fifo/vgpu.cache" ]
check "fifo: side file" side_file "$TMP/fifo/vgpu.cache" not-regular

# 5. A full slot table: 1024 live processes (pid 1 exists in every pid namespace).
mkdir -p "$TMP/full"
full=$TMP/full/vgpu.cache
app "$full" after_resume || echo "  creating the region failed"
python3 - "$full" <<'PY'
import struct, sys
PROCS, SLOT, N = 1856, 1960, 1024
with open(sys.argv[1], "r+b") as f:
    for i in range(N):
        f.seek(PROCS + SLOT * i); f.write(struct.pack("<ii", 1, 0))      # pid 1, hostpid 0
        f.seek(PROCS + SLOT * i + 1928); f.write(struct.pack("<i", 1))   # status running
    f.seek(2008896); f.write(struct.pack("<i", N))                       # proc_num
PY
slots() { python3 -c "import hashlib, sys; d=open(sys.argv[1],'rb').read(); print(hashlib.sha256(d[1856:2008900]).hexdigest())" "$1"; }
before=$(slots "$full")
degraded_case slot-table-full "$full" slot-table-full "$REFUSED" refused
check "slot-table-full: shared slots untouched" [ "$before" = "$(slots "$full")" ]
check "slot-table-full: side file" side_file "$full" slot-table-full

# 5b. An SM limit in degraded mode: the process-local limiter still throttles (the fake driver's
#     kernels take 1 ms on a serial engine; test/preload/sm_throttle.c `degraded` compares the
#     limited rate with the solo rate of the same run, toggling the local region's sm_limit).
#     Two paths: the region cannot exist (a missing directory: limits from the environment), and
#     the region is attached but its slot table is full (limits from the region, set to 30 % there).
sm_degraded_case() { # name cache-path cause outcome-regex
  local rc=0
  env -i PATH="$PATH" ASAN_OPTIONS="$ASAN_OPTIONS" LD_LIBRARY_PATH="$PWD/$BUILD/fake" \
    LD_PRELOAD="$PRELOAD" CUDA_DEVICE_MEMORY_SHARED_CACHE="$2" \
    CUDA_DEVICE_SM_LIMIT=30 FAKE_CUDA_KERNEL_US=1000 FAKE_NVML_CONFIG=/nonexistent \
    timeout 60 "$PWD/$BUILD/preload/sm_throttle" degraded 2> "$TMP/err" || rc=$?
  check "sm-limit degraded ($1): the limiter throttles to 30 % (exit $rc)" [ "$rc" = 0 ]
  [ "$rc" = 0 ] || sed 's/^/  | /' "$TMP/err" | tail -5
  check "sm-limit degraded ($1): one error line names the cause and the fix" one_cause_line "$3" "$4"
}
sm_degraded_case dir-missing "$TMP/smabsent/vgpu.cache" dir-missing "$LOCAL"
python3 - "$full" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(1728); f.write(struct.pack("<Q", 30))                         # sm_limit[0] = 30 %
PY
sm_degraded_case slot-table-full "$full" slot-table-full "$REFUSED" refused
check "sm-limit degraded (slot-table-full): shared slots untouched" [ "$before" = "$(slots "$full")" ]

# (The stderr of the full-disk runs goes outside the full filesystem.)
# 6. A full disk when the region is created: its blocks cannot be reserved. Without the
#    reservation the file is sparse and the first store into it raises SIGBUS in the application.
if [ "$(id -u)" = 0 ]; then NS=(unshare -m); else NS=(unshare -rm); fi
if ! "${NS[@]}" true 2>/dev/null; then
  fail=$((fail + 1)); echo "FAIL full-disk: cannot create a mount namespace (${NS[*]}); run as root or allow user namespaces"
else
  mkdir -p "$TMP/disk"
  out=$("${NS[@]}" env BUILD="$BUILD" PRELOAD="$PRELOAD" APP="$APP" ASAN_OPTIONS="$ASAN_OPTIONS" \
        FAKE="$PWD/$BUILD/fake" D="$TMP/disk" E="$TMP" bash -s <<'EOS'
set -u
mount --make-rprivate / 2>/dev/null
mount -t tmpfs -o size=4m tmpfs "$D" || { echo "mount failed"; exit 0; }
run() { env -i PATH="$PATH" ASAN_OPTIONS="$ASAN_OPTIONS" LD_LIBRARY_PATH="$FAKE" LD_PRELOAD="$PRELOAD" \
  CUDA_DEVICE_MEMORY_SHARED_CACHE="$D/vgpu.cache" CUDA_DEVICE_MEMORY_LIMIT=64m \
  FAKE_NVML_CONFIG=/nonexistent ${REGION_FAIL_NO_FORK_CHILD:+REGION_FAIL_NO_FORK_CHILD=1} timeout 60 "$APP" "$1" 2> "$E/err.$1"; }
dd if=/dev/zero of="$D/filler" bs=4096 2>/dev/null
run refused; echo "full_rc=$?"
echo "lines=$(grep -c 'unusable (no-space: .*DEGRADED: every allocation .* is refused.*fix: ' "$E/err.refused")"
echo "size_full=$(stat -c %s "$D/vgpu.cache" 2>/dev/null || echo none)"
rm -f "$D/filler"
run after_resume; echo "free_rc=$?"
echo "size_free=$(stat -c %s "$D/vgpu.cache")"
echo "degraded_after_free=$(grep -c DEGRADED "$E/err.after_resume")"
sed 's/^/  | /' "$E/err.refused" | head -3
umount "$D"
EOS
)
  get() { sed -n "s/^$1=//p" <<< "$out"; }
  check "full-disk: every allocation refused (fail safe), no SIGBUS (exit $(get full_rc))" [ "$(get full_rc)" = 0 ]
  check "full-disk: one error line names no-space, the refusal and the fix" [ "$(get lines)" = 1 ]
  check "full-disk: no sparse region left behind (size $(get size_full))" [ "$(get size_full)" = 0 ]
  check "full-disk: space back, the next process shares the region again (exit $(get free_rc))" \
    [ "$(get free_rc)" = 0 ] && [ "$(get degraded_after_free)" = 0 ]
  check "full-disk: region created with its full size ($(get size_free))" [ "$(get size_free)" -gt 2008952 ]
  [ "$(get full_rc)" = 0 ] || grep '^  |' <<< "$out"
fi

echo "region: $pass passed, $fail failed"
[ "$fail" = 0 ]

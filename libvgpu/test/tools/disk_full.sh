#!/usr/bin/env bash
# shrreg-tool when a page of the region cannot be allocated: a HAMi-core-written region on a full
# 4 MiB tmpfs in a private mount namespace, with a hole punched where --cleanup writes (slot 1
# reaches into the file's second page). Expected: exit 9, a message that names the cause (not
# "the file shrank"), the slot-table lock released, and the same cleanup succeeding once space is
# freed. Needs root, unshare -m and fallocate: without them it reports a failure (a test that could
# not run did not pass).
# Usage: test/tools/disk_full.sh SHRREG_TOOL    Last line: "disk-full: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
tool=$(realpath "$1")
fixture=$(realpath ../testdata/hami-core/live-2proc-2dev.cache.gz)
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null || ! command -v fallocate >/dev/null; then
  echo "FAIL: cannot run: needs root, unshare -m and fallocate"
  echo "disk-full: 0 passed, 1 failed"
  exit 1
fi
exec unshare -m bash -s "$tool" "$fixture" <<'EOS'
set -uo pipefail
tool=$1 fixture=$2
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi; }
mnt=$(mktemp -d)
mount --make-rprivate / 2>/dev/null
mount -t tmpfs -o size=4m tmpfs "$mnt" || { echo "disk-full: 0 passed, 1 failed"; exit 1; }
region=$mnt/r.cache
empty_proc=$mnt/proc && mkdir "$empty_proc"
gzip -dc "$fixture" > "$region"
fallocate --punch-hole --offset 4096 --length 4096 "$region"
# Fill the filesystem: the hole's page can no longer be allocated.
dd if=/dev/zero of="$mnt/filler" bs=4096 2>/dev/null
out=$("$tool" --file "$region" --cleanup --proc-root "$empty_proc" 2>&1)
rc=$?
check "exit 9 on a page that cannot be written (got $rc: $out)" '[ "$rc" = 9 ]'
check "message names the cause: $out" 'grep -q "could not be read or written" <<<"$out"'
check "message does not blame truncation: $out" '! grep -q "shrank" <<<"$out"'
check "message says the lock was released: $out" 'grep -q "region lock was released" <<<"$out"'
# Reading the hole faults too while the filesystem is full: look at the lock once space is back.
rm -f "$mnt/filler"
json=$("$tool" --file "$region" --inspect --json --proc-root "$empty_proc" 2>/dev/null)
check "lock unlocked afterwards: $(grep -o '"lock":{[^}]*}' <<<"$json")" \
  'python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if d[\"lock\"][\"state\"]==\"unlocked\" and d[\"lock\"][\"semaphore_value\"]==1 else 1)" <<<"$json" 2>/dev/null'
out=$("$tool" --file "$region" --cleanup --proc-root "$empty_proc" 2>&1)
rc=$?
check "cleanup succeeds once space is free (got $rc: $out)" '[ "$rc" = 0 ] || [ "$rc" = 1 ]'
json=$("$tool" --file "$region" --inspect --json --proc-root "$empty_proc" 2>/dev/null)
check "dead slots dropped" 'python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if not d[\"processes\"] else 1)" <<<"$json"'
umount "$mnt"
echo "disk-full: $pass passed, $fail failed"
[ "$fail" = 0 ]
EOS

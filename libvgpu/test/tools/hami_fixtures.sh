#!/usr/bin/env bash
# shrreg-tool --inspect --json --file on region files written by HAMi-core's own code
# (../testdata/hami-core, see its README.md), compared field by field with that folder's
# manifest.json. Each fixture runs twice: with a proc root where every live slot's pid exists
# (usage counts as used_bytes) and with an empty one (the same usage moves to dead_process_bytes).
# Usage: test/tools/hami_fixtures.sh TOOL   Last line: "hami-core fixtures: N passed, M failed".
set -uo pipefail
TOOL=${1:?usage: hami_fixtures.sh SHRREG_TOOL}
HERE="$(cd "$(dirname "$0")" && pwd)"
DATA="$HERE/../../../testdata/hami-core"
if [ ! -f "$DATA/manifest.json" ]; then
  echo "hami-core fixtures: 0 passed, 1 failed ($DATA/manifest.json missing)"
  exit 1
fi
WORK=$(mktemp -d /tmp/hami-fixtures.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
python3 - "$TOOL" "$DATA" "$WORK" <<'PY'
import gzip, json, os, subprocess, sys
tool, data, work = sys.argv[1:4]
manifest = json.load(open(os.path.join(data, "manifest.json")))
passed = failed = 0

def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL", what)

for fx in manifest["fixtures"]:
    name = fx["file"]
    path = os.path.join(work, "hami.cache")
    with gzip.open(os.path.join(data, name)) as src, open(path, "wb") as dst:
        dst.write(src.read())
    live = [s for s in fx["slots"] if s["pid"] != 0 and s["status"] != 0]
    for mode in ("alive", "gone"):
        proc = os.path.join(work, "proc-" + mode)
        os.makedirs(proc, exist_ok=True)
        if mode == "alive":
            for s in live:
                os.makedirs(os.path.join(proc, str(s["pid"])), exist_ok=True)
                with open(os.path.join(proc, str(s["pid"]), "stat"), "w") as f:
                    f.write("%d (app) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 0 0\n" % s["pid"])
        tag = "%s [%s]" % (name, mode)
        r = subprocess.run([tool, "--file", path, "--proc-root", proc, "--json", "--inspect"],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode in (0, 1), "%s exit %d: %s" % (tag, r.returncode, r.stderr.strip()))
        try:
            d = json.loads(r.stdout)
        except ValueError:
            check(False, "%s output is not JSON: %r" % (tag, r.stdout[:200]))
            continue
        check(d["file_size"] == fx["file_size"], tag + " file_size")
        check(d["layout"] == fx["layout"], tag + " layout " + str(d["layout"]))
        check(d["version"] == {"major": fx["major_version"], "minor": fx["minor_version"]},
              tag + " version " + str(d["version"]))
        for k in ("owner_pid", "device_num", "proc_num", "utilization_switch", "recent_kernel",
                  "priority", "last_kernel_time"):
            check(d[k] == fx[k], "%s %s %r != %r" % (tag, k, d[k], fx[k]))
        check(d["extension"] is None, tag + " extension (HAMi writes none)")
        check(len(d["devices"]) == fx["device_num"], tag + " device count")
        for want, got in zip(fx["devices"], d["devices"]):
            for k in ("index", "uuid", "memory_limit_bytes", "sm_limit_percent"):
                check(got[k] == want[k], "%s device %d %s %r != %r" % (tag, want["index"], k, got[k], want[k]))
            i = want["index"]
            total = fx["used_bytes_live"][i]
            used, dead = (total, 0) if mode == "alive" else (0, total)
            check(got["used_bytes"] == used, "%s device %d used_bytes %r != %r" % (tag, i, got["used_bytes"], used))
            check(got["dead_process_bytes"] == dead,
                  "%s device %d dead_process_bytes %r != %r" % (tag, i, got["dead_process_bytes"], dead))
            in_use = [s for s in live if any(s["devices"][i][k] for k in
                      ("total_bytes", "monitor_used_bytes", "sm_util_percent"))]
            check(got["tasks"] == len(in_use), "%s device %d tasks %r != %r" % (tag, i, got["tasks"], len(in_use)))
        check(len(d["processes"]) == len(live),
              "%s process count %d != %d" % (tag, len(d["processes"]), len(live)))
        for want, got in zip(live, d["processes"]):
            for k in ("slot", "pid", "hostpid", "status"):
                check(got[k] == want[k], "%s pid %d %s %r != %r" % (tag, want["pid"], k, got[k], want[k]))
            check(got["liveness"] == mode, "%s pid %d liveness %s" % (tag, want["pid"], got["liveness"]))
            check(got["torn"] is False, "%s pid %d torn" % (tag, want["pid"]))
            for wd, gd in zip(want["devices"], got["devices"]):
                for gk, wk in (("index", "index"), ("used_bytes", "total_bytes"),
                               ("context_bytes", "context_bytes"), ("module_bytes", "module_bytes"),
                               ("data_bytes", "data_bytes"), ("monitor_used_bytes", "monitor_used_bytes"),
                               ("sm_util", "sm_util_percent")):
                    check(gd[gk] == wd[wk], "%s pid %d device %d %s %r != %r"
                          % (tag, want["pid"], wd["index"], gk, gd[gk], wd[wk]))
            check(len(got["devices"]) == len(want["devices"]), "%s pid %d device list" % (tag, want["pid"]))
print("hami-core fixtures: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PY

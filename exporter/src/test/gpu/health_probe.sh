#!/usr/bin/env bash
# health_probe.sh — compares the exporter's device health series (docs/device-health.md) with
# nvidia-smi --query-gpu on a real GPU. Not run in CI (no GPU there).
#
# Starts the exporter on the host against real NVML (no pods needed), waits until it exports
# vgpu_gpu_power_watts, then ROUNDS times scrapes /metrics and runs nvidia-smi --query-gpu right
# after, and checks per physical GPU:
#   - power: |exporter W - nvidia-smi power.draw W| <= max(15 W, 10 %) (two reads a few ms apart;
#     nvidia-smi may average differently);
#   - temperature: within 2 °C;
#   - ECC volatile/aggregate corrected/uncorrected counts and remapped rows (correctable,
#     uncorrectable, pending, failure): exactly equal where nvidia-smi reports a number; where it
#     says [N/A] / [Not Supported], the exporter must report the field in
#     vgpu_gpu_health_unavailable instead of a value;
#   - clock event reasons: the exporter's 1-series equal nvidia-smi's active mask bits at least
#     once over the rounds (the mask moves, e.g. gpu_idle, between the two reads);
#   - XID events: registered (no vgpu_gpu_health_unavailable{field="xid_events"}), or the reason
#     is printed. No XID is injected.
# Prints one line per check and a summary; exit 0 = every check passed.
#
# Run on the GPU machine from the repository root with a Java 25 runtime and the exporter built
# (exporter/target/exporter.jar and exporter/target/lib/, e.g. `./mvnw -pl exporter -am install
# -DskipTests`):
#   JAVA_HOME=/path/to/java25 OUT=$OUT exporter/src/test/gpu/health_probe.sh
# Knobs (env): ROUNDS (default 5), GAP (s between rounds, 2), PORT (19396). Results in $OUT (or a
# temp dir): results.txt, scrape-*.prom, smi-*.csv, exporter.log.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
ROUNDS="${ROUNDS:-5}"
GAP="${GAP:-2}"
PORT="${PORT:-19396}"
work="$(mktemp -d /tmp/vgpu-health-probe.XXXXXX)"
out="${OUT:-$work/out}"
mkdir -p "$out" "$work/containers"
. "$repo/scripts/lib.sh"
need_jdk25 # JAVA_HOME, or the machine's Temurin 25
[ -f "${VGPU_EXPORTER_JAR:-$repo/exporter/target/exporter.jar}" ] || { echo "exporter/target/exporter.jar missing: build the exporter first" >&2; exit 2; }
command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found" >&2; exit 2; }

# Query only the fields this nvidia-smi knows (clocks_event_reasons.* is R535 on; before, the
# same mask is clocks_throttle_reasons.active).
known="$(nvidia-smi --help-query-gpu)"
has() { grep -q "\"$1\"" <<<"$known"; }
clocks=clocks_event_reasons.active
has "$clocks" || clocks=clocks_throttle_reasons.active
fields=(uuid power.draw temperature.gpu "$clocks"
  ecc.errors.corrected.volatile.total ecc.errors.uncorrected.volatile.total
  ecc.errors.corrected.aggregate.total ecc.errors.uncorrected.aggregate.total
  remapped_rows.correctable remapped_rows.uncorrectable remapped_rows.pending remapped_rows.failure)
query=()
for f in "${fields[@]}"; do
  if has "$f"; then query+=("$f"); else echo "nvidia-smi has no field $f: not compared" | tee -a "$out/results.txt"; fi
done
query_csv="$(IFS=,; echo "${query[*]}")"

exporter_pid=
trap '[ -n "$exporter_pid" ] && kill "$exporter_pid" 2>/dev/null; true' EXIT
JAVA_HOME="$JAVA_HOME" "$repo/bin/vgpu-exporter" serve \
  --path.cache-root="$work/containers" --kubernetes=false --node-name=gpu-health-probe \
  --nvml.library=libnvidia-ml.so.1 \
  --web.listen-address=127.0.0.1 --web.listen-port="$PORT" >"$out/exporter.log" 2>&1 &
exporter_pid=$!

fetch() {
  python3 - "$1" <<'PY'
import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())
PY
}
for _ in $(seq 120); do
  fetch "http://127.0.0.1:$PORT/metrics" 2>/dev/null | grep -q '^vgpu_gpu_\(power_watts\|health_unavailable\)' && break
  sleep 0.5
done
for i in $(seq "$ROUNDS"); do
  fetch "http://127.0.0.1:$PORT/metrics" >"$out/scrape-$i.prom"
  nvidia-smi --query-gpu="$query_csv" --format=csv,noheader,nounits >"$out/smi-$i.csv"
  sleep "$GAP"
done
kill "$exporter_pid" 2>/dev/null || true
exporter_pid=

python3 - "$out" "$ROUNDS" "$query_csv" <<'PY' | tee -a "$out/results.txt"
import re, sys
out, rounds, fields = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
LINE = re.compile(r'^([a-z_:]+)\{([^}]*)\} (\S+)$')
BITS = {"gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
        "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
        "hw_power_brake_slowdown": 0x80, "display_clock_setting": 0x100}

def scrape(i):
    series = {}
    for line in open(f"{out}/scrape-{i}.prom"):
        m = LINE.match(line.strip())
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            series.setdefault(labels.get("device_uuid"), []).append((m.group(1), labels, float(m.group(3))))
    return series

def value(rows, name, **want):
    for n, l, v in rows:
        if n == name and all(l.get(k) == x for k, x in want.items()):
            return v
    return None

def unavailable(rows, field):
    return value(rows, "vgpu_gpu_health_unavailable", field=field) is not None

def number(s):
    s = s.strip()
    if s.startswith("0x"):
        return int(s, 16)
    try:
        return float(s)
    except ValueError:
        return None  # [N/A], [Not Supported], Pending/No as words

def flag(s):
    s = s.strip().lower()
    return {"yes": 1.0, "no": 0.0}.get(s, number(s))

failures, checks = [], 0
def check(ok, what):
    global checks
    checks += 1
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)

ECC = {"ecc.errors.corrected.volatile.total": ("vgpu_gpu_ecc_volatile_errors_total", "corrected", "ecc_volatile"),
       "ecc.errors.uncorrected.volatile.total": ("vgpu_gpu_ecc_volatile_errors_total", "uncorrected", "ecc_volatile"),
       "ecc.errors.corrected.aggregate.total": ("vgpu_gpu_ecc_aggregate_errors_total", "corrected", "ecc_aggregate"),
       "ecc.errors.uncorrected.aggregate.total": ("vgpu_gpu_ecc_aggregate_errors_total", "uncorrected", "ecc_aggregate")}
ROWS = {"remapped_rows.correctable": ("vgpu_gpu_remapped_rows", {"cause": "correctable"}),
        "remapped_rows.uncorrectable": ("vgpu_gpu_remapped_rows", {"cause": "uncorrectable"}),
        "remapped_rows.pending": ("vgpu_gpu_row_remap_pending", {}),
        "remapped_rows.failure": ("vgpu_gpu_row_remap_failure", {})}
clock_match = {}
for i in range(1, rounds + 1):
    exp = scrape(i)
    for line in open(f"{out}/smi-{i}.csv"):
        cols = dict(zip(fields, [c.strip() for c in line.split(",")]))
        uuid = cols["uuid"]
        rows = exp.get(uuid)
        if rows is None:
            check(False, f"round {i} {uuid}: the exporter has no series for this GPU")
            continue
        p, w = value(rows, "vgpu_gpu_power_watts"), number(cols.get("power.draw", "x"))
        if w is not None:
            check(p is not None and abs(p - w) <= max(15.0, 0.10 * w), f"round {i} {uuid}: power exporter {p} W, nvidia-smi {w} W")
        t, c = value(rows, "vgpu_gpu_temperature_celsius"), number(cols.get("temperature.gpu", "x"))
        if c is not None:
            check(t is not None and abs(t - c) <= 2, f"round {i} {uuid}: temperature exporter {t} C, nvidia-smi {c} C")
        for f, (name, err, field) in ECC.items():
            if f not in cols:
                continue
            want, got = number(cols[f]), value(rows, name, error=err)
            if want is None:
                check(got is None and unavailable(rows, field), f"round {i} {uuid}: {f} is '{cols[f]}' in nvidia-smi; exporter absent with a reason")
            else:
                check(got == want, f"round {i} {uuid}: {f} exporter {got}, nvidia-smi {want}")
        for f, (name, want_labels) in ROWS.items():
            if f not in cols:
                continue
            want, got = flag(cols[f]), value(rows, name, **want_labels)
            if want is None:
                check(got is None and unavailable(rows, "remapped_rows"), f"round {i} {uuid}: {f} is '{cols[f]}' in nvidia-smi; exporter absent with a reason")
            else:
                check(got == want, f"round {i} {uuid}: {f} exporter {got}, nvidia-smi {want}")
        mask_col = next((k for k in cols if k.startswith("clocks_")), None)
        mask = number(cols[mask_col]) if mask_col else None
        if mask is not None:
            mine = sum(b for r, b in BITS.items() if value(rows, "vgpu_gpu_clock_event_reasons", reason=r) == 1.0)
            clock_match.setdefault(uuid, []).append((int(mask) & 0x1FF, mine))
        if i == 1:
            x = value(rows, "vgpu_gpu_health_unavailable", field="xid_events")
            reason = next((l.get("reason") for n, l, v in rows if n == "vgpu_gpu_health_unavailable" and l.get("field") == "xid_events"), None)
            check(x is None, f"{uuid}: XID events registered" + ("" if x is None else f" (unavailable: {reason})"))
for uuid, pairs in clock_match.items():
    check(any(a == b for a, b in pairs), f"{uuid}: clock event reasons (nvidia-smi mask, exporter mask) per round {[(hex(a), hex(b)) for a, b in pairs]}")
print(f"{checks - len(failures)}/{checks} checks passed")
sys.exit(1 if failures else 0)
PY

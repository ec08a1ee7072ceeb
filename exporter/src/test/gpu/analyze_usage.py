#!/usr/bin/env python3
"""analyze_usage.py <out-dir> — the checks of usage_proof.sh (see there). Exit 0 when all pass.

The reference integral of a pid's NVML samples: each sample (read once, by the probe's own cursor)
stands for sm/100 x the time since the pid's previous sample when that is one sampling period P
(up to 1.5 P: NVML's ticks jitter), else x P; P is the median gap between the saturating pod's
consecutive samples. The exporter's counters at a scrape
hold what its last attribution pass (every 2 s) drained, as of
vgpu_exporter_usage_accounted_timestamp_seconds: the reference window is the two scrapes' pass
times (the results with that window shifted by -0.2 s and +0.2 s, one sample collection, are
printed beside it).
"""
import re
import sys
from bisect import bisect_left
from collections import defaultdict

out = sys.argv[1]
PHI = 0.0
LINE = re.compile(r'^([a-z_]+)\{([^}]*)\} (\S+)$')


def parse_prom(path):
    series = []
    for line in open(path):
        m = LINE.match(line.strip())
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            series.append((m.group(1), labels, float(m.group(3))))
    return series


containers = []  # name, uid, hostpid
for line in open(f"{out}/containers.txt"):
    name, uid, pid, _ = line.split()
    containers.append((name, uid, int(pid)))

scrapes = []  # (pass time s, series)
for line in open(f"{out}/scrapes.txt"):
    i, t = line.split()
    series = parse_prom(f"{out}/scrape-{i}.prom")
    at = [v for n, _, v in series if n == "vgpu_exporter_usage_accounted_timestamp_seconds"]
    scrapes.append((at[0] if at else int(t) / 1e6, series))

samples = defaultdict(dict)  # pid -> ts -> sm (deduplicated)
energy = defaultdict(list)  # uuid -> [(t s, mJ)]
for line in open(f"{out}/probe.log"):
    f = line.split()
    if f[0] == "S":
        samples[int(f[2])][int(f[3])] = int(f[4])
    elif f[0] == "E":
        energy[f[2]].append((int(f[1]) / 1e6, int(f[3])))

busy_pid = next(pid for name, _, pid in containers if name == "busy")
ts = sorted(samples[busy_pid])
gaps = sorted(b - a for a, b in zip(ts, ts[1:]) if b - a > 50_000)
period = gaps[len(gaps) // 2] if gaps else 200_000
print(f"NVML sampling period (median gap of the busy pod's samples): {period / 1000:.1f} ms")


def integral(pid, lo, hi):
    total, prev = 0.0, None
    for t in sorted(samples[pid]):
        gap = None if prev is None else t - prev
        covered = period if gap is None or gap > 1.5 * period else gap  # one period, else P
        if lo < t / 1e6 <= hi:
            total += samples[pid][t] / 100 * covered / 1e6
        prev = t
    return total


def value(series, name, **want):
    return sum(v for n, l, v in series if n == name and all(l.get(k) == x for k, x in want.items()))


def energy_at(uuid, t):
    readings = energy[uuid]
    i = bisect_left(readings, (t, -1))
    if i == 0 or i >= len(readings):
        return None
    (t0, e0), (t1, e1) = readings[i - 1], readings[i]
    return e0 + (e1 - e0) * (t - t0) / (t1 - t0)


failures = []
(ta, a), (tb, b) = scrapes[0], scrapes[-1]
print(f"window: {tb - ta:.1f} s between the accounting passes of the first and last scrape")
for name, uid, pid in containers:
    got = value(b, "vgpu_container_sm_busy_seconds_total", pod_uid=uid) - value(
        a, "vgpu_container_sm_busy_seconds_total", pod_uid=uid)
    ref = integral(pid, ta - PHI, tb - PHI)
    alt = [integral(pid, ta - p, tb - p) for p in (0.2, -0.2)]
    tol = 0.5 if name == "idle" else 0.02 * ref
    ok = abs(got - ref) <= tol
    print(f"{name:7s} sm_busy increase {got:9.3f} s  NVML integral {ref:9.3f} s "
          f"(-0.2 s: {alt[0]:.3f}, +0.2 s: {alt[1]:.3f})  diff {got - ref:+.3f} s "
          f"({(got - ref) / ref * 100 if ref else 0:+.2f} %)  {'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append(f"{name}: sm busy {got:.3f} vs {ref:.3f}")

uuids = sorted({l["device_uuid"] for n, l, _ in b if n == "vgpu_gpu_energy_joules_total"})
for uuid in uuids:
    dev = value(b, "vgpu_gpu_energy_joules_total", device_uuid=uuid) - value(
        a, "vgpu_gpu_energy_joules_total", device_uuid=uuid)
    pods = sum(value(b, "vgpu_container_energy_joules_total", device_uuid=uuid, pod_uid=u)
               - value(a, "vgpu_container_energy_joules_total", device_uuid=uuid, pod_uid=u)
               for _, u, _ in containers)
    unat = value(b, "vgpu_gpu_unattributed_energy_joules_total", device_uuid=uuid) - value(
        a, "vgpu_gpu_unattributed_energy_joules_total", device_uuid=uuid)
    e0, e1 = energy_at(uuid, ta - PHI), energy_at(uuid, tb - PHI)
    if e0 is None or e1 is None:
        failures.append(f"{uuid}: the probe has no energy readings around the window")
        continue
    counter = (e1 - e0) / 1000
    print(f"{uuid}: device energy increase {dev:.1f} J, GPU counter delta {counter:.1f} J "
          f"({(dev - counter) / counter * 100:+.2f} %); pods {pods:.1f} J + unattributed "
          f"{unat:.1f} J = {pods + unat:.1f} J ({(pods + unat - counter) / counter * 100:+.2f} %); "
          f"mean power {counter / (tb - ta):.1f} W")
    for name, uid, _ in containers:
        e = value(b, "vgpu_container_energy_joules_total", device_uuid=uuid, pod_uid=uid) - value(
            a, "vgpu_container_energy_joules_total", device_uuid=uuid, pod_uid=uid)
        print(f"    {name:7s} {e:9.1f} J")
    if abs(dev - counter) > 0.01 * counter:
        failures.append(f"{uuid}: device energy {dev:.1f} J vs counter {counter:.1f} J")
    if abs(pods + unat - counter) > 0.01 * counter:
        failures.append(f"{uuid}: pods + unattributed {pods + unat:.1f} J vs counter {counter:.1f} J")

worst = 0.0
for t, s in scrapes:
    for uuid in uuids:
        dev = value(s, "vgpu_gpu_energy_joules_total", device_uuid=uuid)
        parts = (value(s, "vgpu_container_energy_joules_total", device_uuid=uuid)
                 + value(s, "vgpu_gpu_unattributed_energy_joules_total", device_uuid=uuid)
                 + value(s, "vgpu_gpu_expired_container_energy_joules_total", device_uuid=uuid))
        worst = max(worst, abs(parts - dev))
print(f"conservation over {len(scrapes)} scrapes: worst |containers + unattributed + expired - device| "
      f"= {worst:.6f} J")
if worst > 0.001:
    failures.append(f"conservation off by {worst} J")

print("RESULT:", "PASS" if not failures else "FAIL " + "; ".join(failures))
sys.exit(1 if failures else 0)

#!/usr/bin/env python3
"""Checks the sharing proof's scrapes against NVML read directly (nvml_probe's log).

analyze_sharing.py <out-dir>

Reads <out-dir>/containers.txt ("name pod_uid host_pid container container_id busy_pct
alloc_bytes" per line), scrapes.txt ("index epoch_us" per line), scrape-<i>.prom and probe.log.
Per container it prints the exporter's SM mean (the mean of its windowed
vgpu_container_sm_utilization_ratio over the scrapes after the first: consecutive windows that
together span the measurement) and the probe's over the same span (the sum of the pid's NVML
samples divided by the number of sampling periods in the span: periods without a sample count as
idle, as the exporter counts them), and the memory of both. Exits 1 unless every container's SM
means are within 2 pp, every memory figure is exact, and each container shows with its sharing kind.
"""
import sys
from collections import defaultdict

from analyze import parse_prom, value  # the attribution proof's exposition reader

SM_TOLERANCE = 0.02  # 2 percentage points
SHARING = {'whole': 'whole', 'vgpu': 'vgpu'}
# The exporter's per-container memory from NVML: for a container without a region the container
# family itself; for a region container its NVML family (its region's figure is printed beside).
NVML_MEMORY = {'whole': 'vgpu_container_memory_used_bytes',
               'vgpu': 'vgpu_container_nvml_memory_used_bytes'}


def main():
    out = sys.argv[1]
    containers = [l.split() for l in open(f'{out}/containers.txt') if l.strip()]
    scrapes = [(int(i), int(t)) for i, t in (l.split() for l in open(f'{out}/scrapes.txt') if l.strip())]
    samples = defaultdict(list)  # pid -> [(ts, sm)]
    procs = defaultdict(list)    # pid -> [(t, used)]
    for line in open(f'{out}/probe.log'):
        f = line.split()
        if f and f[0] == 'S':
            samples[int(f[2])].append((int(f[3]), int(f[4])))
        elif f and f[0] == 'P':
            procs[int(f[3])].append((int(f[1]), int(f[4])))
    stamps = sorted({ts for s in samples.values() for ts, _ in s})
    gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]) if b > a)
    period_us = gaps[len(gaps) // 2] if gaps else 200_000
    # NVML publishes samples late: a scrape's window ends at the newest sample before it.
    ends = [max([ts for ts in stamps if ts <= t] or [t]) for _, t in scrapes]
    span_from, span_to = ends[0], ends[-1]
    periods = max(1.0, (span_to - span_from) / period_us)
    parsed = [parse_prom(f'{out}/scrape-{i}.prom') for i, _ in scrapes]

    failures = []

    def check(ok, what):
        print(('PASS ' if ok else 'FAIL ') + what)
        if not ok:
            failures.append(what)

    print(f'span ({span_from}, {span_to}] us = {(span_to - span_from) / 1e6:.1f} s over '
          f'{len(scrapes) - 1} windows; NVML sampling period {period_us / 1e3:.0f} ms')
    print(f'{"pod":6} {"hostpid":>8} {"duty%":>6} {"exporter_sm":>11} {"nvml_sm":>8} {"diff_pp":>8} '
          f'{"exporter_MiB":>13} {"nvml_MiB":>9} {"region_MiB":>10}')
    rows = []
    for name, uid, pid, ctr, _cid, busy, _alloc in containers:
        pid = int(pid)
        per_scrape = [value(s, 'vgpu_container_sm_utilization_ratio', pod_uid=uid) for s in parsed[1:]]
        known = [v for v in per_scrape if v is not None]
        exp = sum(known) / len(known) if known and len(known) == len(per_scrape) else None
        ref = sum(sm for ts, sm in samples[pid] if span_from < ts <= span_to) / 100.0 / periods
        mem_name = NVML_MEMORY.get(name, 'vgpu_container_nvml_memory_used_bytes')
        mem_pairs = []  # (exporter, probe's newest reading before the scrape)
        for (i, t), s in zip(scrapes, parsed):
            before = [u for tt, u in procs[pid] if tt <= t]
            mem_pairs.append((value(s, mem_name, pod_uid=uid), before[-1] if before else None))
        region = value(parsed[-1], 'vgpu_container_memory_used_bytes', pod_uid=uid) if name == 'vgpu' else None
        e_mem, p_mem = mem_pairs[-1]
        mib = lambda v: '-' if v is None else f'{v / 2**20:.1f}'
        diff = None if exp is None else 100 * (exp - ref)
        print(f'{name:6} {pid:>8} {busy:>6} {"-" if exp is None else f"{exp:.4f}":>11} {ref:>8.4f} '
              f'{"-" if diff is None else f"{diff:+.2f}":>8} {mib(e_mem):>13} {mib(p_mem):>9} {mib(region):>10}')
        rows.append((name, uid, exp, ref, mem_pairs, region))
    print('per-window exporter SM: ' + '; '.join(
        f'{n} ' + ' '.join('-' if v is None else f'{v:.3f}'
                           for v in (value(s, 'vgpu_container_sm_utilization_ratio', pod_uid=u) for s in parsed[1:]))
        for n, u, *_ in rows))
    for name, uid, exp, ref, mem_pairs, region in rows:
        check(exp is not None, f'{name}: SM utilization attributed in every scrape')
        if exp is not None:
            check(abs(exp - ref) <= SM_TOLERANCE,
                  f'{name}: exporter SM mean {exp:.4f} within 2 pp of NVML {ref:.4f} ({100 * (exp - ref):+.2f} pp)')
        bad = [(e, p) for e, p in mem_pairs if e is None or p is None or int(e) != p]
        check(not bad, f'{name}: memory exact in all {len(mem_pairs)} scrapes'
              + (f' (first mismatch exporter {bad[0][0]} vs NVML {bad[0][1]})' if bad else
                 f' ({mem_pairs[-1][1]} bytes)'))
        if region is not None and mem_pairs[-1][1] is not None:
            print(f'INFO {name}: region memory {region:.0f} vs NVML {mem_pairs[-1][1]} '
                  f'({(region - mem_pairs[-1][1]) / 2**20:+.1f} MiB)')
        kind = SHARING.get(name)
        info = value(parsed[-1], 'vgpu_container_device_info', pod_uid=uid, sharing=kind)
        check(info == 1.0, f'{name}: vgpu_container_device_info{{sharing="{kind}"}} present')
    print(f'\n{len(failures)} failure(s)')
    for f in failures:
        print('  ' + f)
    sys.exit(1 if failures else 0)


if __name__ == '__main__':
    main()

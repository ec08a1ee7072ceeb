#!/usr/bin/env python3
"""Checks the attribution proof's scrapes against NVML read directly (nvml_probe's log).

analyze.py <out-dir> <window-seconds>

Reads <out-dir>/containers.txt ("name pod_uid host_pid alloc_bytes" per line), scrapes.txt
("index epoch_us" per line), scrape-<i>.prom and probe.log; prints a table per scrape and the
verdict; exits 1 when an assertion fails.
"""
import re
import sys
from collections import defaultdict

TOLERANCE = 0.05          # 5 percentage points
CONTEXT_BOUND = 1 << 30   # a CUDA context on H100/H200 is ~0.5 GiB; allow up to 1 GiB
MEMORY_MATCH = 16 << 20   # exporter's NVML memory vs the probe's, for the same pid
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_prom(path):
    series = defaultdict(list)
    for line in open(path):
        if not line or line.startswith('#'):
            continue
        m = re.match(r'^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)', line)
        if not m:
            continue
        labels = dict(LABEL.findall(m.group(3) or ''))
        series[m.group(1)].append((labels, float(m.group(4))))
    return series


def value(series, name, **want):
    for labels, v in series.get(name, []):
        if all(labels.get(k) == str(x) for k, x in want.items()):
            return v
    return None


def main():
    out, window = sys.argv[1], float(sys.argv[2])
    containers = [l.split() for l in open(f'{out}/containers.txt') if l.strip()]
    scrapes = [l.split() for l in open(f'{out}/scrapes.txt') if l.strip()]
    samples = defaultdict(list)   # pid -> [(ts, sm)]
    procs = defaultdict(list)     # pid -> [(t, used)]
    device = []                   # (t, gpu%)
    for line in open(f'{out}/probe.log'):
        f = line.split()
        if f[0] == 'S':
            samples[int(f[2])].append((int(f[3]), int(f[4])))
        elif f[0] == 'P':
            procs[int(f[3])].append((int(f[1]), int(f[4])))
        elif f[0] == 'U':
            device.append((int(f[1]), int(f[3])))
    newest_sample = sorted(ts for s in samples.values() for ts, _ in s)
    # NVML's per-process samples: one per sampling period (~200 ms) for each process that ran in
    # it. When processes time-slice the GPU a process has samples only for its own periods, so the
    # mean over ITS samples reads ~99 % for everyone; the reference is the sum over the window
    # divided by the number of device periods in it (periods without a sample count as idle).
    stamps = sorted(set(newest_sample))
    gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]) if b > a)
    period_us = gaps[len(gaps) // 2] if gaps else 200_000

    failures = []
    report = []
    summary = defaultdict(list)   # name -> [(exporter, nvml, nvml_mem - region_mem)]
    sums = []

    def check(ok, what):
        report.append(('PASS ' if ok else 'FAIL ') + what)
        if not ok:
            failures.append(what)

    w_us = window * 1e6
    for idx, t in scrapes:
        t = int(t)
        series = parse_prom(f'{out}/scrape-{idx}.prom')
        # NVML publishes samples late: the reference window ends at the newest sample before t.
        end = max([ts for ts in newest_sample if ts <= t] or [t])
        report.append(f'--- scrape {idx} at {t} (reference window ({end - w_us:.0f}, {end}] us)')
        report.append(f'{"container":8} {"hostpid":>8} {"exporter":>9} {"nvml":>7} {"region":>7} '
                      f'{"hami":>6} {"nvml_mem_MiB":>12} {"probe_mem_MiB":>13} {"region_MiB":>10}')
        total = 0.0
        got = {}
        for name, uid, pid, alloc in containers:
            pid, alloc = int(pid), int(alloc)
            exp = value(series, 'vgpu_container_sm_utilization_ratio', pod_uid=uid)
            unknown = [l.get('reason') for l, v in series.get('vgpu_container_sm_utilization_unknown', [])
                       if l.get('pod_uid') == uid and v == 1]
            window_samples = [sm for ts, sm in samples[pid] if end - w_us < ts <= end]
            ref = min(1.0, sum(window_samples) / 100.0 / (w_us / period_us))
            region = value(series, 'vgpu_container_region_sm_utilization_ratio', pod_uid=uid)
            hami = value(series, 'hami_container_device_utilization_ratio', container=name)
            nvml_mem = value(series, 'vgpu_container_nvml_memory_used_bytes', pod_uid=uid)
            region_mem = value(series, 'vgpu_container_memory_used_bytes', pod_uid=uid)
            probe_mem = [u for tt, u in procs[pid] if tt <= t]
            probe_mem = probe_mem[-1] if probe_mem else None
            mism = value(series, 'vgpu_container_hostpid_mismatch_slots', pod_uid=uid,
                         reason='container_pid')
            fmt = lambda v, s=1.0: '-' if v is None else f'{v * s:.3f}'
            report.append(f'{name:8} {pid:>8} {fmt(exp):>9} {ref:>7.3f} {fmt(region):>7} {fmt(hami):>6} '
                          f'{fmt(nvml_mem, 1 / 2**20):>12} {fmt(probe_mem, 1 / 2**20):>13} '
                          f'{fmt(region_mem, 1 / 2**20):>10}')
            check(exp is not None, f'{name}: utilization attributed (unknown reasons: {unknown})')
            if exp is None:
                continue
            got[name] = exp
            total += exp
            ctx = (nvml_mem - region_mem) if nvml_mem is not None and region_mem is not None else None
            summary[name].append((exp, ref, ctx))
            check(abs(exp - ref) <= TOLERANCE,
                  f'{name}: exporter {exp:.3f} within 5 pp of NVML {ref:.3f} for host pid {pid}')
            check(hami is not None and abs(hami - 100 * exp) <= 0.5,
                  f'{name}: hami_container_device_utilization_ratio {hami} carries 100 x {exp:.3f}')
            check(region == 0.0, f'{name}: region-claimed sm_util is {region} (HAMi would show it)')
            check(mism == 1.0, f'{name}: slot hostpid recorded as in-namespace pid counted ({mism})')
            check(region_mem == alloc, f'{name}: region memory {region_mem} = allocated {alloc}')
            check(nvml_mem is not None and probe_mem is not None
                  and abs(nvml_mem - probe_mem) <= MEMORY_MATCH,
                  f'{name}: exporter NVML memory {nvml_mem} = probe {probe_mem} (+-16 MiB)')
            if nvml_mem is not None and region_mem is not None:
                check(0 <= nvml_mem - region_mem <= CONTEXT_BOUND,
                      f'{name}: NVML - region = {(nvml_mem - region_mem) / 2**20:.0f} MiB '
                      f'(the CUDA context) within [0, 1024] MiB')
        gpu = [v for l, v in series.get('vgpu_gpu_utilization_ratio', [])]
        dev = [g for tt, g in device if end - w_us < tt <= end]
        dev_mean = sum(dev) / len(dev) / 100.0 if dev else None
        report.append(f'sum of containers {total:.3f}; exporter GPU {gpu}; probe device mean '
                      f'{dev_mean if dev_mean is None else round(dev_mean, 3)}')
        sums.append((total, gpu[0] if gpu else None, dev_mean))
        check(bool(gpu) and total <= gpu[0] + TOLERANCE,
              f'sum {total:.3f} does not exceed the GPU utilization {gpu} (+5 pp)')
        if 'idle' in got:
            check(got['idle'] <= 0.01, f'idle reads 0 ({got["idle"]:.3f})')
        if 'busy' in got:
            check(got['busy'] >= 0.30, f'busy does not read 0 ({got["busy"]:.3f})')
        if 'medium' in got:
            check(got['medium'] > got.get('idle', 0), f'medium ({got["medium"]:.3f}) reads above idle')
    report.append('')
    report.append(f'=== summary over {len(scrapes)} scrapes, window {window:.0f} s')
    for name, rows in summary.items():
        e = sum(r[0] for r in rows) / len(rows)
        n = sum(r[1] for r in rows) / len(rows)
        worst = max(abs(r[0] - r[1]) for r in rows)
        ctxs = [r[2] for r in rows if r[2] is not None]
        ctx = f'{sum(ctxs) / len(ctxs) / 2**20:.0f} MiB' if ctxs else '-'
        report.append(f'{name:8} exporter {e:.3f}  NVML {n:.3f}  max |diff| {worst:.3f}  '
                      f'NVML-region memory (context) {ctx}')
    if sums:
        report.append('sum of containers ' + ', '.join(f'{t:.3f}' for t, _, _ in sums)
                      + '; GPU ' + ', '.join('-' if g is None else f'{g:.3f}' for _, g, _ in sums))
    print('\n'.join(report))
    print(f'\n{len(failures)} failure(s)')
    for f in failures:
        print('  ' + f)
    sys.exit(1 if failures else 0)


if __name__ == '__main__':
    main()

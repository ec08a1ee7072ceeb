#!/usr/bin/env python3
"""Real jobs under libvgpu (issue 35, "Real jobs stay whole"); run by real_jobs.sh.

  real_jobs.py monitor OUTFILE STOPFILE   NVML sampler (run WITHOUT the library): every 50 ms the
                                          per-process usage on every GPU; keeps each pid's peak per
                                          GPU and rewrites OUTFILE (atomically) with the latest
                                          sample and the peaks, until STOPFILE exists
  real_jobs.py train RESULT STEPS         one-GPU training loop (MLP on a fixed synthetic task)
  real_jobs.py ddp RESULT STEPS           one rank of a DDP job over NCCL (under torchrun); {rank}
                                          in RESULT is replaced by the rank
  real_jobs.py report DIR LIMIT_MIB SM_LIMIT  the PASS/FAIL table from DIR's results

A training process writes RESULT (JSON): pid, the CUDA devices' uuids, loss of the first and last
10 steps, steps/s over steps [STEPS/5, STEPS), and, where CUDA_DEVICE_MEMORY_SHARED_CACHE is set,
the region as shrreg-tool --json shows it (SHRREG_TOOL) next to the monitor's sample of the same
moment (MONITOR_FILE), taken while every rank still holds its memory. Without the library it also
records its context size (its NVML usage right after CUDA initialised).
"""
import json
import os
import subprocess
import sys
import time


def nvml_snapshot(pynvml):
    """{uuid: {pid: used_bytes}} for every GPU."""
    snap = {}
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        uuid = pynvml.nvmlDeviceGetUUID(h)
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
        snap[uuid] = {str(p.pid): int(p.usedGpuMemory or 0) for p in procs}
    return snap


def monitor(outfile, stopfile):
    import pynvml
    pynvml.nvmlInit()
    peaks = {}
    while not os.path.exists(stopfile):
        snap = nvml_snapshot(pynvml)
        for uuid, procs in snap.items():
            for pid, used in procs.items():
                key = pid + "@" + uuid
                peaks[key] = max(peaks.get(key, 0), used)
        tmp = outfile + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"t": time.time(), "now": snap, "peak": peaks}, f)
        os.replace(tmp, outfile)
        time.sleep(0.05)


def own_context_bytes(dev_index):
    """This process's NVML usage on its GPU (called right after CUDA initialised, no library)."""
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(dev_index)
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if p.pid == os.getpid():
                return int(p.usedGpuMemory or 0)
    except Exception as e:  # noqa: BLE001 - the figure is informative; the report says it is missing
        print(f"context size not read: {e}", file=sys.stderr)
    return None


def region_and_nvml():
    """The region (shrreg-tool --json, run without LD_PRELOAD) and the monitor's next sample."""
    cache = os.environ.get("CUDA_DEVICE_MEMORY_SHARED_CACHE")
    tool = os.environ.get("SHRREG_TOOL")
    mon = os.environ.get("MONITOR_FILE")
    out = {"region": None, "nvml": None}
    if cache and tool:
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        r = subprocess.run([tool, "--json", "--file", cache, "--inspect"], env=env, capture_output=True,
                           text=True, timeout=30)
        if r.returncode == 0:
            out["region"] = json.loads(r.stdout)
        else:
            out["region_error"] = (r.stderr or r.stdout)[-300:]
    if mon:
        t0 = time.time()
        time.sleep(0.3)  # a sample taken after this moment
        while time.time() - t0 < 5:
            try:
                with open(mon) as f:
                    m = json.load(f)
                if m["t"] > t0 + 0.1:
                    out["nvml"] = m
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
    return out


def make_task(torch, dev, in_dim, classes, batches, batch, data_seed):
    """A fixed synthetic task a network can learn: labels of one random linear teacher (the same
    for every rank), inputs drawn from data_seed (each rank its own)."""
    teacher = torch.randn(in_dim, classes, generator=torch.Generator(device="cpu").manual_seed(12345))
    g = torch.Generator(device="cpu").manual_seed(data_seed)
    xs, ys = [], []
    for _ in range(batches):
        x = torch.randn(batch, in_dim, generator=g)
        xs.append(x.to(dev))
        ys.append((x @ teacher).argmax(dim=1).to(dev))
    return xs, ys


def mlp(torch, in_dim, width, classes, layers):
    mods, d = [], in_dim
    for _ in range(layers):
        mods += [torch.nn.Linear(d, width), torch.nn.ReLU()]
        d = width
    mods.append(torch.nn.Linear(d, classes))
    return torch.nn.Sequential(*mods)


def train_loop(torch, model, opt, xs, ys, steps):
    loss_fn = torch.nn.CrossEntropyLoss()
    losses, t_start = [], None
    warm = max(1, steps // 5)
    for step in range(steps):
        if step == warm:
            torch.cuda.synchronize()
            t_start = time.time()
        i = step % len(xs)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xs[i]), ys[i])
        loss.backward()
        opt.step()
        if step < 10 or step >= steps - 10:
            losses.append(float(loss.detach()))
    torch.cuda.synchronize()
    rate = (steps - warm) / (time.time() - t_start)
    return losses[:10], losses[-10:], rate


def uuids(torch):
    """The CUDA devices' uuids in NVML's form (only a fallback for a region that names none)."""
    out = []
    try:
        for d in range(torch.cuda.device_count()):
            u = str(torch.cuda.get_device_properties(d).uuid)
            out.append(u if u.startswith("GPU-") else "GPU-" + u)
    except (AttributeError, RuntimeError) as e:
        print(f"device uuids not read: {e}", file=sys.stderr)
    return out


def train(result, steps):
    import torch
    dev = torch.device("cuda:0")
    torch.cuda.init()
    torch.zeros(1, device=dev)
    ctx = None if os.environ.get("LD_PRELOAD") else own_context_bytes(0)
    torch.manual_seed(0)
    xs, ys = make_task(torch, dev, 1024, 10, 16, 4096, 1)
    model = mlp(torch, 1024, 4096, 10, 3).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    first, last, rate = train_loop(torch, model, opt, xs, ys, steps)
    res = {"pid": os.getpid(), "uuids": uuids(torch), "device": 0, "context_bytes": ctx,
           "loss_first": sum(first) / len(first), "loss_last": sum(last) / len(last), "steps_per_s": rate}
    res.update(region_and_nvml())
    with open(result, "w") as f:
        json.dump(res, f)
    print(f"train: loss {res['loss_first']:.3f} -> {res['loss_last']:.3f}, {rate:.1f} steps/s")


def ddp(result, steps):
    import torch
    import torch.distributed as dist
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    torch.zeros(1, device=dev)
    ctx = None if os.environ.get("LD_PRELOAD") else own_context_bytes(local)
    dist.init_process_group("nccl", device_id=dev)
    torch.manual_seed(0)
    xs, ys = make_task(torch, dev, 1024, 10, 8, 2048, 1 + rank)
    model = torch.nn.parallel.DistributedDataParallel(mlp(torch, 1024, 2048, 10, 3).to(dev), device_ids=[local])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    first, last, rate = train_loop(torch, model, opt, xs, ys, steps)
    dist.barrier()
    res = {"pid": os.getpid(), "rank": rank, "uuids": uuids(torch), "device": local, "context_bytes": ctx,
           "loss_first": sum(first) / len(first), "loss_last": sum(last) / len(last), "steps_per_s": rate}
    if rank == 0:  # every rank still holds its memory until the barrier below
        res.update(region_and_nvml())
    dist.barrier()
    with open(result.replace("{rank}", str(rank)), "w") as f:
        json.dump(res, f)
    dist.destroy_process_group()
    print(f"ddp rank {rank}: loss {res['loss_first']:.3f} -> {res['loss_last']:.3f}, {rate:.1f} steps/s")


# ---- the report ---------------------------------------------------------------------------------

MiB = 1 << 20


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def region_rows(region, cuda_uuids):
    """{(pid, uuid): (used, context, module, data)} from shrreg-tool's JSON. A region device is a
    CUDA ordinal of the processes (cuda_uuids: their uuids, for a region that names none)."""
    dev_uuid = {d["index"]: d.get("uuid") or (cuda_uuids[d["index"]] if d["index"] < len(cuda_uuids) else "")
                for d in region.get("devices", [])}
    rows = {}
    for p in region.get("processes", []):
        for d in p.get("devices", []):
            if d["used_bytes"]:
                rows[(str(p["pid"]), dev_uuid.get(d["index"], str(d["index"])))] = (
                    d["used_bytes"], d["context_bytes"], d["module_bytes"], d["data_bytes"])
    return rows


def pid_peaks(peaks, pid):
    """{uuid: peak bytes} of one pid from the monitor's peaks."""
    return {k.split("@", 1)[1]: v for k, v in peaks.items() if k.split("@", 1)[0] == str(pid)}


def report(outdir, limit_mib, sm_limit):
    rows = []  # (job, check, verdict, detail)

    def check(job, name, ok, detail):
        rows.append((job, name, "PASS" if ok else "FAIL", detail))

    limit = limit_mib * MiB
    # (a) one GPU
    base, lim = load(f"{outdir}/train-none/result.json"), load(f"{outdir}/train-lib/result.json")
    peaks = (load(f"{outdir}/train-lib/monitor.json") or {}).get("peak", {})
    if not os.path.isdir(f"{outdir}/train-none") and not os.path.isdir(f"{outdir}/train-lib"):
        pass  # part (a) not asked for (PARTS)
    elif not base or not lim:
        check("train", "completes", False, f"result missing (none: {bool(base)}, lib: {bool(lim)}); see the logs")
    else:
        check("train", "completes", True, f"exit 0, {lim['steps_per_s']:.1f} steps/s")
        check("train", "loss falls", lim["loss_last"] < 0.5 * lim["loss_first"],
              f"{lim['loss_first']:.3f} -> {lim['loss_last']:.3f} (without the library "
              f"{base['loss_first']:.3f} -> {base['loss_last']:.3f})")
        ctx = base.get("context_bytes") or 0
        mine = pid_peaks(peaks, lim["pid"])
        peak = max(mine.values(), default=0)
        check("train", "NVML peak <= limit + context", bool(mine) and peak <= limit + ctx,
              f"peak {peak / MiB:.0f} MiB, limit {limit_mib} + context {ctx / MiB:.0f} MiB" if mine
              else f"NVML never listed pid {lim['pid']} (monitor: {len(peaks)} pid/GPU pairs)")
        share = 100 * lim["steps_per_s"] / base["steps_per_s"]
        check("train", f"SM share within 5 pp of {sm_limit} %", abs(share - sm_limit) <= 5,
              f"{share:.1f} % ({lim['steps_per_s']:.1f} vs {base['steps_per_s']:.1f} steps/s)")
        reg, nv = lim.get("region"), (lim.get("nvml") or {}).get("now", {})
        if reg:
            rr = region_rows(reg, lim["uuids"])
            counted = sum(v[0] for (pid, _), v in rr.items() if pid == str(lim["pid"]))
            held = sum(p.get(str(lim["pid"]), 0) for p in nv.values())
            check("train", "counted = NVML held (10 % / 128 MiB)", abs(counted - held) <= max(128 * MiB, held / 10),
                  f"counted {counted / MiB:.0f} MiB, held {held / MiB:.0f} MiB")
        else:
            check("train", "counted = NVML held (10 % / 128 MiB)", False,
                  f"region not read: {lim.get('region_error', 'no SHRREG_TOOL')}")
    # (b) DDP, with the library: memory limit, and memory + SM limit
    ddp_base = [load(f"{outdir}/ddp-none/rank{r}.json") for r in (0, 1)]
    for run, smlim in (("ddp-mem", 0), ("ddp-mem-sm", int(os.environ.get("DDP_SM_LIMIT", "50")))):
        if not os.path.isdir(f"{outdir}/{run}"):
            continue
        res = [load(f"{outdir}/{run}/rank{r}.json") for r in (0, 1)]
        rc = (open(f"{outdir}/{run}/rc").read().strip() if os.path.exists(f"{outdir}/{run}/rc") else "?")
        if not all(res):
            check(run, "completes", False, f"torchrun exit {rc}, rank results {[bool(r) for r in res]}; see the logs")
            continue
        check(run, "completes", rc == "0", f"torchrun exit {rc}, " +
              ", ".join(f"rank {r['rank']} {r['steps_per_s']:.1f} steps/s" for r in res))
        check(run, "loss falls", all(r["loss_last"] < 0.5 * r["loss_first"] for r in res),
              ", ".join(f"rank {r['rank']} {r['loss_first']:.3f} -> {r['loss_last']:.3f}" for r in res))
        peaks = (load(f"{outdir}/{run}/monitor.json") or {}).get("peak", {})
        worst, unseen = [], []
        for r in res:
            ctx = ((ddp_base[r["rank"]] or {}).get("context_bytes") or 0)
            mine = pid_peaks(peaks, r["pid"])
            if not mine:
                unseen.append(r["rank"])
            for u, p in mine.items():
                worst.append((p - ctx, p, ctx, r["rank"], u))
        if unseen or not worst:
            check(run, "NVML peak <= limit + context (each rank, each GPU)", False,
                  f"NVML never listed rank(s) {unseen} (monitor: {len(peaks)} pid/GPU pairs)")
        else:
            w = max(worst)
            check(run, "NVML peak <= limit + context (each rank, each GPU)", w[0] <= limit,
                  f"worst: rank {w[3]} on {w[4][:12]}: {w[1] / MiB:.0f} MiB, limit {limit_mib} + context "
                  f"{w[2] / MiB:.0f} MiB")
        r0 = res[0]
        reg, nv = r0.get("region"), (r0.get("nvml") or {}).get("now", {})
        if not reg or not nv:
            check(run, "NCCL buffers counted once (per GPU: sum counted = sum held)", False,
                  f"region or NVML sample missing: {r0.get('region_error', '')}")
        else:
            rr = region_rows(reg, r0["uuids"])
            pids = {str(r["pid"]) for r in res}
            detail, ok = [], True
            gpus = {uu for (pid, uu) in rr if pid in pids} | {u for u, procs in nv.items() if pids & set(procs)}
            if not gpus:
                ok = False
                detail.append("neither the region nor NVML shows the ranks on any GPU")
            for u in sorted(gpus):
                counted = sum(v[0] for (pid, uu), v in rr.items() if uu == u and pid in pids)
                held = sum(used for pid, used in nv.get(u, {}).items() if pid in pids)
                per = "; ".join(f"pid {pid}: counted {v[0] / MiB:.0f} (ctx {v[1] / MiB:.0f}, module "
                                f"{v[2] / MiB:.0f}, data {v[3] / MiB:.0f}) held {nv.get(u, {}).get(pid, 0) / MiB:.0f}"
                                for (pid, uu), v in sorted(rr.items()) if uu == u and pid in pids)
                ok &= abs(counted - held) <= max(128 * MiB, held / 10)
                detail.append(f"{u[:12]}: counted {counted / MiB:.0f} MiB, held {held / MiB:.0f} MiB [{per}]")
            check(run, "NCCL buffers counted once (per GPU: sum counted = sum held)", ok, " | ".join(detail))
        if smlim and all(ddp_base):
            share = 100 * min(r["steps_per_s"] for r in res) / min(b["steps_per_s"] for b in ddp_base)
            check(run, f"SM share <= {smlim} % + 5 pp", share <= smlim + 5, f"{share:.1f} % of the run without")
            check(run, f"no stall: SM share >= {smlim} % / 2", share >= smlim / 2, f"{share:.1f} %")
    if not any(j.startswith("ddp") for j, *_ in rows):
        rows.append(("ddp", "runs", "NOT RUN", open(f"{outdir}/ddp.skipped").read().strip()
                     if os.path.exists(f"{outdir}/ddp.skipped") else "no DDP results"))
    w = max(len(r[1]) for r in rows)
    print(f"{'job':<11} {'check':<{w}} verdict  detail")
    for job, name, verdict, detail in rows:
        print(f"{job:<11} {name:<{w}} {verdict:<8} {detail}")
    failed = sum(r[2] != "PASS" for r in rows)
    print(f"real_jobs: {len(rows) - failed} PASS, {failed} FAIL or NOT RUN")
    return 1 if failed else 0


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "monitor" and len(sys.argv) == 4:
        return monitor(sys.argv[2], sys.argv[3]) or 0
    if cmd == "train" and len(sys.argv) == 4:
        return train(sys.argv[2], int(sys.argv[3])) or 0
    if cmd == "ddp" and len(sys.argv) == 4:
        return ddp(sys.argv[2], int(sys.argv[3])) or 0
    if cmd == "report" and len(sys.argv) == 5:
        return report(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

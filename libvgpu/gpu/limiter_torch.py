#!/usr/bin/env python3
"""PyTorch workloads for the SM limiter bench (issue 30), same protocol as limiter_bench.cu.

  limiter_torch.py matmul SETTLE MEASURE   the public protocol's workload: back-to-back 8192 x
                                           8192 fp16 matmuls (saturating), at most 4 in flight
  limiter_torch.py train SETTLE MEASURE    a real training loop: a 4-layer MLP (4096 wide,
                                           batch 2048), AdamW, forward + backward + step
Prints "READY <epoch_us>" once the first step is issued, then
  RESULT {"pid":..,"shape":..,"batches":..,"window_s":..,"per_s":..,"t0_us":..}
where per_s counts steps completed inside [t0 + SETTLE, t0 + SETTLE + MEASURE).
"""
import json
import os
import sys
import time

import torch


def main():
    shape, settle, measure = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    if shape == "matmul":
        a = torch.randn(8192, 8192, device=dev, dtype=torch.float16)
        b = torch.randn(8192, 8192, device=dev, dtype=torch.float16)
        c = torch.empty_like(a)

        def step():
            torch.matmul(a, b, out=c)
    elif shape == "train":
        model = torch.nn.Sequential(
            torch.nn.Linear(4096, 4096), torch.nn.GELU(),
            torch.nn.Linear(4096, 4096), torch.nn.GELU(),
            torch.nn.Linear(4096, 4096), torch.nn.GELU(),
            torch.nn.Linear(4096, 1000)).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randn(2048, 4096, device=dev)
        y = torch.randint(0, 1000, (2048,), device=dev)
        loss_fn = torch.nn.CrossEntropyLoss()

        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
    else:
        print(f"unknown shape {shape}", file=sys.stderr)
        return 2
    for _ in range(3):  # warm-up: cuBLAS handles, autotuning, optimizer state
        step()
    torch.cuda.synchronize()
    depth = 4
    events = []
    t0 = int(time.time() * 1e6)
    print(f"READY {t0}", flush=True)
    win_a, win_b = t0 + int(settle * 1e6), t0 + int((settle + measure) * 1e6)
    n_in, first, last = 0, 0, 0
    while True:
        step()
        ev = torch.cuda.Event()
        ev.record()
        events.append(ev)
        if len(events) >= depth:
            events.pop(0).synchronize()
            tc = int(time.time() * 1e6)
            if win_a <= tc < win_b:
                if n_in == 0:
                    first = tc
                n_in += 1
                last = tc
            if tc >= win_b:
                break
    torch.cuda.synchronize()
    per_s = n_in / measure
    if 3 <= n_in < 200 and last > first:
        per_s = (n_in - 1) / ((last - first) / 1e6)
    print("RESULT " + json.dumps({"pid": os.getpid(), "shape": shape, "batches": n_in,
                                  "window_s": measure, "per_s": per_s, "t0_us": t0}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""torch_expandable.py — PyTorch's expandable segments (its caching allocator on CUDA's virtual
memory API: cuMemCreate + cuMemMap, handles released while mapped) allocating 256 MiB tensors until
torch.OutOfMemoryError, then freeing them and emptying the cache. Same output as mem_patterns.c:
"RESULT mode=torch_expandable base= max= after= oom= tracked_base= tracked_after=" (NVML of this
process through pynvml; tracked = this process's slot in the region, 0 without libvgpu).
"""
import os

os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
import mmap
import struct
import time

import pynvml
import torch


def tracked_self():
    path = os.environ.get("CUDA_DEVICE_MEMORY_SHARED_CACHE")
    if not path or not os.path.exists(path):
        return 0
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 2008952, access=mmap.ACCESS_READ)
        (n,) = struct.unpack_from("<i", m, 2008896)
        total = 0
        for i in range(max(0, min(n, 1024))):
            base = 1856 + 1960 * i
            (pid,) = struct.unpack_from("<i", m, base)
            (status,) = struct.unpack_from("<i", m, base + 1928)
            if pid == os.getpid() and status:
                total = struct.unpack_from("<Q", m, base + 40)[0]
        m.close()
        return total


pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(0)


def nvml_self():
    for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
        if p.pid == os.getpid():
            return p.usedGpuMemory or 0
    return 0


torch.empty(1, device="cuda")
torch.cuda.synchronize()
time.sleep(0.3)
base, tbase = nvml_self(), tracked_self()
peak, oom, held = base, 0, []
try:
    for _ in range(64):
        held.append(torch.ones(256 << 20, dtype=torch.uint8, device="cuda"))
        peak = max(peak, nvml_self())
except torch.OutOfMemoryError:
    oom = 1
peak = max(peak, nvml_self())
print(f"RESULT tensors={len(held)} expandable={os.environ['PYTORCH_CUDA_ALLOC_CONF']}", flush=True)
held.clear()
torch.cuda.synchronize()
torch.cuda.empty_cache()
time.sleep(0.3)
after = nvml_self()
print(f"RESULT mode=torch_expandable base={base} max={peak} after={after} oom={oom} tracked_base={tbase} "
      f"tracked_after={tracked_self()}", flush=True)

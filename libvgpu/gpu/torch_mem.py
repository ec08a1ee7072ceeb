"""torch_mem.py — PyTorch under libvgpu: mem_get_info shows the limit, allocation stops at it.

Usage: python3 torch_mem.py <limit_bytes> <chunk_mib>
Prints RESULT lines for run_memory_tests.sh; exit 0 even on check failure (the script judges).
"""
import mmap
import os
import struct
import sys

import torch


def tracked_all():
    """The container's tracked bytes on region device 0 (HAMi v1.2 offsets)."""
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
            if pid and status:
                total += struct.unpack_from("<Q", m, base + 40)[0]
        m.close()
        return total

limit = int(sys.argv[1])
chunk = int(sys.argv[2]) << 20
free, total = torch.cuda.mem_get_info(0)
print(f"RESULT mode=torch_info total={total} free={free}", flush=True)
held = []
try:
    while True:
        held.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError:
    pass
reserved = torch.cuda.memory_reserved(0)
free2, total2 = torch.cuda.mem_get_info(0)
print(f"RESULT mode=torch_oom chunk={chunk} allocated={len(held) * chunk} reserved={reserved} "
      f"tracked_all={tracked_all()} total={total2} free_after={free2}", flush=True)

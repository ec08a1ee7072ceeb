#!/usr/bin/env python3
"""mig_gpm_probe.py: asks the real libnvidia-ml what the fake NVML (libvgpu/test/fake/fake_nvml_mig.inc)
models for MIG and GPM, on a GPU whose MIG mode cannot be switched (no GPU reset on the lent machines),
so the MIG-off answers and GPM on the whole GPU are what can be checked:

  - nvmlDeviceGetMigMode: MIG off (current 0), or NOT_SUPPORTED before Ampere;
  - nvmlDeviceGetMaxMigDeviceCount and nvmlDeviceGetMigDeviceHandleByIndex(0) with MIG off (the fake
    answers 0 and INVALID_ARGUMENT; the exporter asks the mode first, so either answer is safe);
  - nvmlDeviceGetGpuInstanceId on a physical GPU (INVALID_ARGUMENT, as the fake answers);
  - nvmlGpmQueryDeviceSupport: version 0 is ARGUMENT_VERSION_MISMATCH, version 1 answers (1 on Hopper);
  - nvmlGpmMigSampleGet on a GPU with MIG off (the exporter never calls it then; the code is recorded);
  - nvmlGpmSampleAlloc / nvmlGpmSampleGet twice an interval apart / nvmlGpmMetricsGet(SM_UTIL) with the
    exporter's struct layout (24-byte header, 40-byte metrics, room for 333): the metric's own
    nvmlReturn is SUCCESS and its value in [0, 100]; samples in the wrong order give an error;
    nvmlGpmSampleFree SUCCESS.

Optional load while sampling: LOAD="<command>" (e.g. a CUDA busy loop) runs during the second interval.
Prints one line per check ("ok"/"FAIL"/"info") and writes the same to $OUT/mig_gpm_probe.txt.
Exit 0 when every check passed. Run on the GPU machine: python3 exporter/src/test/gpu/mig_gpm_probe.py
"""
import ctypes
import os
import shlex
import subprocess
import sys
import time

SUCCESS, INVALID, NOT_SUPPORTED, NOT_FOUND, VERSION_MISMATCH = 0, 2, 3, 6, 25
out_lines = []
fails = 0


def say(kind, text):
    global fails
    line = f"{kind:5} {text}"
    print(line, flush=True)
    out_lines.append(line)
    if kind == "FAIL":
        fails += 1


def check(ok, text):
    say("ok" if ok else "FAIL", text)


lib = ctypes.CDLL("libnvidia-ml.so.1")
U, P = ctypes.c_uint, ctypes.c_void_p
check(lib.nvmlInit_v2() == SUCCESS, "nvmlInit_v2")
dev = P()
check(lib.nvmlDeviceGetHandleByIndex_v2(U(0), ctypes.byref(dev)) == SUCCESS, "handle of GPU 0")
name = ctypes.create_string_buffer(96)
lib.nvmlDeviceGetName(dev, name, U(96))
say("info", f"GPU 0: {name.value.decode(errors='replace')}")

cur, pend = U(7), U(7)
rc = lib.nvmlDeviceGetMigMode(dev, ctypes.byref(cur), ctypes.byref(pend))
check(rc in (SUCCESS, NOT_SUPPORTED), f"nvmlDeviceGetMigMode rc={rc} current={cur.value} pending={pend.value}")
mig_off = rc == NOT_SUPPORTED or cur.value == 0
say("info", f"MIG {'off' if mig_off else 'ON'}")
cnt = U(99)
rc = lib.nvmlDeviceGetMaxMigDeviceCount(dev, ctypes.byref(cnt))
say("info", f"nvmlDeviceGetMaxMigDeviceCount rc={rc} count={cnt.value} (fake: 0 with MIG off)")
mh = P()
rc = lib.nvmlDeviceGetMigDeviceHandleByIndex(dev, U(0), ctypes.byref(mh))
if mig_off:
    check(rc == NOT_FOUND, f"nvmlDeviceGetMigDeviceHandleByIndex(0) with MIG off rc={rc} (fake: {NOT_FOUND})")
else:
    say("info", f"nvmlDeviceGetMigDeviceHandleByIndex(0) rc={rc}")
gi = U(99)
rc = lib.nvmlDeviceGetGpuInstanceId(dev, ctypes.byref(gi))
check(rc == INVALID, f"nvmlDeviceGetGpuInstanceId on a physical GPU rc={rc} (fake: {INVALID})")

support = (U * 2)(0, 0)
rc = lib.nvmlGpmQueryDeviceSupport(dev, support)
check(rc == VERSION_MISMATCH, f"nvmlGpmQueryDeviceSupport version 0 -> ARGUMENT_VERSION_MISMATCH (rc={rc})")
support = (U * 2)(1, 0)
rc = lib.nvmlGpmQueryDeviceSupport(dev, support)
check(rc == SUCCESS, f"nvmlGpmQueryDeviceSupport version 1 rc={rc} isSupportedDevice={support[1]}")
gpm = rc == SUCCESS and support[1] == 1

if gpm:
    s1, s2 = P(), P()
    check(lib.nvmlGpmSampleAlloc(ctypes.byref(s1)) == SUCCESS and lib.nvmlGpmSampleAlloc(ctypes.byref(s2)) == SUCCESS,
          "nvmlGpmSampleAlloc x2")
    if mig_off:
        rc = lib.nvmlGpmMigSampleGet(dev, U(0), s1)
        say("info", f"nvmlGpmMigSampleGet(gi 0) with MIG off rc={rc} (the exporter never asks then)")
    check(lib.nvmlGpmSampleGet(dev, s1) == SUCCESS, "nvmlGpmSampleGet first")
    load = None
    if os.environ.get("LOAD"):
        load = subprocess.Popen(shlex.split(os.environ["LOAD"]))
    time.sleep(1.0)
    check(lib.nvmlGpmSampleGet(dev, s2) == SUCCESS, "nvmlGpmSampleGet second, 1 s later")
    if load:
        load.kill()

    cap = 333  # the exporter's layout: JnaNvmlMig METRIC_MAX

    class Metric(ctypes.Structure):
        _fields_ = [("metricId", U), ("nvmlReturn", ctypes.c_int), ("value", ctypes.c_double),
                    ("shortName", P), ("longName", P), ("unit", P)]

    class MetricsGet(ctypes.Structure):
        _fields_ = [("version", U), ("numMetrics", U), ("sample1", P), ("sample2", P), ("metrics", Metric * cap)]

    check(ctypes.sizeof(Metric) == 40 and MetricsGet.metrics.offset == 24, "struct layout: 40-byte metric at offset 24")

    def sm_util(a, b):
        m = MetricsGet()
        m.version, m.numMetrics, m.sample1, m.sample2 = 1, 1, a, b
        m.metrics[0].metricId = 2  # NVML_GPM_METRIC_SM_UTIL
        return lib.nvmlGpmMetricsGet(ctypes.byref(m)), m.metrics[0].nvmlReturn, m.metrics[0].value

    rc, mrc, v = sm_util(s1, s2)
    check(rc == SUCCESS and mrc == SUCCESS and 0.0 <= v <= 100.0,
          f"nvmlGpmMetricsGet SM_UTIL rc={rc} metric rc={mrc} value={v:.3f} %")
    rc, mrc, v = sm_util(s2, s1)
    check(rc == SUCCESS and mrc == SUCCESS,
          f"samples in the wrong order answered: rc={rc} metric rc={mrc} value={v:.3f} (fake: {SUCCESS})")
    check(lib.nvmlGpmSampleFree(s1) == SUCCESS and lib.nvmlGpmSampleFree(s2) == SUCCESS, "nvmlGpmSampleFree x2")
else:
    say("info", "no GPM on this GPU: the exporter reports vgpu_mig_sm_activity_unknown{reason=gpm_unsupported}")

lib.nvmlShutdown()
say("info", f"{fails} check(s) failed")
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "mig_gpm_probe.txt"), "w") as f:
        f.write("\n".join(out_lines) + "\n")
sys.exit(1 if fails else 0)

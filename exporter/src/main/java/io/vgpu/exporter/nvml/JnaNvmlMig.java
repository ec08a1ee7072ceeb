package io.vgpu.exporter.nvml;

import com.sun.jna.Memory;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;

/**
 * The MIG instance and GPM queries of the JNA client, through its symbol table ({@link
 * NativeCall}). Signatures, struct layouts and constants are NVML's ({@code nvml.h}, R520 and
 * newer); every out value is read only after NVML_SUCCESS and checked for plausibility.
 */
final class JnaNvmlMig {
  private static final int GPM_SUPPORT_VERSION = 1; // NVML_GPM_SUPPORT_VERSION
  private static final int GPM_METRICS_GET_VERSION = 1; // NVML_GPM_METRICS_GET_VERSION
  private static final int GPM_METRIC_SM_UTIL = 2; // nvmlGpmMetricId_t NVML_GPM_METRIC_SM_UTIL

  /**
   * nvmlGpmMetricsGet_t: {uint version; uint numMetrics; sample1; sample2; nvmlGpmMetric_t
   * metrics[NVML_GPM_METRIC_MAX]}, each metric {uint metricId; nvmlReturn_t; double value; three
   * string pointers}. The array is sized for the largest header's NVML_GPM_METRIC_MAX (333, CUDA
   * 13) though one metric is asked for, so no library build reads past the buffer.
   */
  private static final int METRICS_HEADER = 24;

  private static final int METRIC_SIZE = 40;
  private static final int METRIC_MAX = 333;

  private final NativeCall nvml;

  JnaNvmlMig(NativeCall nvml) {
    this.nvml = nvml;
  }

  private static Pointer pointer(DeviceHandle device) {
    return new Pointer(device.address());
  }

  NvmlResult<MigIds> migInstanceIds(DeviceHandle mig) {
    IntByReference gi = new IntByReference();
    NvmlReturn g = nvml.invoke("nvmlDeviceGetGpuInstanceId", pointer(mig), gi);
    if (!g.isSuccess()) {
      return NvmlResult.err("nvmlDeviceGetGpuInstanceId", g);
    }
    IntByReference ci = new IntByReference();
    NvmlReturn c = nvml.invoke("nvmlDeviceGetComputeInstanceId", pointer(mig), ci);
    if (!c.isSuccess()) {
      return NvmlResult.err("nvmlDeviceGetComputeInstanceId", c);
    }
    long giId = Integer.toUnsignedLong(gi.getValue());
    long ciId = Integer.toUnsignedLong(ci.getValue());
    if (giId > MigIds.MAX_ID || ciId > MigIds.MAX_ID) {
      return NvmlResult.err("nvmlDeviceGetComputeInstanceId", NvmlReturn.UNKNOWN); // garbage
    }
    return NvmlResult.ok(new MigIds((int) giId, (int) ciId));
  }

  NvmlResult<Boolean> gpmSupported(DeviceHandle device) {
    Memory support = new Memory(8); // nvmlGpmSupport_t {uint version; uint isSupportedDevice}
    support.clear();
    support.setInt(0, GPM_SUPPORT_VERSION);
    NvmlReturn c = nvml.invoke("nvmlGpmQueryDeviceSupport", pointer(device), support);
    return c.isSuccess()
        ? NvmlResult.ok(support.getInt(4) != 0)
        : NvmlResult.err("nvmlGpmQueryDeviceSupport", c);
  }

  NvmlResult<GpmSample> gpmSampleAlloc() {
    PointerByReference out = new PointerByReference();
    NvmlReturn c = nvml.invoke("nvmlGpmSampleAlloc", out);
    long address = c.isSuccess() ? Pointer.nativeValue(out.getValue()) : 0;
    if (c.isSuccess() && address != 0) {
      return NvmlResult.ok(new GpmSample(address));
    }
    return NvmlResult.err("nvmlGpmSampleAlloc", c.isSuccess() ? NvmlReturn.UNKNOWN : c);
  }

  NvmlReturn gpmSampleFree(GpmSample sample) {
    return nvml.invoke("nvmlGpmSampleFree", new Pointer(sample.address()));
  }

  NvmlReturn gpmMigSampleGet(DeviceHandle parent, int gpuInstanceId, GpmSample sample) {
    return nvml.invoke(
        "nvmlGpmMigSampleGet", pointer(parent), gpuInstanceId, new Pointer(sample.address()));
  }

  NvmlResult<Double> gpmSmUtilPercent(GpmSample first, GpmSample second) {
    Memory get = new Memory(METRICS_HEADER + (long) METRIC_SIZE * METRIC_MAX);
    get.clear();
    get.setInt(0, GPM_METRICS_GET_VERSION);
    get.setInt(4, 1);
    get.setPointer(8, new Pointer(first.address()));
    get.setPointer(16, new Pointer(second.address()));
    get.setInt(METRICS_HEADER, GPM_METRIC_SM_UTIL);
    NvmlReturn c = nvml.invoke("nvmlGpmMetricsGet", get);
    NvmlReturn metric = c.isSuccess() ? new NvmlReturn(get.getInt(METRICS_HEADER + 4)) : c;
    if (!metric.isSuccess()) {
      return NvmlResult.err("nvmlGpmMetricsGet", metric);
    }
    double percent = get.getDouble(METRICS_HEADER + 8);
    return percent >= 0 && percent <= 100.5 // a little over 100 is NVML's rounding; NaN fails
        ? NvmlResult.ok(Math.min(percent, 100.0))
        : NvmlResult.err("nvmlGpmMetricsGet", NvmlReturn.UNKNOWN);
  }
}

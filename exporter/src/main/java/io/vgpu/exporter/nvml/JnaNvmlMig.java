package io.vgpu.exporter.nvml;

import static io.vgpu.exporter.nvml.JnaNvmlClient.pointer;

import com.sun.jna.Memory;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;

/**
 * The MIG instance and GPM queries of {@link JnaNvmlClient}, through its symbol table. Signatures,
 * struct layouts and constants are NVML's ({@code nvml.h}, R520 and newer); every out value is read
 * only after NVML_SUCCESS and checked for plausibility.
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

  private final JnaNvmlClient nvml;

  JnaNvmlMig(JnaNvmlClient nvml) {
    this.nvml = nvml;
  }

  NvmlResult<MigIds> migInstanceIds(DeviceHandle mig) {
    IntByReference gi = new IntByReference();
    JnaNvmlClient.Call g = nvml.call("nvmlDeviceGetGpuInstanceId", pointer(mig), gi);
    if (!g.ok()) {
      return g.err();
    }
    IntByReference ci = new IntByReference();
    JnaNvmlClient.Call c = nvml.call("nvmlDeviceGetComputeInstanceId", pointer(mig), ci);
    if (!c.ok()) {
      return c.err();
    }
    long giId = Integer.toUnsignedLong(gi.getValue());
    long ciId = Integer.toUnsignedLong(ci.getValue());
    if (giId > MigIds.MAX_ID || ciId > MigIds.MAX_ID) {
      return NvmlResult.err(c.function(), NvmlReturn.UNKNOWN); // garbage ids
    }
    return NvmlResult.ok(new MigIds((int) giId, (int) ciId));
  }

  NvmlResult<Boolean> gpmSupported(DeviceHandle device) {
    Memory support = new Memory(8); // nvmlGpmSupport_t {uint version; uint isSupportedDevice}
    support.clear();
    support.setInt(0, GPM_SUPPORT_VERSION);
    JnaNvmlClient.Call c = nvml.call("nvmlGpmQueryDeviceSupport", pointer(device), support);
    return c.ok() ? NvmlResult.ok(support.getInt(4) != 0) : c.err();
  }

  NvmlResult<GpmSample> gpmSampleAlloc() {
    PointerByReference out = new PointerByReference();
    JnaNvmlClient.Call c = nvml.call("nvmlGpmSampleAlloc", out);
    if (!c.ok()) {
      return c.err();
    }
    long address = Pointer.nativeValue(out.getValue());
    return address == 0
        ? NvmlResult.err(c.function(), NvmlReturn.UNKNOWN)
        : NvmlResult.ok(new GpmSample(address));
  }

  NvmlReturn gpmSampleFree(GpmSample sample) {
    return nvml.call("nvmlGpmSampleFree", new Pointer(sample.address())).code();
  }

  NvmlReturn gpmMigSampleGet(DeviceHandle parent, int gpuInstanceId, GpmSample sample) {
    return nvml.call(
            "nvmlGpmMigSampleGet", pointer(parent), gpuInstanceId, new Pointer(sample.address()))
        .code();
  }

  NvmlResult<Double> gpmSmUtilPercent(GpmSample first, GpmSample second) {
    Memory get = new Memory(METRICS_HEADER + (long) METRIC_SIZE * METRIC_MAX);
    get.clear();
    get.setInt(0, GPM_METRICS_GET_VERSION);
    get.setInt(4, 1);
    get.setPointer(8, new Pointer(first.address()));
    get.setPointer(16, new Pointer(second.address()));
    get.setInt(METRICS_HEADER, GPM_METRIC_SM_UTIL);
    JnaNvmlClient.Call c = nvml.call("nvmlGpmMetricsGet", get);
    if (!c.ok()) {
      return c.err();
    }
    NvmlReturn metric = new NvmlReturn(get.getInt(METRICS_HEADER + 4));
    if (!metric.isSuccess()) {
      return NvmlResult.err(c.function(), metric);
    }
    double percent = get.getDouble(METRICS_HEADER + 8);
    return percent >= 0 && percent <= 100.5 // a little over 100 is NVML's rounding; NaN fails
        ? NvmlResult.ok(Math.min(percent, 100.0))
        : NvmlResult.err(c.function(), NvmlReturn.UNKNOWN);
  }
}

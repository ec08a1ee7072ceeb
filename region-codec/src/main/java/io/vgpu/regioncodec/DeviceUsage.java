package io.vgpu.regioncodec;

/**
 * One process's usage of one device, as the slot recorded it. Every value is an unsigned 64-bit
 * counter in the file; values of 2^63 and above saturate to {@link Long#MAX_VALUE}.
 *
 * @param deviceIndex device index, in {@code [0, 16)}
 * @param contextBytes {@code used[d].context_size}
 * @param moduleBytes {@code used[d].module_size} (never written by current HAMi-core)
 * @param dataBytes {@code used[d].data_size}
 * @param totalBytes {@code used[d].total}
 * @param monitorUsedBytes {@code monitorused[d]}: NVML-observed usage, filled only when the slot's
 *     hostpid matched NVML
 * @param smUtilPercent {@code device_util[d].sm_util}; always 0 in layout L0a, which has no such
 *     field
 */
public record DeviceUsage(
    int deviceIndex,
    long contextBytes,
    long moduleBytes,
    long dataBytes,
    long totalBytes,
    long monitorUsedBytes,
    long smUtilPercent) {
  /** Validates ranges. */
  public DeviceUsage {
    Checks.index(deviceIndex, RegionFile.MAX_DEVICES, "deviceIndex");
    Checks.nonNegative(contextBytes, "contextBytes");
    Checks.nonNegative(moduleBytes, "moduleBytes");
    Checks.nonNegative(dataBytes, "dataBytes");
    Checks.nonNegative(totalBytes, "totalBytes");
    Checks.nonNegative(monitorUsedBytes, "monitorUsedBytes");
    Checks.nonNegative(smUtilPercent, "smUtilPercent");
  }

  /** A usage with only the total and its breakdown set (monitor and utilization 0). */
  public static DeviceUsage ofMemory(
      int deviceIndex, long contextBytes, long moduleBytes, long dataBytes) {
    return new DeviceUsage(
        deviceIndex,
        contextBytes,
        moduleBytes,
        dataBytes,
        contextBytes + moduleBytes + dataBytes,
        0,
        0);
  }

  /** An all-zero usage of one device. */
  public static DeviceUsage zero(int deviceIndex) {
    return new DeviceUsage(deviceIndex, 0, 0, 0, 0, 0, 0);
  }
}

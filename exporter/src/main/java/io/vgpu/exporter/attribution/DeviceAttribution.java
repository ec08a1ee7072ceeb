package io.vgpu.exporter.attribution;

import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;

/**
 * One container's use of one of its devices.
 *
 * @param index the container's device index (region order)
 * @param uuid the GPU uuid the region records ("" when none)
 * @param smUtilization reconciled SM utilization (0-1): NVML's per-process means summed over the
 *     container's host pids; empty exactly when {@code unknown} is present
 * @param unknown why {@code smUtilization} is empty
 * @param regionSmUtilization what the region claims ({@code Σ sm_util / 100} over live slots)
 * @param regionMonitorUsedBytes what the region's {@code monitorused} claims
 * @param nvmlMemoryBytes NVML's used memory summed over the container's host pids on this GPU
 * @param usedBytes region usage of live, non-zombie slots
 * @param zombieBytes region usage still held by zombie slots
 * @param smLimitPercent the region's SM limit (0 or >= 100: none)
 */
public record DeviceAttribution(
    int index,
    String uuid,
    OptionalDouble smUtilization,
    Optional<UnknownReason> unknown,
    double regionSmUtilization,
    long regionMonitorUsedBytes,
    OptionalLong nvmlMemoryBytes,
    long usedBytes,
    long zombieBytes,
    int smLimitPercent) {
  public DeviceAttribution {
    Objects.requireNonNull(uuid, "uuid");
    Objects.requireNonNull(smUtilization, "smUtilization");
    Objects.requireNonNull(unknown, "unknown");
    Objects.requireNonNull(nvmlMemoryBytes, "nvmlMemoryBytes");
    if (smUtilization.isPresent() == unknown.isPresent()) {
      throw new IllegalArgumentException("utilization xor a reason: " + smUtilization + unknown);
    }
    if (smUtilization.isPresent()
        && !(smUtilization.getAsDouble() >= 0 && smUtilization.getAsDouble() <= 1)) {
      throw new IllegalArgumentException("utilization must be in [0,1]: " + smUtilization);
    }
  }

  /** Whether the container ran above its SM limit by the reconciled utilization. */
  public boolean overSmLimit() {
    return smLimitPercent > 0
        && smLimitPercent < 100
        && smUtilization.isPresent()
        && smUtilization.getAsDouble() * 100 > smLimitPercent;
  }
}

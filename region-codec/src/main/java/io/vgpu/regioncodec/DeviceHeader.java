package io.vgpu.regioncodec;

import java.util.Objects;

/**
 * One device's header entry: its uuid and the limits the container runs under.
 *
 * @param index device index in the region, in {@code [0, 16)}
 * @param uuid the NUL-terminated uuid, {@code ""} when its first byte is 0; bytes that are not
 *     printable UTF-8 are replaced by U+FFFD
 * @param memoryLimitBytes {@code limit[d]}, 0 = unlimited; values of 2^63 and above saturate to
 *     {@link Long#MAX_VALUE}
 * @param smLimitPercent {@code sm_limit[d]}, 0 or at least 100 = unlimited; saturates to {@link
 *     Integer#MAX_VALUE}
 */
public record DeviceHeader(int index, String uuid, long memoryLimitBytes, int smLimitPercent) {
  /** Validates ranges. */
  public DeviceHeader {
    Checks.index(index, RegionFile.MAX_DEVICES, "index");
    Objects.requireNonNull(uuid, "uuid");
    Checks.nonNegative(memoryLimitBytes, "memoryLimitBytes");
    Checks.nonNegative(smLimitPercent, "smLimitPercent");
  }

  /** Whether a memory limit is set. */
  public boolean hasMemoryLimit() {
    return memoryLimitBytes != 0;
  }

  /** Whether an SM limit below 100 % is set. */
  public boolean hasSmLimit() {
    return smLimitPercent > 0 && smLimitPercent < 100;
  }
}

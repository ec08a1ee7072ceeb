package io.vgpu.exporter.nvml;

import java.util.Objects;
import java.util.Optional;

/**
 * Whether NVML is usable, and if not why.
 *
 * @param up true while NVML is initialised and the last poll enumerated the GPUs
 * @param reason empty when up; otherwise a one-line reason for /readyz
 * @param lastError the return code that took NVML down
 * @param driverVersion the driver version while up
 */
public record NvmlStatus(
    boolean up, String reason, Optional<NvmlReturn> lastError, Optional<String> driverVersion) {
  /** The reason before the sampler's first poll: nothing has failed yet. */
  public static final String NOT_POLLED_YET = "nvml: not polled yet";

  public NvmlStatus {
    Objects.requireNonNull(reason, "reason");
    Objects.requireNonNull(lastError, "lastError");
    Objects.requireNonNull(driverVersion, "driverVersion");
    if (up != reason.isEmpty()) {
      throw new IllegalArgumentException("a reason exactly when down: up=" + up + " " + reason);
    }
  }

  public static NvmlStatus up(Optional<String> driverVersion) {
    return new NvmlStatus(true, "", Optional.empty(), driverVersion);
  }

  public static NvmlStatus down(String reason, Optional<NvmlReturn> error) {
    return new NvmlStatus(false, reason, error, Optional.empty());
  }

  /**
   * True before the first poll: NVML is neither up nor known to be broken (a freshly started
   * exporter must not report a failed driver for the first interval).
   */
  public boolean notPolledYet() {
    return !up && NOT_POLLED_YET.equals(reason) && lastError.isEmpty();
  }
}

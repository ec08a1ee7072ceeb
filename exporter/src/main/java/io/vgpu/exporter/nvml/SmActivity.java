package io.vgpu.exporter.nvml;

import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;

/**
 * SM activity of a MIG GPU instance from NVML GPM ({@code NVML_GPM_METRIC_SM_UTIL} between two
 * samples one poll apart): a ratio, or why there is none. Never a silent 0.
 *
 * @param ratio share of the instance's SMs busy over the last poll interval (0-1)
 * @param unknown why {@code ratio} is empty; present exactly when it is
 */
public record SmActivity(OptionalDouble ratio, Optional<Reason> unknown) {
  /** Why a MIG instance's SM activity is unknown; the label is {@code reason}'s value. */
  public enum Reason {
    /** The GPU has no GPM counters (before Hopper), or nvmlGpmQueryDeviceSupport says no. */
    GPM_UNSUPPORTED("gpm_unsupported"),
    /** The driver has no GPM functions (before R520). */
    DRIVER_WITHOUT_GPM("driver_without_gpm"),
    /** Only one sample of the instance so far: the next poll has the value. */
    FIRST_SAMPLE("first_sample"),
    /** An NVML GPM call failed (allocating, sampling, or computing the metric). */
    GPM_ERROR("gpm_error"),
    /** NVML did not tell the device's GPU instance id. */
    INSTANCE_UNKNOWN("instance_unknown"),
    /** More instances than the sampler keeps samples for. */
    SAMPLE_LIMIT("sample_limit");

    private final String label;

    Reason(String label) {
      this.label = label;
    }

    public String label() {
      return label;
    }
  }

  public SmActivity {
    Objects.requireNonNull(ratio, "ratio");
    Objects.requireNonNull(unknown, "unknown");
    if (ratio.isPresent() == unknown.isPresent()) {
      throw new IllegalArgumentException("a ratio xor a reason");
    }
    if (ratio.isPresent() && !(ratio.getAsDouble() >= 0 && ratio.getAsDouble() <= 1)) {
      throw new IllegalArgumentException("ratio out of [0, 1]: " + ratio);
    }
  }

  public static SmActivity of(double ratio) {
    return new SmActivity(OptionalDouble.of(ratio), Optional.empty());
  }

  public static SmActivity unknown(Reason why) {
    return new SmActivity(OptionalDouble.empty(), Optional.of(why));
  }
}

package io.vgpu.exporter.nvml;

import java.util.EnumMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * Health readings of one physical GPU at one poll. A reading the GPU or driver cannot give is
 * absent, and {@link #unavailable()} says why (NOT_SUPPORTED, FUNCTION_NOT_FOUND on an older
 * driver, NO_PERMISSION, ...): never a 0 that looks like a healthy value.
 *
 * @param powerMilliwatts board power draw ({@code nvmlDeviceGetPowerUsage})
 * @param temperatureCelsius GPU core temperature ({@code NVML_TEMPERATURE_GPU})
 * @param clockEventReasons the clock event reason mask ({@link ClockEventReason})
 * @param volatileEcc ECC errors since the driver loaded
 * @param aggregateEcc ECC errors over the GPU's life
 * @param remappedRows the row remapper's state
 * @param xidErrors XID errors seen through NVML events since the exporter started, by {@code xid}
 *     label (a number, or "other" beyond the label bound); empty when none were seen
 * @param unavailable per reading left out, the return code that kept it away
 */
public record DeviceHealth(
    OptionalLong powerMilliwatts,
    OptionalLong temperatureCelsius,
    OptionalLong clockEventReasons,
    Optional<EccCounts> volatileEcc,
    Optional<EccCounts> aggregateEcc,
    Optional<RemappedRows> remappedRows,
    Map<String, Long> xidErrors,
    Map<HealthField, NvmlReturn> unavailable) {

  /** No readings and no reasons: MIG devices and snapshots built without health. */
  public static final DeviceHealth NONE =
      new DeviceHealth(
          OptionalLong.empty(),
          OptionalLong.empty(),
          OptionalLong.empty(),
          Optional.empty(),
          Optional.empty(),
          Optional.empty(),
          Map.of(),
          Map.of());

  public DeviceHealth {
    Objects.requireNonNull(powerMilliwatts, "powerMilliwatts");
    Objects.requireNonNull(temperatureCelsius, "temperatureCelsius");
    Objects.requireNonNull(clockEventReasons, "clockEventReasons");
    Objects.requireNonNull(volatileEcc, "volatileEcc");
    Objects.requireNonNull(aggregateEcc, "aggregateEcc");
    Objects.requireNonNull(remappedRows, "remappedRows");
    xidErrors = Map.copyOf(xidErrors);
    unavailable = unavailable.isEmpty() ? Map.of() : new EnumMap<>(unavailable);
  }

  @Override
  public Map<HealthField, NvmlReturn> unavailable() {
    return java.util.Collections.unmodifiableMap(unavailable);
  }

  /** The same readings with the XID counts and the XID reason as the event watcher has them. */
  public DeviceHealth withXid(Map<String, Long> counts, Optional<NvmlReturn> reason) {
    Map<HealthField, NvmlReturn> u = new EnumMap<>(HealthField.class);
    u.putAll(unavailable);
    u.remove(HealthField.XID_EVENTS);
    reason.ifPresent(r -> u.put(HealthField.XID_EVENTS, r));
    return new DeviceHealth(
        powerMilliwatts,
        temperatureCelsius,
        clockEventReasons,
        volatileEcc,
        aggregateEcc,
        remappedRows,
        counts,
        u);
  }
}

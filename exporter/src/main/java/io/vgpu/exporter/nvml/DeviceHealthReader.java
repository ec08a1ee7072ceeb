package io.vgpu.exporter.nvml;

import java.util.EnumMap;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.function.Consumer;

/**
 * Reads the health of one physical GPU ({@link DeviceHealth}) on the sampler thread. A reading the
 * GPU or driver does not have (NOT_SUPPORTED, FUNCTION_NOT_FOUND) is absent with that reason and
 * not an error; any other failure is absent with its code and goes to the sampler's error
 * accounting.
 */
final class DeviceHealthReader {
  private final Consumer<NvmlResult<?>> countFailure;

  /**
   * @param countFailure the sampler's error accounting (it skips NOT_SUPPORTED itself)
   */
  DeviceHealthReader(Consumer<NvmlResult<?>> countFailure) {
    this.countFailure = countFailure;
  }

  DeviceHealth read(NvmlClient client, DeviceHandle device) {
    Map<HealthField, NvmlReturn> unavailable = new EnumMap<>(HealthField.class);
    OptionalLong power =
        asLong(reading(HealthField.POWER, client.powerMilliwatts(device), unavailable));
    OptionalLong temperature =
        asLong(reading(HealthField.TEMPERATURE, client.temperatureCelsius(device), unavailable));
    OptionalLong clocks =
        asLong(
            reading(
                HealthField.CLOCK_EVENT_REASONS, client.clockEventReasons(device), unavailable));
    Optional<EccCounts> volatileEcc =
        reading(HealthField.ECC_VOLATILE, client.eccErrors(device, false), unavailable);
    Optional<EccCounts> aggregateEcc =
        reading(HealthField.ECC_AGGREGATE, client.eccErrors(device, true), unavailable);
    Optional<RemappedRows> rows =
        reading(HealthField.REMAPPED_ROWS, client.remappedRows(device), unavailable);
    return new DeviceHealth(
        power, temperature, clocks, volatileEcc, aggregateEcc, rows, Map.of(), unavailable);
  }

  private <T> Optional<T> reading(
      HealthField field, NvmlResult<T> result, Map<HealthField, NvmlReturn> unavailable) {
    return switch (result) {
      case NvmlResult.Ok<T> ok -> Optional.of(ok.value());
      case NvmlResult.Err<T> err -> {
        unavailable.put(field, err.code());
        if (!err.code().equals(NvmlReturn.FUNCTION_NOT_FOUND)) {
          countFailure.accept(err);
        }
        yield Optional.empty();
      }
    };
  }

  private static OptionalLong asLong(Optional<Long> v) {
    return v.map(OptionalLong::of).orElse(OptionalLong.empty());
  }
}

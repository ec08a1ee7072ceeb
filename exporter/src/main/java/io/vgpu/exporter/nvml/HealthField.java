package io.vgpu.exporter.nvml;

/**
 * The device health readings the sampler takes per physical GPU; each is either read or absent with
 * the return code that kept it away ({@link DeviceHealth#unavailable()}).
 */
public enum HealthField {
  POWER("power", "nvmlDeviceGetPowerUsage"),
  TEMPERATURE("temperature", "nvmlDeviceGetTemperature"),
  CLOCK_EVENT_REASONS("clock_event_reasons", "nvmlDeviceGetCurrentClocksEventReasons"),
  ECC_VOLATILE("ecc_volatile", "nvmlDeviceGetTotalEccErrors"),
  ECC_AGGREGATE("ecc_aggregate", "nvmlDeviceGetTotalEccErrors"),
  REMAPPED_ROWS("remapped_rows", "nvmlDeviceGetRemappedRows"),
  XID_EVENTS("xid_events", "nvmlDeviceRegisterEvents");

  private final String label;
  private final String function;

  HealthField(String label, String function) {
    this.label = label;
    this.function = function;
  }

  /** The {@code field} label value. */
  public String label() {
    return label;
  }

  /** The NVML function that answers it. */
  public String function() {
    return function;
  }
}

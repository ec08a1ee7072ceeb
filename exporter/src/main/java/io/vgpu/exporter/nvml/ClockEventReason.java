package io.vgpu.exporter.nvml;

/**
 * The bits of {@code nvmlDeviceGetCurrentClocksEventReasons} (formerly "clocks throttle reasons"),
 * with the values of NVML's {@code nvmlClocksEventReason*} / {@code nvmlClocksThrottleReason*}
 * defines. {@link #OTHER} stands for every bit a newer driver may add: the label set stays fixed by
 * this code, whatever mask the driver returns.
 */
public enum ClockEventReason {
  GPU_IDLE("gpu_idle", 0x1L),
  APPLICATIONS_CLOCKS_SETTING("applications_clocks_setting", 0x2L),
  SW_POWER_CAP("sw_power_cap", 0x4L),
  HW_SLOWDOWN("hw_slowdown", 0x8L),
  SYNC_BOOST("sync_boost", 0x10L),
  SW_THERMAL_SLOWDOWN("sw_thermal_slowdown", 0x20L),
  HW_THERMAL_SLOWDOWN("hw_thermal_slowdown", 0x40L),
  HW_POWER_BRAKE_SLOWDOWN("hw_power_brake_slowdown", 0x80L),
  DISPLAY_CLOCK_SETTING("display_clock_setting", 0x100L),
  /** Any bit not named above. */
  OTHER("other", 0L);

  private static final long KNOWN = 0x1FFL;

  private final String label;
  private final long bit;

  ClockEventReason(String label, long bit) {
    this.label = label;
    this.bit = bit;
  }

  /** The {@code reason} label value. */
  public String label() {
    return label;
  }

  /** Whether {@code mask} (as NVML returned it) has this reason set. */
  public boolean activeIn(long mask) {
    return this == OTHER ? (mask & ~KNOWN) != 0 : (mask & bit) != 0;
  }
}

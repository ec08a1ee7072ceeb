package io.vgpu.exporter.nvml;

/**
 * An {@code nvmlReturn_t}. Codes NVML may add later are kept as numbers and named "unknown".
 *
 * @param code the raw return code
 */
public record NvmlReturn(int code) {
  public static final NvmlReturn SUCCESS = new NvmlReturn(0);
  public static final NvmlReturn UNINITIALIZED = new NvmlReturn(1);
  public static final NvmlReturn INVALID_ARGUMENT = new NvmlReturn(2);
  public static final NvmlReturn NOT_SUPPORTED = new NvmlReturn(3);
  public static final NvmlReturn NO_PERMISSION = new NvmlReturn(4);
  public static final NvmlReturn NOT_FOUND = new NvmlReturn(6);
  public static final NvmlReturn INSUFFICIENT_SIZE = new NvmlReturn(7);
  public static final NvmlReturn DRIVER_NOT_LOADED = new NvmlReturn(9);
  public static final NvmlReturn TIMEOUT = new NvmlReturn(10);
  public static final NvmlReturn LIBRARY_NOT_FOUND = new NvmlReturn(12);
  public static final NvmlReturn FUNCTION_NOT_FOUND = new NvmlReturn(13);
  public static final NvmlReturn GPU_IS_LOST = new NvmlReturn(15);
  public static final NvmlReturn ARGUMENT_VERSION_MISMATCH = new NvmlReturn(25);
  public static final NvmlReturn UNKNOWN = new NvmlReturn(999);

  public boolean isSuccess() {
    return code == 0;
  }

  /**
   * True when the code means NVML as a whole is unusable until it is initialised again (driver
   * gone, library not initialised, GPU fallen off the bus, unknown driver error), as opposed to a
   * query one device does not support.
   */
  public boolean needsReinit() {
    return code == 1
        || code == 9
        || code == 12
        || code == 15
        || code == 16
        || code == 18
        || code == 999;
  }

  /** NVML's name for the code, lower case ({@code "gpu_is_lost"}); "unknown" for others. */
  public String name() {
    return switch (code) {
      case 0 -> "success";
      case 1 -> "uninitialized";
      case 2 -> "invalid_argument";
      case 3 -> "not_supported";
      case 4 -> "no_permission";
      case 5 -> "already_initialized";
      case 6 -> "not_found";
      case 7 -> "insufficient_size";
      case 8 -> "insufficient_power";
      case 9 -> "driver_not_loaded";
      case 10 -> "timeout";
      case 11 -> "irq_issue";
      case 12 -> "library_not_found";
      case 13 -> "function_not_found";
      case 14 -> "corrupted_inforom";
      case 15 -> "gpu_is_lost";
      case 16 -> "reset_required";
      case 17 -> "operating_system";
      case 18 -> "lib_rm_version_mismatch";
      case 19 -> "in_use";
      case 20 -> "memory";
      case 21 -> "no_data";
      case 25 -> "argument_version_mismatch";
      case 27 -> "not_ready";
      case 28 -> "gpu_not_found";
      case 29 -> "invalid_state";
      default -> "unknown";
    };
  }

  /** The value of the {@code return_code} metric label: the number, stable across NVML versions. */
  public String label() {
    return Integer.toString(code);
  }

  @Override
  public String toString() {
    return name() + " (" + code + ")";
  }
}

package io.vgpu.exporter.attribution;

/**
 * Why a container's utilization cannot be attributed. The utilization series is then absent (NaN on
 * the HAMi-compatible family) and {@code vgpu_container_sm_utilization_unknown{reason}} is 1: never
 * a silent 0.
 */
public enum UnknownReason {
  /** NVML is disabled, not loaded, or down. */
  NVML_UNAVAILABLE("nvml_unavailable"),
  /** The region names a GPU uuid NVML does not list. */
  GPU_NOT_IN_NVML("gpu_not_in_nvml"),
  /** NVML has no per-process utilization for this GPU (e.g. MIG). */
  NVML_UNSUPPORTED("nvml_unsupported"),
  /** A live slot's pid could not be mapped to one host process (ambiguous, or not seen yet). */
  PID_UNRESOLVED("pid_unresolved"),
  /** The region left the device's uuid empty. */
  NO_DEVICE_UUID("no_device_uuid"),
  /** The container appeared after the latest reconciliation. */
  NOT_RECONCILED_YET("not_reconciled_yet");

  private final String label;

  UnknownReason(String label) {
    this.label = label;
  }

  public String label() {
    return label;
  }
}

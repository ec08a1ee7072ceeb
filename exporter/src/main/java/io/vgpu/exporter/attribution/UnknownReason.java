package io.vgpu.exporter.attribution;

import io.vgpu.exporter.text.SnakeCaseLabel;

/**
 * Why a container's utilization cannot be attributed. The utilization series is then absent (NaN on
 * the HAMi-compatible family) and {@code vgpu_container_sm_utilization_unknown{reason}} is 1: never
 * a silent 0.
 */
public enum UnknownReason implements SnakeCaseLabel {
  /** NVML is disabled, not loaded, or down. */
  NVML_UNAVAILABLE,
  /** The region names a GPU uuid NVML does not list. */
  GPU_NOT_IN_NVML,
  /** NVML has no per-process utilization for this GPU (e.g. MIG). */
  NVML_UNSUPPORTED,
  /** A live slot's pid could not be mapped to one host process (ambiguous, or not seen yet). */
  PID_UNRESOLVED,
  /** The region left the device's uuid empty. */
  NO_DEVICE_UUID,
  /** The container appeared after the latest reconciliation. */
  NOT_RECONCILED_YET;
}

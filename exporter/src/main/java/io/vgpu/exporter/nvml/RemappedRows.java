package io.vgpu.exporter.nvml;

/**
 * {@code nvmlDeviceGetRemappedRows} (Ampere and newer): HBM rows the GPU replaced with spares.
 *
 * @param correctable rows remapped for correctable errors
 * @param uncorrectable rows remapped for uncorrectable errors
 * @param pending a remapping waits for the next GPU reset
 * @param failure a remapping failed at some point (no spare row left): the GPU needs service
 */
public record RemappedRows(long correctable, long uncorrectable, boolean pending, boolean failure) {
  public RemappedRows {
    if (correctable < 0 || uncorrectable < 0) {
      throw new IllegalArgumentException("negative row count " + correctable + "/" + uncorrectable);
    }
  }
}

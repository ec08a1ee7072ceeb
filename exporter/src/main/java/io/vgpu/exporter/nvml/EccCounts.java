package io.vgpu.exporter.nvml;

/**
 * One ECC counter pair of {@code nvmlDeviceGetTotalEccErrors} (volatile: since the driver loaded;
 * aggregate: the GPU's lifetime, kept in its InfoROM).
 *
 * @param corrected single-bit, corrected errors
 * @param uncorrected double-bit, uncorrected errors
 */
public record EccCounts(long corrected, long uncorrected) {
  public EccCounts {
    if (corrected < 0 || uncorrected < 0) {
      throw new IllegalArgumentException("negative ECC count " + corrected + "/" + uncorrected);
    }
  }
}

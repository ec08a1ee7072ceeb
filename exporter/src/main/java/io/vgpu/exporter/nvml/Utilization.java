package io.vgpu.exporter.nvml;

/**
 * {@code nvmlDeviceGetUtilizationRates}: percent of the last sample period during which a kernel
 * ran ({@code gpu}) and during which memory was read or written ({@code memory}).
 */
public record Utilization(int gpuPercent, int memoryPercent) {
  public Utilization {
    if (gpuPercent < 0 || gpuPercent > 100 || memoryPercent < 0 || memoryPercent > 100) {
      throw new IllegalArgumentException(
          "percent out of range " + gpuPercent + "/" + memoryPercent);
    }
  }
}

package io.vgpu.exporter.nvml;

/** Device memory in bytes, as {@code nvmlDeviceGetMemoryInfo} reports it. */
public record MemoryInfo(long totalBytes, long usedBytes) {
  public MemoryInfo {
    if (totalBytes < 0 || usedBytes < 0) {
      throw new IllegalArgumentException("negative memory " + totalBytes + "/" + usedBytes);
    }
  }
}

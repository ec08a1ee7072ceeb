package io.vgpu.exporter.nvml;

/**
 * One {@code nvmlProcessUtilizationSample_t}. NVML returns host pids here on every driver.
 *
 * @param pid process id
 * @param timestampMicros CPU time of the sample, microseconds since the epoch
 * @param smPercent percent of the sample period the process had kernels running
 * @param memoryPercent percent of the sample period the process read or wrote memory
 */
public record ProcessSample(int pid, long timestampMicros, int smPercent, int memoryPercent) {
  public ProcessSample {
    if (pid <= 0 || timestampMicros < 0) {
      throw new IllegalArgumentException("bad sample pid/ts " + pid + "/" + timestampMicros);
    }
    if (smPercent < 0 || smPercent > 100 || memoryPercent < 0 || memoryPercent > 100) {
      throw new IllegalArgumentException("percent out of range " + smPercent + "/" + memoryPercent);
    }
  }
}

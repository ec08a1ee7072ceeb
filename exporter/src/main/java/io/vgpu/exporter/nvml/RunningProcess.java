package io.vgpu.exporter.nvml;

import java.util.OptionalLong;

/**
 * A compute process with a context on a GPU. On drivers 535-560 called from inside a pid namespace
 * the pid is in that namespace; the exporter runs in the host namespace, where it is a host pid.
 *
 * @param pid process id as NVML reports it
 * @param usedBytes device memory NVML attributes to the process; empty when NVML cannot tell
 *     (NVML_VALUE_NOT_AVAILABLE, e.g. on Windows WDDM or some vGPU setups)
 */
public record RunningProcess(int pid, OptionalLong usedBytes) {
  public RunningProcess {
    if (pid <= 0) {
      throw new IllegalArgumentException("pid must be positive, got " + pid);
    }
    if (usedBytes.isPresent() && usedBytes.getAsLong() < 0) {
      throw new IllegalArgumentException("negative usedBytes " + usedBytes);
    }
  }
}

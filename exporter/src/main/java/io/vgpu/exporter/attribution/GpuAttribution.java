package io.vgpu.exporter.attribution;

import java.util.Objects;

/**
 * One GPU seen from the attribution side.
 *
 * @param uuid GPU uuid
 * @param containers containers whose regions name this GPU
 * @param processes GPU processes NVML lists or sampled
 * @param unattributedProcesses of those, the ones no known container owns
 * @param unattributedBytes NVML memory of the unattributed ones
 */
public record GpuAttribution(
    String uuid, int containers, int processes, int unattributedProcesses, long unattributedBytes) {
  public GpuAttribution {
    Objects.requireNonNull(uuid, "uuid");
  }
}

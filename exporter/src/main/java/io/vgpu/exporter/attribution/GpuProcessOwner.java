package io.vgpu.exporter.attribution;

import io.vgpu.hostpid.ProcessOwner;
import java.util.Objects;
import java.util.Optional;

/**
 * One GPU process NVML listed or sampled, with the pod cgroup /proc put it in, as one
 * reconciliation saw it: what the attribution of containers without a region starts from.
 *
 * @param gpuUuid the GPU NVML listed it on
 * @param hostPid its pid on the host
 * @param owner its pod (and container id) by cgroup; empty for a process in no pod, or gone
 * @param attributed a container with a region already holds it (a slot or an unslotted process)
 */
public record GpuProcessOwner(
    String gpuUuid, int hostPid, Optional<ProcessOwner> owner, boolean attributed) {
  public GpuProcessOwner {
    Objects.requireNonNull(gpuUuid, "gpuUuid");
    Objects.requireNonNull(owner, "owner");
  }
}

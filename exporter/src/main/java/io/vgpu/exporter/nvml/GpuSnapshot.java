package io.vgpu.exporter.nvml;

import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;

/**
 * What NVML said about one GPU at one poll. Every optional is empty when its query failed or is not
 * supported on this GPU, so "unknown" is never confused with 0.
 *
 * @param identity index, uuid, name
 * @param memory device memory
 * @param utilizationRatio device SM busy ratio (0-1), averaged over the sampler's window
 * @param memoryUtilizationRatio memory controller busy ratio (0-1), latest poll
 * @param processes compute processes with a context on the GPU (pids as NVML reports them)
 * @param smUtilizationByPid mean SM utilization (0-1) over the window per pid NVML sampled; pids of
 *     {@code processes} missing here were idle for the whole window
 * @param health power, temperature, clock event reasons, ECC, remapped rows and XIDs of a physical
 *     GPU; {@link DeviceHealth#NONE} for a MIG device
 * @param mig a MIG device's parent, instance ids, profile and SM activity; empty for a physical GPU
 */
public record GpuSnapshot(
    GpuIdentity identity,
    Optional<MemoryInfo> memory,
    OptionalDouble utilizationRatio,
    OptionalDouble memoryUtilizationRatio,
    Optional<List<RunningProcess>> processes,
    Optional<Map<Integer, Double>> smUtilizationByPid,
    DeviceHealth health,
    Optional<MigInstance> mig) {
  public GpuSnapshot {
    Objects.requireNonNull(health, "health");
    Objects.requireNonNull(mig, "mig");
    Objects.requireNonNull(identity, "identity");
    Objects.requireNonNull(memory, "memory");
    Objects.requireNonNull(utilizationRatio, "utilizationRatio");
    Objects.requireNonNull(memoryUtilizationRatio, "memoryUtilizationRatio");
    processes = processes.map(List::copyOf);
    smUtilizationByPid = smUtilizationByPid.map(Map::copyOf);
  }

  /** A snapshot of a physical GPU. */
  public GpuSnapshot(
      GpuIdentity identity,
      Optional<MemoryInfo> memory,
      OptionalDouble utilizationRatio,
      OptionalDouble memoryUtilizationRatio,
      Optional<List<RunningProcess>> processes,
      Optional<Map<Integer, Double>> smUtilizationByPid,
      DeviceHealth health) {
    this(
        identity,
        memory,
        utilizationRatio,
        memoryUtilizationRatio,
        processes,
        smUtilizationByPid,
        health,
        Optional.empty());
  }

  /** A snapshot without health readings. */
  public GpuSnapshot(
      GpuIdentity identity,
      Optional<MemoryInfo> memory,
      OptionalDouble utilizationRatio,
      OptionalDouble memoryUtilizationRatio,
      Optional<List<RunningProcess>> processes,
      Optional<Map<Integer, Double>> smUtilizationByPid) {
    this(
        identity,
        memory,
        utilizationRatio,
        memoryUtilizationRatio,
        processes,
        smUtilizationByPid,
        DeviceHealth.NONE);
  }

  /** The same snapshot with other health readings. */
  public GpuSnapshot withHealth(DeviceHealth newHealth) {
    return copy(processes, newHealth, mig);
  }

  /** The same snapshot as a MIG device. */
  public GpuSnapshot withMig(MigInstance instance) {
    return copy(processes, health, Optional.of(instance));
  }

  /**
   * The same snapshot without the processes of {@code pids}: a MIG-enabled GPU lists its MIG
   * devices' processes as its own too (NVML's aggregate view), and each belongs to its MIG device.
   */
  public GpuSnapshot withoutProcesses(java.util.Set<Integer> pids) {
    if (pids.isEmpty() || processes.isEmpty()) {
      return this;
    }
    return copy(
        processes.map(l -> l.stream().filter(p -> !pids.contains(p.pid())).toList()), health, mig);
  }

  private GpuSnapshot copy(
      Optional<List<RunningProcess>> newProcesses,
      DeviceHealth newHealth,
      Optional<MigInstance> newMig) {
    return new GpuSnapshot(
        identity,
        memory,
        utilizationRatio,
        memoryUtilizationRatio,
        newProcesses,
        smUtilizationByPid,
        newHealth,
        newMig);
  }

  /** Whether NVML's per-process utilization works on this GPU. */
  public boolean processUtilizationAvailable() {
    return smUtilizationByPid.isPresent() && processes.isPresent();
  }

  /**
   * SM utilization (0-1) of one pid: 0 when NVML lists it but sampled nothing, empty if unknown.
   */
  public OptionalDouble smUtilizationOf(int pid) {
    if (!processUtilizationAvailable()) {
      return OptionalDouble.empty();
    }
    Double v = smUtilizationByPid.orElseThrow().get(pid);
    return OptionalDouble.of(v == null ? 0.0 : v);
  }

  /** NVML's used memory of one pid, empty when the pid is not on this GPU or NVML cannot tell. */
  public java.util.OptionalLong memoryOf(int pid) {
    for (RunningProcess p : processes.orElse(List.of())) {
      if (p.pid() == pid) {
        return p.usedBytes();
      }
    }
    return java.util.OptionalLong.empty();
  }
}

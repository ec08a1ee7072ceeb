package io.vgpu.exporter.attribution;

import io.vgpu.exporter.discovery.ContainerKey;
import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * Usage counters as of one accounting pass: immutable, published for scrapes. Integers where the
 * accounting is exact (SM busy in percent × microseconds, energy in millijoules), so the scrape
 * only divides.
 *
 * @param at the pass's time
 * @param containers per container and device, sorted by key and index
 * @param gpus per GPU the accounting has seen, sorted by uuid
 */
public record UsageSnapshot(Instant at, List<ContainerUsage> containers, List<GpuUsage> gpus) {
  public UsageSnapshot {
    Objects.requireNonNull(at, "at");
    containers = List.copyOf(containers);
    gpus = List.copyOf(gpus);
  }

  /** Before the first pass. */
  public static UsageSnapshot empty(Instant at) {
    return new UsageSnapshot(at, List.of(), List.of());
  }

  /**
   * One container's use of one device since the exporter first saw it.
   *
   * @param key pod UID and container name
   * @param namespace the pod's namespace ("" while unknown)
   * @param pod the pod's name ("" while unknown)
   * @param deviceIndex the container's device index
   * @param deviceUuid the GPU's uuid as the region names it
   * @param smBusyPercentMicros Σ sm percent × microseconds of the container's samples on this GPU
   * @param usedByteSeconds ∫ used bytes dt, held from each pass to the next
   * @param limitByteSeconds ∫ limit bytes dt, likewise
   * @param energyMillijoules the GPU energy given to this container
   * @param present whether the latest pass saw the container (false: within the grace period)
   * @param unknown why the latest pass could not attribute NVML usage to it, if it could not
   */
  public record ContainerUsage(
      ContainerKey key,
      String namespace,
      String pod,
      int deviceIndex,
      String deviceUuid,
      long smBusyPercentMicros,
      double usedByteSeconds,
      double limitByteSeconds,
      long energyMillijoules,
      boolean present,
      Optional<UnknownReason> unknown) {
    public ContainerUsage {
      Objects.requireNonNull(key, "key");
      Objects.requireNonNull(namespace, "namespace");
      Objects.requireNonNull(pod, "pod");
      Objects.requireNonNull(deviceUuid, "deviceUuid");
      Objects.requireNonNull(unknown, "unknown");
    }

    public double smBusySeconds() {
      return smBusyPercentMicros / 1e8;
    }

    public double energyJoules() {
      return energyMillijoules / 1e3;
    }
  }

  /**
   * One GPU's energy: {@code Σ containers + unattributed + expired == device}, exactly, in mJ.
   *
   * @param uuid the GPU's uuid
   * @param index its NVML index
   * @param model its name
   * @param deviceMillijoules what the GPU's counter rose by while accounted
   * @param unattributedMillijoules what no container could be given (idle time, processes of no
   *     container)
   * @param expiredMillijoules what containers whose series have gone (grace period over) were given
   * @param unattributedBusyPercentMicros SM busy of processes of no container
   * @param unknown why the latest pass could not account this GPU's energy, if it could not
   */
  public record GpuUsage(
      String uuid,
      int index,
      String model,
      long deviceMillijoules,
      long unattributedMillijoules,
      long expiredMillijoules,
      long unattributedBusyPercentMicros,
      Optional<String> unknown) {
    public GpuUsage {
      Objects.requireNonNull(uuid, "uuid");
      Objects.requireNonNull(model, "model");
      Objects.requireNonNull(unknown, "unknown");
    }
  }
}

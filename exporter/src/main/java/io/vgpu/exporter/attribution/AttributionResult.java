package io.vgpu.exporter.attribution;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Function;
import java.util.stream.Collectors;

/**
 * One reconciliation: immutable, published for scrapes. A class rather than a record so that its
 * containers are indexed by key once, when it is made: every scrape looks them up per container and
 * device.
 */
public final class AttributionResult {
  private final Instant at;
  private final NvmlSnapshot nvml;
  private final List<ContainerAttribution> containers;
  private final List<GpuAttribution> gpus;
  private final History history;
  private final Map<ContainerKey, ContainerAttribution> byKey;
  private final List<GpuProcessOwner> gpuProcesses;

  /**
   * @param at when it ran
   * @param nvml the NVML snapshot it used
   * @param containers per container, sorted by key
   * @param gpus per GPU NVML listed
   * @param history what the next reconciliation needs to remember
   */
  public AttributionResult(
      Instant at,
      NvmlSnapshot nvml,
      List<ContainerAttribution> containers,
      List<GpuAttribution> gpus,
      History history) {
    this(at, nvml, containers, gpus, history, List.of());
  }

  /**
   * As above, with every GPU process and its owner ({@link #gpuProcesses}).
   *
   * @param gpuProcesses every GPU process NVML mentioned, with its pod by cgroup
   */
  public AttributionResult(
      Instant at,
      NvmlSnapshot nvml,
      List<ContainerAttribution> containers,
      List<GpuAttribution> gpus,
      History history,
      List<GpuProcessOwner> gpuProcesses) {
    this.gpuProcesses = List.copyOf(gpuProcesses);
    this.at = Objects.requireNonNull(at, "at");
    this.nvml = Objects.requireNonNull(nvml, "nvml");
    this.containers = List.copyOf(containers);
    this.gpus = List.copyOf(gpus);
    this.history = Objects.requireNonNull(history, "history");
    this.byKey =
        this.containers.stream()
            .collect(Collectors.toUnmodifiableMap(ContainerAttribution::key, Function.identity()));
  }

  /** Before the first reconciliation. */
  public static AttributionResult empty(Instant at) {
    return new AttributionResult(
        at,
        NvmlSnapshot.unavailable(at, "not reconciled yet"),
        List.of(),
        List.of(),
        History.EMPTY);
  }

  public Instant at() {
    return at;
  }

  public NvmlSnapshot nvml() {
    return nvml;
  }

  public List<ContainerAttribution> containers() {
    return containers;
  }

  public List<GpuAttribution> gpus() {
    return gpus;
  }

  /** Every GPU process NVML mentioned, with its pod by cgroup and whether a region holds it. */
  public List<GpuProcessOwner> gpuProcesses() {
    return gpuProcesses;
  }

  public History history() {
    return history;
  }

  public Optional<ContainerAttribution> container(ContainerKey key) {
    return Optional.ofNullable(byKey.get(key));
  }

  /** The containers by key (made once, with the result). */
  public Map<ContainerKey, ContainerAttribution> byKey() {
    return byKey;
  }

  public Optional<GpuAttribution> gpu(String uuid) {
    return gpus.stream().filter(g -> g.uuid().equals(uuid)).findFirst();
  }

  @Override
  public String toString() {
    return "AttributionResult[at="
        + at
        + ", nvml="
        + nvml
        + ", containers="
        + containers
        + ", gpus="
        + gpus
        + ", history="
        + history
        + "]";
  }
}

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
 * One reconciliation: immutable, published for scrapes.
 *
 * @param at when it ran
 * @param nvml the NVML snapshot it used
 * @param containers per container, sorted by key
 * @param gpus per GPU NVML listed
 * @param history what the next reconciliation needs to remember
 */
public record AttributionResult(
    Instant at,
    NvmlSnapshot nvml,
    List<ContainerAttribution> containers,
    List<GpuAttribution> gpus,
    History history) {
  public AttributionResult {
    Objects.requireNonNull(at, "at");
    Objects.requireNonNull(nvml, "nvml");
    containers = List.copyOf(containers);
    gpus = List.copyOf(gpus);
    Objects.requireNonNull(history, "history");
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

  public Optional<ContainerAttribution> container(ContainerKey key) {
    return Optional.ofNullable(byKey().get(key));
  }

  public Map<ContainerKey, ContainerAttribution> byKey() {
    return containers.stream()
        .collect(Collectors.toUnmodifiableMap(ContainerAttribution::key, Function.identity()));
  }

  public Optional<GpuAttribution> gpu(String uuid) {
    return gpus.stream().filter(g -> g.uuid().equals(uuid)).findFirst();
  }
}

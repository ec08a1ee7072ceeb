package io.vgpu.exporter.attribution;

import io.vgpu.exporter.discovery.ContainerKey;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * What one reconciliation hands the next: when unresolved slots were first seen (a slot becomes a
 * zombie only after a grace period, since the resolver's index may lag a new process), and per
 * container the activity and time totals.
 *
 * @param at when the reconciliation that produced it ran (empty before the first)
 * @param unresolvedSince first time each (file, pid) slot was seen without a process
 * @param containers per container
 */
public record History(
    Optional<Instant> at,
    Map<SlotRef, Instant> unresolvedSince,
    Map<ContainerKey, Container> containers) {
  public static final History EMPTY = new History(Optional.empty(), Map.of(), Map.of());

  public History {
    Objects.requireNonNull(at, "at");
    unresolvedSince = Map.copyOf(unresolvedSince);
    containers = Map.copyOf(containers);
  }

  /** A slot by file and in-container pid (slot indexes move when HAMi-core compacts). */
  public record SlotRef(Path region, int pid) {}

  /**
   * @param firstSeen first reconciliation that saw the container
   * @param lastActiveEpochSeconds newest evidence of a kernel (region last_kernel_time, or NVML
   *     utilization above 0), 0 when none
   * @param priorityBlockedSeconds running total
   * @param overSmLimitSeconds running totals by device index
   */
  public record Container(
      Instant firstSeen,
      long lastActiveEpochSeconds,
      double priorityBlockedSeconds,
      Map<Integer, Double> overSmLimitSeconds) {
    public Container {
      Objects.requireNonNull(firstSeen, "firstSeen");
      overSmLimitSeconds = Map.copyOf(overSmLimitSeconds);
    }
  }
}

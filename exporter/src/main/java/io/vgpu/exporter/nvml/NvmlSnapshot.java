package io.vgpu.exporter.nvml;

import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * The latest NVML poll: immutable, published by {@link NvmlSampler} for scrapes to read.
 *
 * @param takenAt when the poll finished
 * @param status whether NVML is usable
 * @param gpus one entry per GPU (physical and MIG) that answered; empty when NVML is down
 */
public record NvmlSnapshot(Instant takenAt, NvmlStatus status, List<GpuSnapshot> gpus) {
  public NvmlSnapshot {
    Objects.requireNonNull(takenAt, "takenAt");
    Objects.requireNonNull(status, "status");
    gpus = List.copyOf(gpus);
  }

  /** The snapshot before the first poll, or with NVML disabled. */
  public static NvmlSnapshot unavailable(Instant at, String reason) {
    return new NvmlSnapshot(at, NvmlStatus.down(reason, Optional.empty()), List.of());
  }

  public Optional<GpuSnapshot> byUuid(String uuid) {
    return gpus.stream().filter(g -> g.identity().uuid().equals(uuid)).findFirst();
  }
}

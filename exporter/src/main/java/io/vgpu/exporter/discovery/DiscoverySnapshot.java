package io.vgpu.exporter.discovery;

import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * What one discovery pass found. Immutable; scrapes read the latest one without locking.
 *
 * @param generation increases by one per pass (0 = no pass yet)
 * @param scannedAt when the pass finished
 * @param rootProblem why the cache root could not be read; empty when it could
 * @param containers container directories sorted by key
 */
public record DiscoverySnapshot(
    long generation,
    Instant scannedAt,
    Optional<String> rootProblem,
    List<DiscoveredContainer> containers) {
  public DiscoverySnapshot {
    Objects.requireNonNull(scannedAt, "scannedAt");
    Objects.requireNonNull(rootProblem, "rootProblem");
    containers = List.copyOf(containers);
  }

  static DiscoverySnapshot initial() {
    return new DiscoverySnapshot(0, Instant.EPOCH, Optional.of("no discovery pass yet"), List.of());
  }

  public boolean rootReadable() {
    return rootProblem.isEmpty();
  }

  /** Files currently mapped. */
  public int filesMapped() {
    int n = 0;
    for (DiscoveredContainer c : containers) {
      for (DiscoveredFile f : c.files()) {
        if (f.region().isPresent()) {
          n++;
        }
      }
    }
    return n;
  }
}

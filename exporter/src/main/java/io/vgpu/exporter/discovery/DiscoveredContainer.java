package io.vgpu.exporter.discovery;

import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Objects;

/**
 * A {@code <podUID>_<container>} directory and its cache files (possibly none yet: libvgpu creates
 * the file at the first CUDA call).
 *
 * @param degraded what its {@code *.cache.degraded} side files say, as read in this pass
 */
public record DiscoveredContainer(
    ContainerKey key,
    Path dir,
    Instant modified,
    List<DiscoveredFile> files,
    List<DegradedMark> degraded) {
  public DiscoveredContainer {
    Objects.requireNonNull(key, "key");
    Objects.requireNonNull(dir, "dir");
    Objects.requireNonNull(modified, "modified");
    files = List.copyOf(files);
    degraded = List.copyOf(degraded);
  }

  /** A directory without side files. */
  public DiscoveredContainer(
      ContainerKey key, Path dir, Instant modified, List<DiscoveredFile> files) {
    this(key, dir, modified, files, List.of());
  }
}

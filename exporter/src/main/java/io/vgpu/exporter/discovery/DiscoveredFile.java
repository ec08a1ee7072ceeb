package io.vgpu.exporter.discovery;

import io.vgpu.regioncodec.RegionException;
import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;

/**
 * One {@code *.cache} entry of a container directory: mapped, or the reason it could not be.
 *
 * @param path the file
 * @param region the mapping; empty when opening failed
 * @param openError why opening failed; empty when mapped
 */
public record DiscoveredFile(
    Path path, Optional<MappedRegion> region, Optional<RegionException.Reason> openError) {
  public DiscoveredFile {
    Objects.requireNonNull(path, "path");
    if (region.isPresent() == openError.isPresent()) {
      throw new IllegalArgumentException("exactly one of region and openError must be present");
    }
  }

  static DiscoveredFile mapped(MappedRegion region) {
    return new DiscoveredFile(region.path(), Optional.of(region), Optional.empty());
  }

  static DiscoveredFile failed(Path path, RegionException.Reason reason) {
    return new DiscoveredFile(path, Optional.empty(), Optional.of(reason));
  }
}

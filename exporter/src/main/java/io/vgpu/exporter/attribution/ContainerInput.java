package io.vgpu.exporter.attribution;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.regioncodec.RegionSnapshot;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * One container to attribute: its identity and the snapshots of its cache files.
 *
 * @param key pod UID and container name
 * @param containerId the runtime's container id when the API server told us
 * @param regions each readable cache file with its snapshot
 */
public record ContainerInput(ContainerKey key, Optional<String> containerId, List<Region> regions) {
  public ContainerInput {
    Objects.requireNonNull(key, "key");
    Objects.requireNonNull(containerId, "containerId");
    regions = List.copyOf(regions);
  }

  /** One cache file. */
  public record Region(Path path, RegionSnapshot snapshot) {
    public Region {
      Objects.requireNonNull(path, "path");
      Objects.requireNonNull(snapshot, "snapshot");
    }
  }

  /** The input for a scrape-time container state; finished containers have no live processes. */
  public static ContainerInput of(ContainerState c) {
    Optional<String> id =
        c.pod().flatMap(p -> p.container(c.key().containerName())).flatMap(m -> m.containerId());
    List<Region> regions = new ArrayList<>();
    if (!c.finished()) {
      for (ContainerState.RegionState r : c.regions()) {
        if (r.read() instanceof io.vgpu.exporter.discovery.MappedRegion.Read.Ok ok) {
          regions.add(new Region(r.path(), ok.snapshot()));
        }
      }
    }
    return new ContainerInput(c.key(), id, regions);
  }
}

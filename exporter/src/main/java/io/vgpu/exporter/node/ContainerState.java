package io.vgpu.exporter.node;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.discovery.DegradedMark;
import io.vgpu.exporter.discovery.DiscoveredContainer;
import io.vgpu.exporter.discovery.MappedRegion;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.regioncodec.RegionSnapshot;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * One container directory at scrape time: where it came from, what the API server says about it,
 * and what its cache files hold.
 *
 * @param key pod UID and container name from the directory name
 * @param dir the discovered directory
 * @param pod pod metadata when known (the API server may be down)
 * @param namespace "" when the pod is unknown
 * @param podName "" when the pod is unknown
 * @param stale the pod is gone (API server authoritative) past the grace period
 * @param finished the pod Succeeded/Failed or the container terminated: nothing runs
 * @param regions the files and what reading each gave
 * @param devices per-device sums over readable files (empty when finished)
 * @param running ALIVE slots (the one judgment, {@link SlotFates}) with status 1 (0 when finished)
 * @param suspended ALIVE slots with status 2 (0 when finished)
 * @param gone GONE slots: the pod's processes are all visible and none is the slot's (0 when
 *     finished)
 * @param unknown UNKNOWN slots: cannot be judged from here, or not judged yet (0 when finished)
 * @param lastKernelEpochSeconds latest {@code last_kernel_time} over files (0 = never)
 * @param degraded side files that still describe a degraded process (see {@link DegradedPolicy}),
 *     malformed ones included
 */
public record ContainerState(
    ContainerKey key,
    DiscoveredContainer dir,
    Optional<PodMeta> pod,
    String namespace,
    String podName,
    boolean stale,
    boolean finished,
    List<RegionState> regions,
    List<DeviceUsageSummary> devices,
    long running,
    long suspended,
    long gone,
    long unknown,
    long lastKernelEpochSeconds,
    List<DegradedMark> degraded) {
  public ContainerState {
    Objects.requireNonNull(key, "key");
    degraded = List.copyOf(degraded);
    Objects.requireNonNull(pod, "pod");
    regions = List.copyOf(regions);
    devices = List.copyOf(devices);
  }

  /** Snapshots of the files that could be read. */
  public List<RegionSnapshot> snapshots() {
    return regions.stream()
        .map(RegionState::read)
        .filter(MappedRegion.Read.Ok.class::isInstance)
        .map(r -> ((MappedRegion.Read.Ok) r).snapshot())
        .toList();
  }

  /**
   * One cache file of the container.
   *
   * @param path the file
   * @param region the mapping (empty when it could not be opened)
   * @param read the snapshot or failure reason read for this scrape
   */
  public record RegionState(Path path, Optional<MappedRegion> region, MappedRegion.Read read) {}
}

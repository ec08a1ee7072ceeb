package io.vgpu.exporter.metrics;

import io.vgpu.exporter.attribution.AttributionResult;
import io.vgpu.exporter.attribution.AttributionService;
import io.vgpu.exporter.attribution.DeviceHolders;
import io.vgpu.exporter.attribution.DeviceHolders.Holders;
import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.kubelet.PodResourcesSnapshot;
import io.vgpu.exporter.kubelet.PodResourcesState;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.NodeState;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.function.Supplier;

/**
 * The containers without a region that hold a device ({@link DeviceHolders}), shared by the
 * collectors that report them: computed once per new reconciliation or kubelet answer, from what is
 * already in memory (no /proc, no NVML, no kubelet call in a scrape).
 */
public final class HolderSource {
  /** No attribution, no kubelet: nothing without a region is reported. */
  public static final HolderSource NONE =
      new HolderSource(Optional.empty(), () -> PodResourcesState.DISABLED, List::of);

  private final Optional<AttributionService> attribution;
  private final Supplier<PodResourcesState> podResources;
  private final Supplier<? extends Collection<PodMeta>> pods;

  private record Memo(
      AttributionResult result, Optional<PodResourcesSnapshot> snapshot, Holders holders) {}

  private volatile Memo memo;

  /**
   * @param attribution the reconciliations (their GPU processes and owners)
   * @param podResources the kubelet's latest answer ({@link PodResourcesState#DISABLED} when off)
   * @param pods the pods the metadata knows, for names, UIDs and container ids
   */
  public HolderSource(
      Optional<AttributionService> attribution,
      Supplier<PodResourcesState> podResources,
      Supplier<? extends Collection<PodMeta>> pods) {
    this.attribution = attribution;
    this.podResources = podResources;
    this.pods = pods;
  }

  /** The holders as of the latest reconciliation and kubelet answer. */
  public Holders get(NodeState state) {
    if (attribution.isEmpty()) {
      return Holders.NONE;
    }
    AttributionResult result = attribution.get().latest();
    Optional<PodResourcesSnapshot> snapshot = podResources.get().snapshot();
    Memo m = memo;
    if (m != null && m.result() == result && sameSnapshot(m.snapshot(), snapshot)) {
      return m.holders();
    }
    Set<ContainerKey> regions = new HashSet<>();
    for (ContainerState c : state.containers()) {
      regions.add(c.key());
    }
    Holders h = DeviceHolders.of(result, snapshot, pods.get(), regions);
    memo = new Memo(result, snapshot, h);
    return h;
  }

  @SuppressWarnings("ReferenceEquality") // the same cached kubelet answer object, by design: a new
  // poll result is a new object, and only then do the holders need computing again
  private static boolean sameSnapshot(
      Optional<PodResourcesSnapshot> a, Optional<PodResourcesSnapshot> b) {
    return a.isPresent() == b.isPresent() && (a.isEmpty() || a.get() == b.get());
  }
}

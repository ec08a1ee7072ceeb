package io.vgpu.exporter.metrics;

import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.k8s.PodMetadataSource;
import io.vgpu.exporter.k8s.SourceHealth;
import java.util.Collection;
import java.util.List;
import java.util.Optional;

/** Shared fakes for collector and HTTP tests. */
public final class CollectorsTestSupport {
  private CollectorsTestSupport() {}

  /** An API server that cannot be reached: nothing known, health says why. */
  public static final class Down implements PodMetadataSource {
    @Override
    public void start() {}

    @Override
    public Optional<PodMeta> pod(String podUid) {
      return Optional.empty();
    }

    @Override
    public Collection<PodMeta> pods() {
      return List.of();
    }

    @Override
    public NodeMeta node() {
      return NodeMeta.unknown();
    }

    @Override
    public SourceHealth health() {
      return new SourceHealth(
          true, false, false, Optional.of("API server unreachable for pods: ConnectException"));
    }

    @Override
    public void close() {}
  }
}

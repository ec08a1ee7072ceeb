package io.vgpu.exporter.k8s;

import java.util.Collection;
import java.util.Optional;

/**
 * Pod and node metadata for this node. Implementations are thread-safe and never block a scrape:
 * lookups read a local cache.
 */
public interface PodMetadataSource extends AutoCloseable {
  /** Starts background work (watches); returns without waiting for the API server. */
  void start();

  /** The pod with this UID if it is on this node and known. */
  Optional<PodMeta> pod(String podUid);

  /** Every known pod on this node. */
  Collection<PodMeta> pods();

  NodeMeta node();

  SourceHealth health();

  @Override
  void close();
}

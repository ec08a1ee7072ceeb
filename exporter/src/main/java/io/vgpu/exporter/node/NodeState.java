package io.vgpu.exporter.node;

import io.vgpu.exporter.discovery.DiscoverySnapshot;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.k8s.SourceHealth;
import java.time.Instant;
import java.util.List;
import java.util.Objects;

/**
 * Everything collectors need for one scrape, read once: discovery's latest pass, each container's
 * region snapshots and pod metadata, and the node annotations. Collectors (ours and the NVML /
 * attribution ones) read this value and never touch files, the API server or NVML themselves.
 *
 * @param node node name (the {@code node} label)
 * @param at when this state was built
 * @param discovery the discovery pass it is built from
 * @param api metadata source health
 * @param nodeMeta HAMi node annotations
 * @param containers every container directory, sorted by pod UID then name
 */
public record NodeState(
    String node,
    Instant at,
    DiscoverySnapshot discovery,
    SourceHealth api,
    NodeMeta nodeMeta,
    List<ContainerState> containers) {
  public NodeState {
    Objects.requireNonNull(node, "node");
    Objects.requireNonNull(at, "at");
    Objects.requireNonNull(discovery, "discovery");
    Objects.requireNonNull(api, "api");
    Objects.requireNonNull(nodeMeta, "nodeMeta");
    containers = List.copyOf(containers);
  }
}

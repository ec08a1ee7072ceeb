package io.vgpu.exporter.k8s;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.stream.Collectors;

/**
 * Metadata without a cluster: a fixed (but replaceable) set of pods. With no pods it stands for
 * {@code --kubernetes=false}: labels come from directory names and nothing is ever stale. The demo
 * and tests fill it with fake pods. Thread-safe.
 */
public final class StaticMetadataSource implements PodMetadataSource {
  private final Map<String, PodMeta> pods = new ConcurrentHashMap<>();
  private final boolean authoritative;
  private volatile NodeMeta node;

  private StaticMetadataSource(Collection<PodMeta> pods, NodeMeta node, boolean authoritative) {
    this.pods.putAll(pods.stream().collect(Collectors.toMap(PodMeta::uid, Function.identity())));
    this.node = node;
    this.authoritative = authoritative;
  }

  /** No cluster: nothing known, nothing judged stale. */
  public static StaticMetadataSource disabled() {
    return new StaticMetadataSource(List.of(), NodeMeta.unknown(), false);
  }

  /** A fake cluster that knows exactly these pods (absent UIDs count as gone). */
  public static StaticMetadataSource of(Collection<PodMeta> pods, NodeMeta node) {
    return new StaticMetadataSource(pods, node, true);
  }

  public void put(PodMeta pod) {
    pods.put(pod.uid(), pod);
  }

  public void remove(String uid) {
    pods.remove(uid);
  }

  public void setNode(NodeMeta node) {
    this.node = node;
  }

  @Override
  public void start() {}

  @Override
  public Optional<PodMeta> pod(String podUid) {
    return Optional.ofNullable(pods.get(podUid));
  }

  @Override
  public Collection<PodMeta> pods() {
    return List.copyOf(pods.values());
  }

  @Override
  public NodeMeta node() {
    return node;
  }

  @Override
  public SourceHealth health() {
    return authoritative
        ? new SourceHealth(true, true, true, Optional.empty())
        : new SourceHealth(false, false, false, Optional.of("kubernetes metadata disabled"));
  }

  @Override
  public void close() {}
}

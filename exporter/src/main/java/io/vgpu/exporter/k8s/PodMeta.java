package io.vgpu.exporter.k8s;

import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;

/**
 * The pod facts the exporter joins onto cache directories.
 *
 * @param uid lower-case pod UID
 * @param namespace the pod's namespace
 * @param name the pod's name
 * @param phase Pending, Running, Succeeded, Failed or Unknown
 * @param qosClass guaranteed, burstable or besteffort when known
 * @param labels the allow-listed pod labels (key to value)
 * @param containers every container (regular, init, sidecar, ephemeral) by name
 */
public record PodMeta(
    String uid,
    String namespace,
    String name,
    String phase,
    Optional<String> qosClass,
    Map<String, String> labels,
    Map<String, ContainerMeta> containers) {
  public PodMeta {
    Objects.requireNonNull(uid, "uid");
    Objects.requireNonNull(namespace, "namespace");
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(phase, "phase");
    Objects.requireNonNull(qosClass, "qosClass");
    uid = uid.toLowerCase(java.util.Locale.ROOT);
    labels = Map.copyOf(new TreeMap<>(labels));
    containers = Map.copyOf(containers);
  }

  /** Succeeded or Failed: the pod will not run again, so nothing in it counts as running. */
  public boolean finished() {
    return phase.equals("Succeeded") || phase.equals("Failed");
  }

  public Optional<ContainerMeta> container(String containerName) {
    return Optional.ofNullable(containers.get(containerName));
  }
}

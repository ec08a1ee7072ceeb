package io.vgpu.exporter.k8s;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerStatus;
import io.fabric8.kubernetes.api.model.EphemeralContainer;
import io.fabric8.kubernetes.api.model.Pod;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/** Converts fabric8 {@link Pod}s into {@link PodMeta}, keeping only allow-listed labels. */
public final class PodMetas {
  private PodMetas() {}

  public static PodMeta of(Pod pod, List<String> labelAllowList) {
    var md = pod.getMetadata();
    Map<String, String> labels = new HashMap<>();
    Map<String, String> all = md.getLabels() == null ? Map.of() : md.getLabels();
    for (String key : labelAllowList) {
      String v = all.get(key);
      if (v != null) {
        labels.put(key, v);
      }
    }
    Map<String, ContainerStatus> statuses = new HashMap<>();
    var status = pod.getStatus();
    if (status != null) {
      for (List<ContainerStatus> l :
          List.of(
              nonNull(status.getContainerStatuses()),
              nonNull(status.getInitContainerStatuses()),
              nonNull(status.getEphemeralContainerStatuses()))) {
        for (ContainerStatus s : l) {
          statuses.put(s.getName(), s);
        }
      }
    }
    Map<String, ContainerMeta> containers = new HashMap<>();
    var spec = pod.getSpec();
    if (spec != null) {
      for (Container c : nonNull(spec.getContainers())) {
        containers.put(c.getName(), meta(c.getName(), ContainerMeta.Kind.REGULAR, statuses));
      }
      for (Container c : nonNull(spec.getInitContainers())) {
        ContainerMeta.Kind kind =
            "Always".equals(c.getRestartPolicy())
                ? ContainerMeta.Kind.SIDECAR
                : ContainerMeta.Kind.INIT;
        containers.put(c.getName(), meta(c.getName(), kind, statuses));
      }
      for (EphemeralContainer c : nonNull(spec.getEphemeralContainers())) {
        containers.put(c.getName(), meta(c.getName(), ContainerMeta.Kind.EPHEMERAL, statuses));
      }
    }
    String phase = status != null && status.getPhase() != null ? status.getPhase() : "Unknown";
    Optional<String> qos =
        Optional.ofNullable(status == null ? null : status.getQosClass())
            .map(q -> q.toLowerCase(Locale.ROOT));
    return new PodMeta(
        md.getUid() == null ? "" : md.getUid(),
        md.getNamespace() == null ? "" : md.getNamespace(),
        md.getName() == null ? "" : md.getName(),
        phase,
        qos,
        labels,
        containers);
  }

  private static ContainerMeta meta(
      String name, ContainerMeta.Kind kind, Map<String, ContainerStatus> statuses) {
    ContainerStatus s = statuses.get(name);
    if (s == null) {
      return new ContainerMeta(name, kind, Optional.empty(), ContainerMeta.State.UNKNOWN);
    }
    ContainerMeta.State state = ContainerMeta.State.UNKNOWN;
    if (s.getState() != null) {
      if (s.getState().getRunning() != null) {
        state = ContainerMeta.State.RUNNING;
      } else if (s.getState().getTerminated() != null) {
        state = ContainerMeta.State.TERMINATED;
      } else if (s.getState().getWaiting() != null) {
        state = ContainerMeta.State.WAITING;
      }
    }
    return new ContainerMeta(name, kind, ContainerMeta.bareId(s.getContainerID()), state);
  }

  private static <T> List<T> nonNull(List<T> l) {
    return l == null ? List.of() : l;
  }
}

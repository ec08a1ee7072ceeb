package io.vgpu.exporter.k8s;

import java.util.Objects;
import java.util.Optional;

/**
 * One container of a pod, as the API server reports it.
 *
 * @param name container name (matches the cache directory suffix)
 * @param kind regular, init, sidecar (init with restartPolicy Always) or ephemeral
 * @param containerId bare runtime id (no {@code containerd://} prefix), once the runtime started it
 * @param state running, waiting, terminated or unknown
 */
public record ContainerMeta(String name, Kind kind, Optional<String> containerId, State state) {
  public ContainerMeta {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(kind, "kind");
    Objects.requireNonNull(containerId, "containerId");
    Objects.requireNonNull(state, "state");
  }

  /** How the pod spec declares the container. */
  public enum Kind {
    REGULAR,
    INIT,
    SIDECAR,
    EPHEMERAL;

    public String label() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /** The container state from the pod status. */
  public enum State {
    RUNNING,
    WAITING,
    TERMINATED,
    UNKNOWN;

    public String label() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }
  }

  /** Strips the runtime prefix: {@code containerd://abc} becomes {@code abc}. */
  public static Optional<String> bareId(String statusId) {
    if (statusId == null || statusId.isBlank()) {
      return Optional.empty();
    }
    int sep = statusId.indexOf("://");
    String id = sep >= 0 ? statusId.substring(sep + 3) : statusId;
    return id.isEmpty() ? Optional.empty() : Optional.of(id);
  }
}

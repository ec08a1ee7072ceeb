package io.vgpu.exporter.kubelet;

import java.util.Objects;
import java.util.Optional;

/**
 * What the exporter knows from the kubelet right now; read by scrapes, never blocking.
 *
 * @param enabled false with {@code --kubelet.pod-resources-socket=""}
 * @param snapshot the latest good answer, while it is younger than the source's max age
 * @param problem why the latest poll failed (socket missing, permission, timeout, bad reply), or
 *     why the latest good answer is incomplete; for /readyz and the logs
 */
public record PodResourcesState(
    boolean enabled, Optional<PodResourcesSnapshot> snapshot, Optional<String> problem) {
  public static final PodResourcesState DISABLED =
      new PodResourcesState(false, Optional.empty(), Optional.empty());

  public PodResourcesState {
    Objects.requireNonNull(snapshot, "snapshot");
    Objects.requireNonNull(problem, "problem");
  }
}

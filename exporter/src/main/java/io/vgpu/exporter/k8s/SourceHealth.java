package io.vgpu.exporter.k8s;

import java.util.Objects;
import java.util.Optional;

/**
 * State of a metadata source.
 *
 * @param enabled false when the exporter runs without a cluster (--kubernetes=false, demo)
 * @param up whether the API server answers (watch established)
 * @param synced whether the first full list arrived, so an absent pod really is absent
 * @param problem what is wrong, for /readyz and logs (RBAC denied, unreachable, ...)
 */
public record SourceHealth(boolean enabled, boolean up, boolean synced, Optional<String> problem) {
  public SourceHealth {
    Objects.requireNonNull(problem, "problem");
  }

  /** Absence of a pod in this source means the pod is gone. */
  public boolean authoritative() {
    return enabled && up && synced;
  }
}

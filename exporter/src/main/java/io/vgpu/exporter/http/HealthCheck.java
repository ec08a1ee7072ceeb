package io.vgpu.exporter.http;

import java.util.Optional;

/**
 * A readiness contributor. A {@linkplain #blocksReadiness() blocking} problem makes /readyz answer
 * 503; any other problem is listed as a reason while /readyz stays 200 (NVML or the API server
 * being down degrades the metrics, it does not make the exporter useless).
 */
public interface HealthCheck {
  /** Short name shown before the problem, e.g. "kubernetes", "nvml". */
  String name();

  /** What is wrong now, or empty. Must not block. */
  Optional<String> problem();

  /** Whether a problem makes the exporter not ready. */
  boolean blocksReadiness();

  /** A background loop's health: blocking while the loop fails or is stuck. */
  static HealthCheck of(io.vgpu.exporter.loops.LoopHealth loop) {
    return new HealthCheck() {
      @Override
      public String name() {
        return loop.name();
      }

      @Override
      public Optional<String> problem() {
        return loop.problem();
      }

      @Override
      public boolean blocksReadiness() {
        return true;
      }
    };
  }
}

package io.vgpu.exporter.metrics;

/**
 * Thrown by a collector that has nothing to say this scrape for an expected reason (NVML absent, no
 * cluster). Logged at debug level and reported as {@code vgpu_exporter_collector_success 0}, never
 * as an error.
 */
public final class CollectorUnavailableException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public CollectorUnavailableException(String why) {
    super(why);
  }
}

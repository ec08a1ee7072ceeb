package io.vgpu.exporter.metrics;

import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.discovery.ParseErrors;
import io.vgpu.exporter.node.NodeStateProvider;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * What collector factories in {@link Collectors} may use. {@code services} carries components other
 * layers start (the NVML sampler, the attribution reconciler) by type, so adding one needs no new
 * constructor parameter here.
 */
public record CollectorContext(
    ExporterConfig config,
    NodeStateProvider states,
    ParseErrors parseErrors,
    CollectorStats stats,
    BuildInfo build,
    Map<Class<?>, Object> services) {
  public CollectorContext {
    Objects.requireNonNull(config, "config");
    Objects.requireNonNull(states, "states");
    Objects.requireNonNull(parseErrors, "parseErrors");
    Objects.requireNonNull(stats, "stats");
    Objects.requireNonNull(build, "build");
    services = Map.copyOf(services);
  }

  /** The service of this type, when the app started one. */
  public <T> Optional<T> service(Class<T> type) {
    return Optional.ofNullable(services.get(type)).map(type::cast);
  }
}

package io.vgpu.exporter.metrics;

import io.vgpu.exporter.attribution.AttributionService;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.discovery.ParseErrors;
import io.vgpu.exporter.node.EvidencePass;
import io.vgpu.exporter.node.NodeStateProvider;
import io.vgpu.exporter.nvml.NvmlSampler;
import java.util.Objects;
import java.util.Optional;

/**
 * Everything a collector in {@link Collectors#ALL} is built from, by name and type: the app
 * assembles one and each entry passes what it needs to its collector's constructor.
 *
 * @param nvml the running NVML sampler; empty with {@code --nvml=false}
 * @param attribution the attribution service; empty when the app runs without it (regions only, or
 *     {@code --collectors.disabled=attribution})
 * @param evidence the background evidence pass; empty in tests that run without one
 * @param holders containers that hold a device without a region ({@link HolderSource#NONE} when the
 *     app has no attribution or kubelet answer to find them with)
 */
public record CollectorContext(
    ExporterConfig config,
    NodeStateProvider states,
    ParseErrors parseErrors,
    CollectorStats stats,
    BuildInfo build,
    Optional<NvmlSampler> nvml,
    Optional<AttributionService> attribution,
    Optional<EvidencePass> evidence,
    HolderSource holders) {
  public CollectorContext {
    Objects.requireNonNull(config, "config");
    Objects.requireNonNull(states, "states");
    Objects.requireNonNull(parseErrors, "parseErrors");
    Objects.requireNonNull(stats, "stats");
    Objects.requireNonNull(build, "build");
    Objects.requireNonNull(nvml, "nvml");
    Objects.requireNonNull(attribution, "attribution");
    Objects.requireNonNull(evidence, "evidence");
    Objects.requireNonNull(holders, "holders");
  }

  /** Without containers that hold a device without a region (tests, benchmarks). */
  public CollectorContext(
      ExporterConfig config,
      NodeStateProvider states,
      ParseErrors parseErrors,
      CollectorStats stats,
      BuildInfo build,
      Optional<NvmlSampler> nvml,
      Optional<AttributionService> attribution,
      Optional<EvidencePass> evidence) {
    this(config, states, parseErrors, stats, build, nvml, attribution, evidence, HolderSource.NONE);
  }

  /** Without a background evidence pass (tests, benchmarks). */
  public CollectorContext(
      ExporterConfig config,
      NodeStateProvider states,
      ParseErrors parseErrors,
      CollectorStats stats,
      BuildInfo build,
      Optional<NvmlSampler> nvml,
      Optional<AttributionService> attribution) {
    this(config, states, parseErrors, stats, build, nvml, attribution, Optional.empty());
  }

  /** Region-only collectors: no NVML sampler, no attribution service (tests, benchmarks). */
  public static CollectorContext regionsOnly(
      ExporterConfig config,
      NodeStateProvider states,
      ParseErrors parseErrors,
      CollectorStats stats,
      BuildInfo build) {
    return new CollectorContext(
        config, states, parseErrors, stats, build, Optional.empty(), Optional.empty());
  }
}

package io.vgpu.exporter;

import io.vgpu.exporter.attribution.AttributionService;
import io.vgpu.exporter.attribution.RegionWriteBack;
import io.vgpu.exporter.discovery.CacheDiscovery;
import io.vgpu.exporter.http.HealthCheck;
import io.vgpu.exporter.k8s.PodMetadataSource;
import io.vgpu.exporter.kubelet.PodResourcesSource;
import io.vgpu.exporter.nvml.NvmlSampler;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;

/** The readiness checks {@link ExporterApp} registers for the parts it runs. */
final class AppHealthChecks {
  private AppHealthChecks() {}

  /** Blocks readiness until the first discovery pass finished and the cache root is readable. */
  static HealthCheck discovery(CacheDiscovery discovery) {
    return check(
        "cache-root",
        true,
        () -> {
          var snap = discovery.current();
          if (snap.generation() == 0) {
            return Optional.of("first discovery pass of " + discovery.root() + " not finished");
          }
          return snap.rootProblem();
        });
  }

  /** Directories over --discovery.max-containers: metrics of those are missing (not blocking). */
  static HealthCheck skippedContainers(CacheDiscovery discovery) {
    return check(
        "cache-root",
        false,
        () -> {
          int n = discovery.skippedContainers();
          return n == 0
              ? Optional.empty()
              : Optional.of(
                  n
                      + " entries beyond --discovery.max-containers not read (stale directories?"
                      + " see --stale.remove)");
        });
  }

  static HealthCheck metadata(PodMetadataSource metadata) {
    return check(
        "kubernetes",
        false,
        () -> {
          var h = metadata.health();
          return h.enabled() ? h.problem() : Optional.empty();
        });
  }

  /** NVML down: region-only metrics still work, so not blocking. */
  static HealthCheck nvml(NvmlSampler sampler) {
    return check(
        "nvml",
        false,
        () -> {
          var status = sampler.latest().status();
          return status.up() ? Optional.empty() : Optional.of(status.reason());
        });
  }

  /**
   * The kubelet's pod-resources socket: without it regions and /proc still attribute, so not
   * blocking.
   */
  static HealthCheck podResources(PodResourcesSource source) {
    return check("pod-resources", false, () -> source.state().problem());
  }

  /**
   * Names regions whose latest write failed (e.g. a store into a hole on a full filesystem). Not
   * blocking: scrapes are unaffected and the next feedback pass retries.
   */
  static HealthCheck regionWrites(AttributionService service) {
    return check(
        "region-writes",
        false,
        () -> {
          Map<Path, String> failing = service.failingRegionWrites();
          if (failing.isEmpty()) {
            return Optional.empty();
          }
          var first =
              failing.entrySet().stream()
                  .min(Map.Entry.comparingByKey())
                  .orElseThrow(); // not empty: checked above
          return Optional.of(
              failing.size()
                  + " region(s) failing, e.g. "
                  + first.getKey()
                  + ": "
                  + first.getValue()
                  + (RegionWriteBack.FAULT.equals(first.getValue())
                      ? " (store faulted: filesystem full under a sparse region?)"
                      : ""));
        });
  }

  private static HealthCheck check(
      String name, boolean blocks, java.util.function.Supplier<Optional<String>> problem) {
    return new HealthCheck() {
      @Override
      public String name() {
        return name;
      }

      @Override
      public Optional<String> problem() {
        return problem.get();
      }

      @Override
      public boolean blocksReadiness() {
        return blocks;
      }
    };
  }
}

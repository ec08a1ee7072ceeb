package io.vgpu.exporter;

import io.prometheus.metrics.model.registry.MultiCollector;
import io.vgpu.exporter.attribution.AttributionService;
import io.vgpu.exporter.attribution.Reconciler;
import io.vgpu.exporter.attribution.RegionWriteBack;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.config.Flags;
import io.vgpu.exporter.http.HealthCheck;
import io.vgpu.exporter.metrics.AttributionCollector;
import io.vgpu.exporter.metrics.Collectors;
import io.vgpu.exporter.metrics.HamiCompatCollector;
import io.vgpu.exporter.metrics.NvmlCollector;
import io.vgpu.exporter.node.NodeStateProvider;
import io.vgpu.exporter.nvml.JnaNvmlClient;
import io.vgpu.exporter.nvml.NvmlSampler;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.hostpid.HostPidResolver;
import io.vgpu.hostpid.ProcFs;
import java.time.Duration;
import java.time.InstantSource;
import java.util.Map;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * Plugs NVML sampling and attribution into the exporter: {@link #install} before the app is built
 * (services, health check, background threads), {@link #wire} after (the HAMi-compatible
 * utilization source). The {@code nvml} and {@code attribution} entries of {@code Collectors} find
 * the services in their context.
 */
public final class AttributionModule {
  /** How often the resolver rescans /proc for new processes. */
  static final Duration PROC_SCAN_INTERVAL = Duration.ofSeconds(5);

  private AttributionModule() {}

  /** Creates and starts the NVML sampler (when --nvml) and the attribution service. */
  public static ExporterApp.Builder install(
      ExporterApp.Builder builder, ExporterConfig config, InstantSource clock) {
    Supplier<NvmlSnapshot> nvml;
    Runnable samplerStart = () -> {};
    if (config.get(Flags.NVML)) {
      String library = config.get(Flags.NVML_LIBRARY);
      NvmlSampler sampler =
          new NvmlSampler(
              () -> JnaNvmlClient.load(library),
              new NvmlSampler.Settings(
                  config.get(Flags.NVML_SAMPLE_INTERVAL),
                  config.get(Flags.NVML_WINDOW),
                  Duration.ofSeconds(60)),
              clock);
      builder.service(NvmlSampler.class, sampler);
      builder.service(
          Collectors.NvmlProvider.class,
          ctx -> new NvmlCollector(ctx.states(), sampler, ctx.config().hamiCompat()));
      builder.healthCheck(nvmlCheck(sampler));
      builder.closeOnExit(sampler);
      nvml = sampler::latest;
      samplerStart = sampler::start;
    } else {
      NvmlSnapshot disabled =
          NvmlSnapshot.unavailable(clock.instant(), "nvml: disabled (--nvml=false)");
      nvml = () -> disabled;
    }
    HostPidResolver resolver =
        new HostPidResolver(new ProcFs(config.procfs()), PROC_SCAN_INTERVAL, System::nanoTime);
    AttributionService.Settings defaults = AttributionService.Settings.defaults();
    AttributionService service =
        new AttributionService(
            nvml,
            resolver,
            new AttributionService.Settings(
                defaults.interval(),
                defaults.feedbackInterval(),
                config.get(Flags.ATTRIBUTION_FEEDBACK),
                config.get(Flags.ATTRIBUTION_REPAIR_HOSTPID),
                true,
                new Reconciler.Settings(
                    defaults.reconciler().zombieGrace(),
                    config.get(Flags.ATTRIBUTION_LEAK_AFTER),
                    defaults.reconciler().maxGap())),
            clock);
    service.startWith(samplerStart);
    builder.healthCheck(HealthCheck.of(service.loopHealth()));
    if (service.settings().writes()) {
      builder.healthCheck(writeBackCheck(service));
    }
    builder.service(AttributionService.class, service);
    builder.service(Collectors.AttributionProvider.class, ctx -> collector(ctx.states(), service));
    builder.closeOnExit(service);
    return builder;
  }

  /**
   * After build: HAMi's utilization family carries the reconciled value, and the background threads
   * start (not before, so a build that fails leaves nothing running).
   */
  public static ExporterApp wire(ExporterApp app) {
    Map<String, MultiCollector> collectors = app.collectors();
    Optional<AttributionService> service = service(collectors);
    if (collectors.get("hami") instanceof HamiCompatCollector hami) {
      service.ifPresent(s -> hami.setUtilizationSource(s.hamiUtilization()));
    }
    if (service.isPresent()) {
      service.get().start(); // starts the sampler first
    } else if (collectors.get("nvml") instanceof NvmlCollector n) {
      n.sampler().start(); // attribution collector disabled: NVML families only
    }
    return app;
  }

  private static Optional<AttributionService> service(Map<String, MultiCollector> collectors) {
    return collectors.get("attribution") instanceof AttributionCollector a
        ? Optional.of(a.service())
        : Optional.empty();
  }

  /** Connects the service to the scrape pipeline (called by the collector factory). */
  public static AttributionCollector collector(
      NodeStateProvider states, AttributionService service) {
    service.attach(states::build);
    states.setSlotPolicy(service.slotPolicy());
    return new AttributionCollector(states, service);
  }

  /** Names regions whose latest write failed (e.g. a store into a hole on a full filesystem). */
  static HealthCheck writeBackCheck(AttributionService service) {
    return new HealthCheck() {
      @Override
      public String name() {
        return "region-writes";
      }

      @Override
      public Optional<String> problem() {
        Map<java.nio.file.Path, String> failing = service.failingRegionWrites();
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
      }

      @Override
      public boolean blocksReadiness() {
        return false; // scrapes are unaffected; the next feedback pass retries
      }
    };
  }

  private static HealthCheck nvmlCheck(NvmlSampler sampler) {
    return new HealthCheck() {
      @Override
      public String name() {
        return "nvml";
      }

      @Override
      public Optional<String> problem() {
        var status = sampler.latest().status();
        return status.up() ? Optional.empty() : Optional.of(status.reason());
      }

      @Override
      public boolean blocksReadiness() {
        return false; // region-only metrics still work
      }
    };
  }
}

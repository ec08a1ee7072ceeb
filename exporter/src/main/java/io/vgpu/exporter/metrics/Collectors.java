package io.vgpu.exporter.metrics;

import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.vgpu.exporter.attribution.AttributionService;
import io.vgpu.exporter.config.ConfigException;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.config.Flags;
import io.vgpu.exporter.exposition.FamilySource;
import io.vgpu.exporter.node.EvidencePass;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;
import java.util.function.Predicate;

/**
 * The explicit list of collectors: no classpath scanning, no static registration. To add one, add
 * an {@link Entry} to {@link #ALL}. {@code --collectors.disabled=a,b} turns entries off; the {@code
 * hami} entry also follows {@code --hami-compat}.
 */
public final class Collectors {
  /**
   * One collector.
   *
   * @param name short name for flags and {@code vgpu_exporter_collector_success{collector}}
   * @param description what it exports (README)
   * @param enabled whether it runs under a given configuration (before --collectors.disabled)
   * @param factory builds it from the app's parts; empty when a part it needs is absent (e.g. no
   *     NVML sampler)
   */
  public record Entry(
      String name,
      String description,
      Predicate<ExporterConfig> enabled,
      Function<CollectorContext, Optional<VgpuCollector>> factory) {
    public Entry {
      Objects.requireNonNull(name, "name");
      Objects.requireNonNull(description, "description");
      Objects.requireNonNull(enabled, "enabled");
      Objects.requireNonNull(factory, "factory");
    }
  }

  public static final List<Entry> ALL =
      List.of(
          new Entry(
              "region",
              "per container x device memory, limits and region-claimed utilization",
              c -> true,
              ctx -> Optional.of(new RegionUsageCollector(ctx.holders()))),
          new Entry(
              "container",
              "per container processes, last kernel, layout, stale/finished state",
              c -> true,
              ctx ->
                  Optional.of(
                      new ContainerCollector(ctx.config().get(Flags.POD_LABELS), ctx.holders()))),
          new Entry(
              "device",
              "per container x device: how the container holds it (vgpu, whole, mig, timeslice,"
                  + " mps, dra; regions and the kubelet's pod-resources API)",
              c -> true,
              ctx -> Optional.of(new DeviceHoldingCollector(ctx.holders()))),
          new Entry(
              "node",
              "HAMi node annotations (handshake age, registered devices, mutex)",
              c -> true,
              ctx -> Optional.of(new NodeCollector())),
          new Entry(
              "hami",
              "HAMi vGPU monitor drop-in families (zone=\"vGPU\")",
              ExporterConfig::hamiCompat,
              ctx ->
                  Optional.of(
                      new HamiCompatCollector(
                          ctx.attribution()
                              .map(HamiCompatCollector.UtilizationSource::reconciled)
                              .orElse(HamiCompatCollector.UtilizationSource.REGION)))),
          new Entry(
              "nvml",
              "per GPU memory and utilization, NVML health and errors (hami_host_gpu_* too)",
              c -> c.get(Flags.NVML),
              ctx ->
                  ctx.nvml().map(sampler -> new NvmlCollector(sampler, ctx.config().hamiCompat()))),
          new Entry(
              "health",
              "per GPU power, temperature, clock event reasons, XID errors, ECC and remapped rows",
              c -> c.get(Flags.NVML),
              ctx -> ctx.nvml().map(sampler -> new DeviceHealthCollector(sampler))),
          new Entry(
              "mig",
              "per MIG device: GPU/compute instance, profile, memory, processes, GPM SM activity"
                  + " (and hami_mig_device_info with --hami-compat)",
              c -> c.get(Flags.NVML),
              ctx ->
                  ctx.nvml()
                      .map(
                          sampler ->
                              new MigCollector(sampler, ctx.holders(), ctx.config().hamiCompat()))),
          new Entry(
              "attribution",
              "NVML-reconciled per container utilization and memory, zombies, hostpid mismatches",
              c -> true,
              ctx ->
                  ctx.attribution()
                      .map(service -> new AttributionCollector(service, ctx.holders()))),
          new Entry(
              "evidence",
              "what the evidence pass could not judge (budgets, deadlines, stalls) and GPU processes of limited pods without a slot",
              c -> true,
              ctx ->
                  ctx.evidence()
                      .map(
                          pass ->
                              new EvidenceHealthCollector(
                                  pass, io.vgpu.exporter.node.DeadlineReads.shared()))),
          new Entry(
              "judgment",
              "the one judgment per container: doctor's verdict and WARN/FAIL findings by check,"
                  + " as the status page shows them; the node's own findings",
              c -> true,
              ctx ->
                  Optional.of(
                      new JudgmentCollector(() -> ctx.evidence().flatMap(EvidencePass::latest)))),
          new Entry(
              "usage",
              "usage accounting: per container SM-busy seconds, memory byte-seconds, energy",
              c -> c.get(Flags.NVML),
              ctx ->
                  ctx.attribution()
                      .flatMap(AttributionService::usage)
                      .map(u -> new UsageCollector(u))),
          new Entry(
              "exporter",
              "the exporter's own health (must stay last: reports this scrape's collectors)",
              c -> true,
              ctx ->
                  Optional.of(new ExporterCollector(ctx.build(), ctx.parseErrors(), ctx.stats()))));

  private Collectors() {}

  /**
   * Whether the entry {@code name} runs under {@code config}: enabled by its predicate and not in
   * {@code --collectors.disabled} (the app starts a collector's service only when it runs).
   */
  public static boolean runs(String name, ExporterConfig config) {
    return ALL.stream()
        .anyMatch(
            e ->
                e.name().equals(name)
                    && e.enabled().test(config)
                    && !config.get(Flags.COLLECTORS_DISABLED).contains(name));
  }

  public static Set<String> names() {
    return ALL.stream().map(Entry::name).collect(java.util.stream.Collectors.toUnmodifiableSet());
  }

  /**
   * Builds and registers every enabled collector, wrapped with success/duration accounting.
   *
   * @return what a render collects: every registered collector's families, in exposition order
   * @throws ConfigException when --collectors.disabled names an unknown collector
   */
  public static FamilySource register(CollectorContext ctx, PrometheusRegistry registry) {
    return register(ctx, registry, name -> true);
  }

  /**
   * Like {@link #register(CollectorContext, PrometheusRegistry)}, limited to entries whose name
   * {@code only} accepts (tests that pin the output of some collectors).
   */
  public static FamilySource register(
      CollectorContext ctx, PrometheusRegistry registry, Predicate<String> only) {
    List<String> disabled = ctx.config().get(Flags.COLLECTORS_DISABLED);
    List<String> problems = new ArrayList<>();
    for (String d : disabled) {
      if (!names().contains(d)) {
        problems.add(
            "invalid value '%s' for --collectors.disabled: unknown collector (known: %s)"
                .formatted(d, String.join(", ", ALL.stream().map(Entry::name).toList())));
      }
    }
    if (!problems.isEmpty()) {
      throw new ConfigException(problems);
    }
    List<CollectorChain.Member> chain = new ArrayList<>();
    for (Entry e : ALL) {
      if (!only.test(e.name()) || !e.enabled().test(ctx.config()) || disabled.contains(e.name())) {
        continue;
      }
      Optional<VgpuCollector> c = e.factory().apply(ctx);
      if (c.isPresent()) {
        chain.add(new CollectorChain.Member(e.name(), c.get()));
      }
    }
    CollectorChain registered = new CollectorChain(chain, ctx.states()::build, ctx.stats());
    registry.register(registered);
    return registered;
  }
}

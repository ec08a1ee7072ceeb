package io.vgpu.exporter;

import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.vgpu.exporter.attribution.AttributionService;
import io.vgpu.exporter.attribution.Reconciler;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.config.Flags;
import io.vgpu.exporter.discovery.CacheDiscovery;
import io.vgpu.exporter.discovery.DiscoveredContainer;
import io.vgpu.exporter.discovery.ParseErrors;
import io.vgpu.exporter.discovery.StaleReaper;
import io.vgpu.exporter.exposition.FamilySource;
import io.vgpu.exporter.http.HealthCheck;
import io.vgpu.exporter.http.HttpServer;
import io.vgpu.exporter.http.NetworkLimits;
import io.vgpu.exporter.http.Readiness;
import io.vgpu.exporter.http.StatusPage;
import io.vgpu.exporter.http.WebConfig;
import io.vgpu.exporter.k8s.KubernetesMetadataSource;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.k8s.PodMetadataSource;
import io.vgpu.exporter.k8s.StaticMetadataSource;
import io.vgpu.exporter.kubelet.PodResourcesLimits;
import io.vgpu.exporter.kubelet.PodResourcesSource;
import io.vgpu.exporter.kubelet.PodResourcesState;
import io.vgpu.exporter.metrics.BuildInfo;
import io.vgpu.exporter.metrics.CollectorContext;
import io.vgpu.exporter.metrics.CollectorStats;
import io.vgpu.exporter.metrics.Collectors;
import io.vgpu.exporter.metrics.HolderSource;
import io.vgpu.exporter.node.DeviceIdentities;
import io.vgpu.exporter.node.EvidenceCollector;
import io.vgpu.exporter.node.EvidencePass;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.node.NodeStateProvider;
import io.vgpu.exporter.nvml.JnaNvmlClient;
import io.vgpu.exporter.nvml.NvmlSampler;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.hostpid.HostPidResolver;
import io.vgpu.hostpid.ProcFs;
import java.io.IOException;
import java.nio.file.Files;
import java.time.Duration;
import java.time.InstantSource;
import java.util.Optional;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The assembled exporter: discovery, metadata, the node view, NVML sampling, attribution,
 * collectors and HTTP, each constructed here with its parts as constructor arguments. Built by
 * {@link Builder#build}, started by {@link #start}, stopped by {@link #close()}.
 *
 * <p>{@link #builder} wires what {@code serve} runs: the NVML sampler when {@code --nvml} is on and
 * the attribution service unless {@code --collectors.disabled=attribution}. Running without them is
 * a choice the caller states ({@link Builder#regionsOnly()}), never a silent default.
 */
public final class ExporterApp implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ExporterApp.class);

  /** How often the host-pid resolver rescans /proc for new processes. */
  static final Duration PROC_SCAN_INTERVAL = Duration.ofSeconds(5);

  /** Deadline of each pod-resources call (the kubelet answers from memory in milliseconds). */
  static final Duration POD_RESOURCES_TIMEOUT = Duration.ofSeconds(2);

  private final ExporterConfig config;
  private final CacheDiscovery discovery;
  private final PodMetadataSource metadata;
  private final NodeStateProvider states;
  private final Optional<NvmlSampler> nvml;
  private final Optional<AttributionService> attribution;
  private final Optional<PodResourcesSource> podResources;
  private final EvidencePass evidence;
  private final PrometheusRegistry registry;
  private final FamilySource page;
  private final Readiness readiness;
  private final HttpServer http;

  private ExporterApp(Builder b) {
    this.config = b.config;
    InstantSource clock = b.clock;
    ParseErrors errors = new ParseErrors();
    this.discovery =
        new CacheDiscovery(
            config.cacheRoot(),
            config.rescanInterval(),
            clock,
            b.writable,
            errors,
            config.get(Flags.MAX_CONTAINERS));
    this.metadata = b.metadata != null ? b.metadata : metadataFrom(config);
    String node = config.nodeName();
    Duration grace = config.get(Flags.STALE_GRACE_PERIOD);
    if (config.get(Flags.STALE_REMOVE)) {
      discovery.addListener(new StaleReaper(discovery, c -> isStale(c, metadata, clock, grace)));
    }

    this.podResources =
        !b.gpu
            ? Optional.empty()
            : b.podResourcesSocket != null
                ? Optional.of(podResources(b.podResourcesSocket, config, clock))
                : podResourcesFrom(config, clock);
    this.nvml =
        b.gpu && config.get(Flags.NVML) ? Optional.of(sampler(config, clock)) : Optional.empty();
    Supplier<NvmlSnapshot> latestNvml = latestNvml(nvml, clock);
    boolean attributionOn = b.gpu && Collectors.runs("attribution", config);
    AttributionService.Settings settings = attributionSettings(config);
    ProcFs procFs = new ProcFs(config.procfs());
    Supplier<NvmlSnapshot> doctorNvml = statusNvml(nvml, clock);
    // The one judgment's evidence, gathered in the background once per interval: the status page,
    // /api/v1/containers and the liveness in /metrics all render this pass, and no scrape walks
    // procfs.
    this.evidence =
        new EvidencePass(
            () -> discovery.current().containers().stream().map(DiscoveredContainer::dir).toList(),
            dirs ->
                new EvidenceCollector(
                        procFs,
                        doctorNvml,
                        () -> Optional.of(metadata.node()).filter(NodeMeta::known),
                        clock,
                        Duration.ZERO,
                        d -> {},
                        NodeEvidence.Thresholds.defaults())
                    .collect(dirs),
            evidenceInterval(config),
            clock);
    this.states =
        new NodeStateProvider(
            node,
            discovery::current,
            metadata,
            clock,
            grace,
            evidence::fates,
            new DeviceIdentities(latestNvml));
    this.attribution =
        attributionOn
            ? Optional.of(
                new AttributionService(
                    latestNvml,
                    new HostPidResolver(procFs, PROC_SCAN_INTERVAL, System::nanoTime),
                    settings,
                    clock,
                    states::build,
                    nvml.map(
                        s ->
                            new io.vgpu.exporter.attribution.UsageAccountant(
                                s.ledger(),
                                config.get(Flags.USAGE_GRACE_PERIOD),
                                clock.instant()))))
            : Optional.empty();

    this.registry = new PrometheusRegistry();
    CollectorStats stats = new CollectorStats();
    BuildInfo build = BuildInfo.load();
    this.page =
        Collectors.register(
            new CollectorContext(
                config,
                states,
                errors,
                stats,
                build,
                nvml,
                attribution,
                Optional.of(evidence),
                new HolderSource(
                    attribution,
                    podResources
                        .<Supplier<PodResourcesState>>map(p -> p::state)
                        .orElse(() -> PodResourcesState.DISABLED),
                    metadata::pods)),
            registry);

    this.readiness = new Readiness();
    readiness.note(io.vgpu.exporter.config.RegionWrites.of(config).summary());
    readiness.add(AppHealthChecks.discovery(discovery));
    readiness.add(HealthCheck.of(discovery.loopHealth()));
    readiness.add(AppHealthChecks.skippedContainers(discovery));
    readiness.add(HealthCheck.of(evidence.loopHealth()));
    readiness.add(AppHealthChecks.metadata(metadata));
    nvml.ifPresent(s -> readiness.add(AppHealthChecks.nvml(s)));
    podResources.ifPresent(p -> readiness.add(AppHealthChecks.podResources(p)));
    attribution.ifPresent(
        a -> {
          readiness.add(HealthCheck.of(a.loopHealth()));
          if (a.settings().writes()) {
            readiness.add(AppHealthChecks.regionWrites(a));
          }
        });

    this.http =
        new HttpServer(
            new HttpServer.Settings(
                config.bindAddress(),
                config.port(),
                config.metricsMaxAge(),
                webConfig(config),
                config.get(Flags.WEB_STATUS_PAGES),
                config.get(Flags.WEB_STATUS_MAX_AGE),
                new NetworkLimits(
                    config.get(Flags.WEB_MAX_CONNECTIONS),
                    config.get(Flags.WEB_MAX_CONNECTIONS_PER_CLIENT),
                    config.get(Flags.WEB_IDLE_TIMEOUT),
                    config.get(Flags.WEB_TLS_HANDSHAKE_TIMEOUT))),
            registry,
            page,
            states,
            readiness,
            stats,
            build.version(),
            new StatusPage(evidence, clock));
  }

  /** The kubelet's pod-resources poller: on unless the socket flag is empty or off-cluster. */
  private static Optional<PodResourcesSource> podResourcesFrom(
      ExporterConfig config, InstantSource clock) {
    String socket = config.get(Flags.KUBELET_POD_RESOURCES_SOCKET).strip();
    if (socket.isEmpty() || !config.get(Flags.KUBERNETES)) {
      return Optional.empty();
    }
    return Optional.of(podResources(java.nio.file.Path.of(socket), config, clock));
  }

  private static PodResourcesSource podResources(
      java.nio.file.Path socket, ExporterConfig config, InstantSource clock) {
    return new PodResourcesSource(
        socket,
        config.get(Flags.KUBELET_POD_RESOURCES_INTERVAL),
        POD_RESOURCES_TIMEOUT,
        PodResourcesLimits.DEFAULT,
        clock,
        config.nodeName());
  }

  private static NvmlSampler sampler(ExporterConfig config, InstantSource clock) {
    String library = config.get(Flags.NVML_LIBRARY);
    return new NvmlSampler(
        () -> JnaNvmlClient.load(library),
        new NvmlSampler.Settings(
            config.get(Flags.NVML_SAMPLE_INTERVAL),
            config.get(Flags.NVML_WINDOW),
            Duration.ofSeconds(60)),
        clock);
  }

  /** The sampler's latest snapshot, or a constant "disabled" one when NVML is off. */
  private static Supplier<NvmlSnapshot> latestNvml(
      Optional<NvmlSampler> sampler, InstantSource clock) {
    if (sampler.isPresent()) {
      return sampler.get()::latest;
    }
    NvmlSnapshot disabled =
        NvmlSnapshot.unavailable(clock.instant(), "nvml: disabled (--nvml=false)");
    return () -> disabled;
  }

  /**
   * What the status page's doctor sees of NVML: the running sampler's snapshot, or "not queried"
   * when NVML is off (its checks skip instead of failing on a node without GPUs by choice).
   */
  private static Supplier<NvmlSnapshot> statusNvml(
      Optional<NvmlSampler> sampler, InstantSource clock) {
    if (sampler.isPresent()) {
      return sampler.get()::latest;
    }
    return () -> NvmlSnapshot.unavailable(clock.instant(), NodeEvidence.NVML_NOT_QUERIED);
  }

  /** The status page's max age, at least one second: how often the evidence pass runs. */
  private static Duration evidenceInterval(ExporterConfig config) {
    Duration d = config.get(Flags.WEB_STATUS_MAX_AGE);
    return d.compareTo(Duration.ofSeconds(1)) < 0 ? Duration.ofSeconds(1) : d;
  }

  private static AttributionService.Settings attributionSettings(ExporterConfig config) {
    AttributionService.Settings defaults = AttributionService.Settings.defaults();
    return new AttributionService.Settings(
        defaults.interval(),
        defaults.feedbackInterval(),
        config.get(Flags.ATTRIBUTION_FEEDBACK),
        config.get(Flags.ATTRIBUTION_REPAIR_HOSTPID),
        new Reconciler.Settings(
            defaults.reconciler().zombieGrace(),
            config.get(Flags.ATTRIBUTION_LEAK_AFTER),
            defaults.reconciler().maxGap()));
  }

  /**
   * Stale: the API server is authoritative, the pod is absent and the directory is past the grace
   * period.
   */
  static boolean isStale(
      DiscoveredContainer c, PodMetadataSource metadata, InstantSource clock, Duration grace) {
    return metadata.health().authoritative()
        && metadata.pod(c.key().podUid()).isEmpty()
        && Duration.between(c.modified(), clock.instant()).compareTo(grace) >= 0;
  }

  private static WebConfig webConfig(ExporterConfig config) {
    return config.get(Flags.WEB_CONFIG_FILE).map(WebConfig::load).orElseGet(WebConfig::none);
  }

  private static PodMetadataSource metadataFrom(ExporterConfig config) {
    if (!config.kubernetes()) {
      return StaticMetadataSource.disabled();
    }
    Config kc;
    java.util.Optional<java.nio.file.Path> kubeconfig = config.get(Flags.KUBECONFIG);
    if (kubeconfig.isPresent()) {
      try {
        kc = Config.fromKubeconfig(Files.readString(kubeconfig.get()));
      } catch (IOException e) {
        throw new io.vgpu.exporter.config.ConfigException(
            "cannot read --kubeconfig " + kubeconfig.get() + ": " + e.getMessage());
      }
    } else {
      kc = Config.autoConfigure(null);
    }
    KubernetesClient client = new KubernetesClientBuilder().withConfig(kc).build();
    return new KubernetesMetadataSource(
        client,
        config.nodeName(),
        config.get(Flags.POD_LABELS),
        config.get(Flags.KUBERNETES_RESYNC));
  }

  public static Builder builder(ExporterConfig config) {
    return new Builder(config);
  }

  /**
   * Starts background work (discovery, metadata, the NVML sampler, then attribution, which reads
   * the sampler) and the HTTP server; returns once the port is bound.
   */
  public ExporterApp start() {
    discovery.start();
    metadata.start();
    podResources.ifPresent(PodResourcesSource::start);
    nvml.ifPresent(NvmlSampler::start);
    evidence.start();
    attribution.ifPresent(AttributionService::start);
    http.start();
    LOG.atInfo()
        .setMessage("serving")
        .addKeyValue("address", config.bindAddress())
        .addKeyValue("port", http.port())
        .addKeyValue("cache_root", config.cacheRoot())
        .addKeyValue("node", config.nodeName())
        .addKeyValue("kubernetes", metadata.health().enabled())
        .addKeyValue("hami_compat", config.hamiCompat())
        .log();
    io.vgpu.exporter.config.RegionWrites writes = io.vgpu.exporter.config.RegionWrites.of(config);
    LOG.atInfo()
        .setMessage(writes.any() ? "the exporter writes into the node" : "the exporter only reads")
        .addKeyValue("writes", writes.summary())
        .log();
    return this;
  }

  public int port() {
    return http.port();
  }

  public CacheDiscovery discovery() {
    return discovery;
  }

  public NodeStateProvider states() {
    return states;
  }

  /** What a /metrics render collects: every collector's families (tests, benchmarks). */
  public FamilySource page() {
    return page;
  }

  public PrometheusRegistry registry() {
    return registry;
  }

  public Readiness readiness() {
    return readiness;
  }

  public PodMetadataSource metadata() {
    return metadata;
  }

  /** The NVML sampler; empty with {@code --nvml=false} or {@link Builder#regionsOnly()}. */
  public Optional<NvmlSampler> nvml() {
    return nvml;
  }

  /** The background evidence pass every surface's judgment renders. */
  public EvidencePass evidence() {
    return evidence;
  }

  /** The attribution service; empty when it is disabled or {@link Builder#regionsOnly()}. */
  public Optional<AttributionService> attribution() {
    return attribution;
  }

  @Override
  public void close() {
    http.close();
    metadata.close();
    discovery.close();
    evidence.close();
    attribution.ifPresent(a -> closeQuietly("attribution", a));
    podResources.ifPresent(p -> closeQuietly("pod-resources", p));
    nvml.ifPresent(s -> closeQuietly("nvml", s));
  }

  private static void closeQuietly(String what, AutoCloseable c) {
    try {
      c.close();
    } catch (Exception e) {
      LOG.atWarn()
          .setMessage("close failed")
          .addKeyValue("part", what)
          .addKeyValue("error", e.toString())
          .log();
    }
  }

  /** Assembles an {@link ExporterApp}. */
  public static final class Builder {
    private final ExporterConfig config;
    private InstantSource clock = InstantSource.system();
    private PodMetadataSource metadata;
    private boolean writable;
    private boolean gpu = true;
    private java.nio.file.Path podResourcesSocket;

    private Builder(ExporterConfig config) {
      this.config = config;
    }

    public Builder clock(InstantSource clock) {
      this.clock = clock;
      return this;
    }

    /** Metadata source instead of the one --kubernetes selects (demo, tests). */
    public Builder metadata(PodMetadataSource source) {
      this.metadata = source;
      return this;
    }

    /**
     * The kubelet's pod-resources socket to poll instead of the one --kubernetes and
     * --kubelet.pod-resources-socket select (the demo's fake kubelet, off-cluster).
     */
    public Builder podResourcesSocket(java.nio.file.Path socket) {
      this.podResourcesSocket = socket;
      return this;
    }

    /** Map regions read-write (only the write-back modes). */
    public Builder writableRegions(boolean writable) {
      this.writable = writable;
      return this;
    }

    /**
     * Runs without the GPU layer: no NVML sampler and no attribution service, whatever the flags
     * say (tests of the region pipeline). {@code serve} and {@code demo} never call this.
     */
    public Builder regionsOnly() {
      this.gpu = false;
      return this;
    }

    public ExporterApp build() {
      return new ExporterApp(this);
    }
  }
}

package io.vgpu.exporter;

import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.prometheus.metrics.model.registry.MultiCollector;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.config.Flags;
import io.vgpu.exporter.discovery.CacheDiscovery;
import io.vgpu.exporter.discovery.DiscoveredContainer;
import io.vgpu.exporter.discovery.ParseErrors;
import io.vgpu.exporter.discovery.StaleReaper;
import io.vgpu.exporter.http.HealthCheck;
import io.vgpu.exporter.http.HttpServer;
import io.vgpu.exporter.http.Readiness;
import io.vgpu.exporter.http.WebConfig;
import io.vgpu.exporter.k8s.KubernetesMetadataSource;
import io.vgpu.exporter.k8s.PodMetadataSource;
import io.vgpu.exporter.k8s.StaticMetadataSource;
import io.vgpu.exporter.metrics.BuildInfo;
import io.vgpu.exporter.metrics.CollectorContext;
import io.vgpu.exporter.metrics.CollectorStats;
import io.vgpu.exporter.metrics.Collectors;
import io.vgpu.exporter.node.NodeStateProvider;
import java.io.IOException;
import java.nio.file.Files;
import java.time.Duration;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The assembled exporter: discovery, metadata, collectors, HTTP. Built and started by {@link
 * #start}, stopped by {@link #close()}. The NVML/attribution layer plugs in through {@link
 * Builder#service} (collector factories find it in their {@link CollectorContext}) and {@link
 * Builder#healthCheck}.
 */
public final class ExporterApp implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ExporterApp.class);

  private final ExporterConfig config;
  private final CacheDiscovery discovery;
  private final PodMetadataSource metadata;
  private final NodeStateProvider states;
  private final PrometheusRegistry registry;
  private final Map<String, MultiCollector> collectors;
  private final Readiness readiness;
  private final HttpServer http;
  private final List<AutoCloseable> closeables;

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
    this.states = new NodeStateProvider(node, discovery, metadata, clock, grace);
    if (config.get(Flags.STALE_REMOVE)) {
      discovery.addListener(new StaleReaper(discovery, c -> isStale(c, metadata, clock, grace)));
    }
    this.registry = new PrometheusRegistry();
    CollectorStats stats = new CollectorStats();
    BuildInfo build = BuildInfo.load();
    Map<Class<?>, Object> services = new HashMap<>(b.services);
    services.put(CacheDiscovery.class, discovery);
    services.put(PodMetadataSource.class, metadata);
    this.collectors =
        Collectors.register(
            new CollectorContext(config, states, errors, stats, build, services), registry);
    this.readiness = new Readiness();
    readiness.add(discoveryCheck(discovery));
    readiness.add(HealthCheck.of(discovery.loopHealth()));
    readiness.add(skippedContainersCheck(discovery));
    readiness.add(metadataCheck(metadata));
    b.healthChecks.forEach(readiness::add);
    this.http =
        new HttpServer(
            new HttpServer.Settings(
                config.bindAddress(),
                config.port(),
                config.metricsMaxAge(),
                webConfig(config),
                HttpServer.StatusPages.parse(config.get(Flags.WEB_STATUS_PAGES)),
                config.get(Flags.WEB_STATUS_MAX_AGE),
                config.procfs()),
            registry,
            states,
            readiness,
            stats,
            build.version());
    this.closeables = new ArrayList<>(b.closeables);
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
    String file = config.get(Flags.WEB_CONFIG_FILE);
    return file.isEmpty() ? WebConfig.none() : WebConfig.load(java.nio.file.Path.of(file));
  }

  private static PodMetadataSource metadataFrom(ExporterConfig config) {
    if (!config.kubernetes()) {
      return StaticMetadataSource.disabled();
    }
    Config kc;
    String kubeconfig = config.get(Flags.KUBECONFIG);
    if (!kubeconfig.isEmpty()) {
      try {
        kc = Config.fromKubeconfig(Files.readString(java.nio.file.Path.of(kubeconfig)));
      } catch (IOException e) {
        throw new io.vgpu.exporter.config.ConfigException(
            "cannot read --kubeconfig " + kubeconfig + ": " + e.getMessage());
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

  private static HealthCheck discoveryCheck(CacheDiscovery discovery) {
    return new HealthCheck() {
      @Override
      public String name() {
        return "cache-root";
      }

      @Override
      public Optional<String> problem() {
        var snap = discovery.current();
        if (snap.generation() == 0) {
          return Optional.of("first discovery pass of " + discovery.root() + " not finished");
        }
        return snap.rootProblem();
      }

      @Override
      public boolean blocksReadiness() {
        return true;
      }
    };
  }

  /** Directories over --discovery.max-containers: metrics of those are missing (not blocking). */
  private static HealthCheck skippedContainersCheck(CacheDiscovery discovery) {
    return new HealthCheck() {
      @Override
      public String name() {
        return "cache-root";
      }

      @Override
      public Optional<String> problem() {
        int n = discovery.skippedContainers();
        return n == 0
            ? Optional.empty()
            : Optional.of(
                n
                    + " entries beyond --discovery.max-containers not read (stale directories? see"
                    + " --stale.remove)");
      }

      @Override
      public boolean blocksReadiness() {
        return false;
      }
    };
  }

  private static HealthCheck metadataCheck(PodMetadataSource metadata) {
    return new HealthCheck() {
      @Override
      public String name() {
        return "kubernetes";
      }

      @Override
      public Optional<String> problem() {
        var h = metadata.health();
        return h.enabled() ? h.problem() : Optional.empty();
      }

      @Override
      public boolean blocksReadiness() {
        return false;
      }
    };
  }

  public static Builder builder(ExporterConfig config) {
    return new Builder(config);
  }

  /** Starts background work and the HTTP server; returns once the port is bound. */
  public ExporterApp start() {
    discovery.start();
    metadata.start();
    http.start();
    LOG.info(
        "msg=\"serving\" address={} port={} cache_root=\"{}\" node={} kubernetes={} hami_compat={}",
        config.bindAddress(),
        http.port(),
        config.cacheRoot(),
        config.nodeName(),
        metadata.health().enabled(),
        config.hamiCompat());
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

  public PrometheusRegistry registry() {
    return registry;
  }

  public Readiness readiness() {
    return readiness;
  }

  public PodMetadataSource metadata() {
    return metadata;
  }

  /** Registered collectors by name (unwrapped), e.g. to install the HAMi utilization source. */
  public Map<String, MultiCollector> collectors() {
    return collectors;
  }

  @Override
  public void close() {
    http.close();
    metadata.close();
    discovery.close();
    for (AutoCloseable c : closeables) {
      try {
        c.close();
      } catch (Exception e) {
        LOG.warn("msg=\"close failed\" error=\"{}\"", e.toString());
      }
    }
  }

  /** Assembles an {@link ExporterApp}. */
  public static final class Builder {
    private final ExporterConfig config;
    private InstantSource clock = InstantSource.system();
    private PodMetadataSource metadata;
    private boolean writable;
    private final Map<Class<?>, Object> services = new HashMap<>();
    private final List<HealthCheck> healthChecks = new ArrayList<>();
    private final List<AutoCloseable> closeables = new ArrayList<>();

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

    /** Map regions read-write (only the write-back modes). */
    public Builder writableRegions(boolean writable) {
      this.writable = writable;
      return this;
    }

    public <T> Builder service(Class<T> type, T service) {
      services.put(type, service);
      return this;
    }

    public Builder healthCheck(HealthCheck check) {
      healthChecks.add(check);
      return this;
    }

    /** Closed after the app (e.g. an NVML sampler). */
    public Builder closeOnExit(AutoCloseable c) {
      closeables.add(c);
      return this;
    }

    public ExporterApp build() {
      return new ExporterApp(this);
    }
  }
}

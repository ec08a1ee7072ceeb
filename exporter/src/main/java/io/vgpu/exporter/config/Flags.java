package io.vgpu.exporter.config;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * Every flag the exporter reads, in one place. Each flag also reads {@code VGPU_EXPORTER_<NAME>}
 * (see {@link Flag#envVar()}) when it is not on the command line. To add a flag: add a constant
 * here and list it in {@link #ALL}; {@link ExporterConfig#get(Flag)} returns its typed value.
 */
public final class Flags {
  public static final Flag<String> WEB_LISTEN_ADDRESS =
      new Flag<>(
          "web.listen-address",
          "Address to bind the HTTP server to (0.0.0.0 for all IPv4, :: for all).",
          "0.0.0.0",
          List.of(),
          Parsers::host,
          "ADDR");

  public static final Flag<Integer> WEB_LISTEN_PORT =
      new Flag<>(
          "web.listen-port",
          "TCP port of /metrics, /healthz, /readyz and /api/v1/containers (HAMi's monitor port).",
          Integer.toString(Endpoints.DEFAULT_PORT),
          List.of(),
          Parsers::port,
          "PORT");

  public static final Flag<Duration> WEB_METRICS_MAX_AGE =
      new Flag<>(
          "web.metrics-max-age",
          "Serve a rendered /metrics page again to scrapes within this age; 0s renders per scrape"
              + " (concurrent scrapes always share one render).",
          "0s",
          List.of(),
          Parsers::duration,
          "DURATION");

  public static final Flag<Optional<Path>> WEB_CONFIG_FILE =
      new Flag<>(
          "web.config.file",
          "Prometheus exporter-toolkit web configuration (YAML): tls_server_config (cert_file,"
              + " key_file, client_ca_file, client_auth_type) and basic_auth_users (bcrypt hashes);"
              + " empty serves plain HTTP without authentication.",
          "",
          List.of(),
          Parsers::optionalPath,
          "FILE");

  public static final Flag<StatusPages> WEB_STATUS_PAGES =
      new Flag<>(
          "web.status-pages",
          "Who may see / and /api/v1/containers (every pod's names, uids and pids): all (as"
              + " /metrics), loopback (only clients on 127.0.0.1/::1) or off (404).",
          "all",
          List.of(),
          StatusPages::parse,
          "all|loopback|off");

  public static final Flag<Duration> WEB_STATUS_MAX_AGE =
      new Flag<>(
          "web.status-max-age",
          "How often the background evidence pass (the regions and the pod processes' procfs"
              + " entries) runs: /, /api/v1/containers and the slot liveness in /metrics render"
              + " its one judgment; the status model is computed at most once per this interval"
              + " and shared. A pass reads every pod process's maps (up to 64 MiB), so it is not"
              + " run more often than liveness needs.",
          "15s",
          List.of(),
          Parsers::duration,
          "DURATION");

  public static final Flag<Integer> WEB_MAX_CONNECTIONS =
      new Flag<>(
          "web.max-connections",
          "Open HTTP(S) connections in all; at the limit new ones wait in the listen backlog and"
              + " idle ones are closed after 2s, so connections that never finish cannot exhaust"
              + " the heap (docs/security.md).",
          "128",
          List.of(),
          Flags::atLeastOne,
          "N");

  public static final Flag<Integer> WEB_MAX_CONNECTIONS_PER_CLIENT =
      new Flag<>(
          "web.max-connections-per-client",
          "Open HTTP(S) connections per client address; more are closed as they open, so one pod"
              + " cannot take --web.max-connections from the scrapers (127.0.0.1 and ::1, the"
              + " pod's own loopback, excepted).",
          "16",
          List.of(),
          Flags::atLeastOne,
          "N");

  public static final Flag<Duration> WEB_IDLE_TIMEOUT =
      new Flag<>(
          "web.idle-timeout",
          "Close an HTTP(S) connection that made no progress (read or write) for this long, e.g."
              + " one whose responses are never read.",
          "30s",
          List.of(),
          Flags::positiveDuration,
          "DURATION");

  public static final Flag<Duration> WEB_TLS_HANDSHAKE_TIMEOUT =
      new Flag<>(
          "web.tls-handshake-timeout",
          "Close a TLS connection whose handshake has not finished this long after it opened,"
              + " however slowly its bytes keep coming.",
          "10s",
          List.of(),
          Flags::positiveDuration,
          "DURATION");

  public static final Flag<Path> CACHE_ROOT =
      new Flag<>(
          "path.cache-root",
          "Directory holding <podUID>_<container>/ directories with HAMi-core *.cache files.",
          "/usr/local/vgpu/containers",
          List.of(),
          Parsers::path,
          "DIR");

  public static final Flag<Path> PROCFS =
      new Flag<>(
          "path.procfs",
          "The host's /proc (needs hostPID: true in a pod).",
          "/proc",
          List.of(),
          Parsers::path,
          "DIR");

  public static final Flag<String> NODE_NAME =
      new Flag<>(
          "node-name",
          "This node's name (downward API spec.nodeName); empty means the host name.",
          "",
          List.of("NODE_NAME"),
          Parsers::string,
          "NAME");

  public static final Flag<Boolean> KUBERNETES =
      new Flag<>(
          "kubernetes",
          "Join pod metadata from the API server (node-scoped informer); false uses directory names only.",
          "true",
          List.of(),
          Parsers::bool,
          "BOOL");

  public static final Flag<Optional<Path>> KUBECONFIG =
      new Flag<>(
          "kubeconfig",
          "Kubeconfig file; empty means in-cluster service account, then ~/.kube/config.",
          "",
          List.of("KUBECONFIG"),
          Parsers::optionalPath,
          "FILE");

  public static final Flag<List<String>> POD_LABELS =
      new Flag<>(
          "kubernetes.pod-labels",
          "Comma-separated pod label keys exported as label_<key> on vgpu_container_pod_info.",
          "",
          List.of(),
          Parsers::labelKeys,
          "KEYS");

  public static final Flag<Duration> KUBERNETES_RESYNC =
      new Flag<>(
          "kubernetes.resync",
          "Informer resync period.",
          "5m",
          List.of(),
          Parsers.durationAtLeast(Duration.ofSeconds(1)),
          "DURATION");

  public static final Flag<String> KUBELET_POD_RESOURCES_SOCKET =
      new Flag<>(
          "kubelet.pod-resources-socket",
          "The kubelet's pod-resources gRPC socket: which container holds which GPU, MIG or"
              + " replica device (docs/pod-resources.md); empty, or --kubernetes=false, turns it"
              + " off.",
          "/var/lib/kubelet/pod-resources/kubelet.sock",
          List.of(),
          Parsers::string,
          "SOCKET");

  public static final Flag<Duration> KUBELET_POD_RESOURCES_INTERVAL =
      new Flag<>(
          "kubelet.pod-resources-interval",
          "How often the pod-resources socket is polled (each call has a 2s deadline; failures"
              + " back off up to 1m).",
          "5s",
          List.of(),
          Parsers.durationAtLeast(Duration.ofMillis(100)),
          "DURATION");

  public static final Flag<Duration> RESCAN_INTERVAL =
      new Flag<>(
          "discovery.rescan-interval",
          "Full rescan of the cache root besides inotify events; a missed event heals within this.",
          "10s",
          List.of(),
          Parsers.durationAtLeast(Duration.ofMillis(100)),
          "DURATION");

  public static final Flag<Integer> MAX_CONTAINERS =
      new Flag<>(
          "discovery.max-containers",
          "At most this many container directories are read (the first by name); the rest are"
              + " skipped and named in /readyz, so thousands of leftover directories cannot exhaust"
              + " the heap (1 000 fit the default -Xmx48m with room for a render; docs/fleet.md).",
          "1000",
          List.of(),
          raw -> {
            int n = Integer.parseInt(raw.strip());
            if (n < 1) {
              throw new IllegalArgumentException("must be at least 1");
            }
            return n;
          },
          "N");

  public static final Flag<Duration> USAGE_GRACE_PERIOD =
      new Flag<>(
          "usage.grace-period",
          "How long a container's usage counters stay after it was last seen (docs/usage-accounting.md).",
          "10m",
          List.of(),
          Parsers::duration,
          "DURATION");

  public static final Flag<Duration> STALE_GRACE_PERIOD =
      new Flag<>(
          "stale.grace-period",
          "How long a directory whose pod is unknown waits before it counts as stale.",
          "5m",
          List.of(),
          Parsers::duration,
          "DURATION");

  public static final Flag<Boolean> STALE_REMOVE =
      new Flag<>(
          "stale.remove",
          "Delete stale directories (pod gone for longer than the grace period). Needs a writable mount.",
          "false",
          List.of(),
          Parsers::bool,
          "BOOL");

  public static final Flag<Boolean> HAMI_COMPAT =
      new Flag<>(
          "hami-compat",
          "Also export HAMi vGPU monitor metric families (hami_*, zone=\"vGPU\") for existing dashboards.",
          "true",
          List.of(),
          Parsers::bool,
          "BOOL");

  public static final Flag<List<String>> COLLECTORS_DISABLED =
      new Flag<>(
          "collectors.disabled",
          "Comma-separated collector names to turn off (see README: Metrics).",
          "",
          List.of(),
          Parsers::list,
          "NAMES");

  public static final Flag<Boolean> NVML =
      new Flag<>(
          "nvml",
          "Sample GPUs through NVML (libnvidia-ml); false exports region data only.",
          "true",
          List.of(),
          Parsers::bool,
          "BOOL");

  public static final Flag<String> NVML_LIBRARY =
      new Flag<>(
          "nvml.library",
          "NVML library soname or path loaded through JNA (the driver ships only the .so.1).",
          "libnvidia-ml.so.1",
          List.of(),
          Parsers::string,
          "LIB");

  public static final Flag<Duration> NVML_SAMPLE_INTERVAL =
      new Flag<>(
          "nvml.sample-interval",
          "How often the background NVML sampler polls the GPUs.",
          "1s",
          List.of(),
          Parsers.durationAtLeast(Duration.ofMillis(100)),
          "DURATION");

  public static final Flag<Duration> NVML_WINDOW =
      new Flag<>(
          "nvml.window",
          "Averaging window of per-process and GPU utilization (time-weighted NVML samples).",
          "5s",
          List.of(),
          Parsers.durationAtLeast(Duration.ofMillis(500)),
          "DURATION");

  public static final Flag<Boolean> ATTRIBUTION_FEEDBACK =
      new Flag<>(
          "attribution.feedback",
          "HAMi monitor parity: priority blocking (recent_kernel) and utilization_switch writes into"
              + " the regions. Off by default: the exporter writes nothing unless asked (the chart's"
              + " HAMi-replacement mode turns it on).",
          "false",
          List.of(),
          Parsers::bool,
          "BOOL");

  public static final Flag<Boolean> ATTRIBUTION_REPAIR_HOSTPID =
      new Flag<>(
          "attribution.repair-hostpid",
          "Write the host pid resolved through /proc into slots whose hostpid is wrong.",
          "false",
          List.of(),
          Parsers::bool,
          "BOOL");

  public static final Flag<Duration> ATTRIBUTION_LEAK_AFTER =
      new Flag<>(
          "attribution.leak-after",
          "Memory held this long without a kernel sets vgpu_container_memory_leak_suspected.",
          "1h",
          List.of(),
          Parsers.durationAtLeast(Duration.ofSeconds(1)),
          "DURATION");

  public static final Flag<String> LOG_LEVEL =
      new Flag<>(
          "log.level",
          "Log level: trace, debug, info, warn or error.",
          "info",
          List.of(),
          Parsers.oneOf("trace", "debug", "info", "warn", "error"),
          "LEVEL");

  public static final Flag<String> LOG_FORMAT =
      new Flag<>(
          "log.format",
          "Log format: logfmt (key=value lines) or json (one object per line).",
          "logfmt",
          List.of(),
          Parsers.oneOf("logfmt", "json"),
          "FORMAT");

  /** Every flag, in help order. */
  public static final List<Flag<?>> ALL =
      List.of(
          WEB_LISTEN_ADDRESS,
          WEB_LISTEN_PORT,
          WEB_METRICS_MAX_AGE,
          WEB_CONFIG_FILE,
          WEB_STATUS_PAGES,
          WEB_STATUS_MAX_AGE,
          WEB_MAX_CONNECTIONS,
          WEB_MAX_CONNECTIONS_PER_CLIENT,
          WEB_IDLE_TIMEOUT,
          WEB_TLS_HANDSHAKE_TIMEOUT,
          CACHE_ROOT,
          PROCFS,
          NODE_NAME,
          KUBERNETES,
          KUBECONFIG,
          POD_LABELS,
          KUBERNETES_RESYNC,
          KUBELET_POD_RESOURCES_SOCKET,
          KUBELET_POD_RESOURCES_INTERVAL,
          RESCAN_INTERVAL,
          MAX_CONTAINERS,
          STALE_GRACE_PERIOD,
          USAGE_GRACE_PERIOD,
          STALE_REMOVE,
          HAMI_COMPAT,
          COLLECTORS_DISABLED,
          NVML,
          NVML_LIBRARY,
          NVML_SAMPLE_INTERVAL,
          NVML_WINDOW,
          ATTRIBUTION_FEEDBACK,
          ATTRIBUTION_REPAIR_HOSTPID,
          ATTRIBUTION_LEAK_AFTER,
          LOG_LEVEL,
          LOG_FORMAT);

  private static int atLeastOne(String raw) {
    int n = Integer.parseInt(raw.strip());
    if (n < 1) {
      throw new IllegalArgumentException("must be at least 1");
    }
    return n;
  }

  private static Duration positiveDuration(String raw) {
    Duration d = Parsers.duration(raw);
    if (!d.isPositive()) {
      throw new IllegalArgumentException("must be longer than 0s");
    }
    return d;
  }

  private Flags() {}
}

package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.*;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.discovery.ParseErrors;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.regioncodec.RegionException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The exporter's own health. Example:
 *
 * <pre>
 * vgpu_exporter_build_info{revision="unknown",version="0.1.0-SNAPSHOT"} 1
 * vgpu_exporter_files_mapped{node="gpu-1"} 12.0
 * vgpu_exporter_parse_errors_total{node="gpu-1",reason="bad_magic"} 1.0
 * vgpu_exporter_apiserver_up{node="gpu-1"} 1.0
 * vgpu_exporter_collector_success{collector="region",node="gpu-1"} 1.0
 * </pre>
 *
 * Registered last, so collector outcomes are those of the current scrape.
 */
public final class ExporterCollector extends VgpuCollector {
  private static final FamilySpec.Info EXPORTER_BUILD_INFO =
      FamilySpec.info(
          MetricNames.EXPORTER_BUILD_INFO,
          "Version and revision of the running exporter (value 1).",
          "version",
          "revision");
  private static final FamilySpec.Gauge EXPORTER_SCRAPE_DURATION =
      FamilySpec.gauge(
          MetricNames.EXPORTER_SCRAPE_DURATION,
          "Duration of the previous complete scrape (collect, encode, write).",
          L_NODE);
  private static final FamilySpec.Gauge EXPORTER_FILES_MAPPED =
      FamilySpec.gauge(
          MetricNames.EXPORTER_FILES_MAPPED, "Cache files currently memory-mapped.", L_NODE);
  private static final FamilySpec.Counter EXPORTER_PARSE_ERRORS =
      FamilySpec.counter(
          MetricNames.EXPORTER_PARSE_ERRORS,
          "Cache files that could not be mapped or read, by reason (counted once per file and reason).",
          L_NODE,
          "reason");
  private static final FamilySpec.Counter EXPORTER_BEST_EFFORT_READS =
      FamilySpec.counter(
          MetricNames.EXPORTER_BEST_EFFORT_READS,
          "Region snapshots whose slot seqlock never settled within the retry bound (a writer died mid-update or rewrites without pause); their values were served as read.",
          L_NODE);
  private static final FamilySpec.Gauge EXPORTER_APISERVER_UP =
      FamilySpec.gauge(
          MetricNames.EXPORTER_APISERVER_UP,
          "1 when the pod informer's watch is established; 0 when the API server is unreachable or RBAC forbids (labels then come from directory names).",
          L_NODE);
  private static final FamilySpec.Gauge EXPORTER_CACHE_ROOT_READABLE =
      FamilySpec.gauge(
          MetricNames.EXPORTER_CACHE_ROOT_READABLE,
          "1 when the cache root could be listed in the last discovery pass.",
          L_NODE);
  private static final FamilySpec.Gauge EXPORTER_DISCOVERY_AGE =
      FamilySpec.gauge(
          MetricNames.EXPORTER_DISCOVERY_AGE,
          "Seconds since the last discovery pass finished.",
          L_NODE);
  private static final FamilySpec.Gauge EXPORTER_COLLECTOR_SUCCESS =
      FamilySpec.gauge(
          MetricNames.EXPORTER_COLLECTOR_SUCCESS,
          "1 when the collector succeeded in this scrape.",
          L_NODE,
          "collector");
  private static final FamilySpec.Gauge EXPORTER_COLLECTOR_DURATION =
      FamilySpec.gauge(
          MetricNames.EXPORTER_COLLECTOR_DURATION,
          "Time the collector took in this scrape.",
          L_NODE,
          "collector");
  private static final FamilySpec.Counter HTTP_CONNECTIONS_REJECTED =
      FamilySpec.counter(
          MetricNames.HTTP_CONNECTIONS_REJECTED,
          "Connections the HTTP server closed before they proved anything, by reason (per_client_limit: the client address had --web.max-connections-per-client open; handshake_timeout: its TLS handshake did not finish within --web.tls-handshake-timeout).",
          L_NODE,
          "reason");
  private static final FamilySpec.Counter HTTP_AUTH_THROTTLED =
      FamilySpec.counter(
          MetricNames.HTTP_AUTH_THROTTLED,
          "Requests answered 429 without checking their credentials because the bounded password hashing was saturated (a wrong-password flood, or more new clients at once than it admits).",
          L_NODE);

  private static final List<FamilySpec> FAMILIES =
      List.of(
          EXPORTER_BUILD_INFO,
          EXPORTER_SCRAPE_DURATION,
          EXPORTER_FILES_MAPPED,
          EXPORTER_PARSE_ERRORS,
          EXPORTER_BEST_EFFORT_READS,
          EXPORTER_APISERVER_UP,
          EXPORTER_CACHE_ROOT_READABLE,
          EXPORTER_DISCOVERY_AGE,
          EXPORTER_COLLECTOR_SUCCESS,
          EXPORTER_COLLECTOR_DURATION,
          HTTP_CONNECTIONS_REJECTED,
          HTTP_AUTH_THROTTLED);

  private final BuildInfo build;
  private final ParseErrors errors;
  private final CollectorStats stats;

  public ExporterCollector(BuildInfo build, ParseErrors errors, CollectorStats stats) {
    super(FAMILIES);
    this.build = build;
    this.errors = errors;
    this.stats = stats;
  }

  private static final String[] BUILD_LABELS = {"version", "revision"};

  @Override
  protected void collect(NodeState state, Sink out) {
    String nodeName = state.node();
    Labels node = labels.node(nodeName);
    out.add(
        families
            .info(EXPORTER_BUILD_INFO)
            .add(labels.of(BUILD_LABELS, new String[] {build.version(), build.revision()}))
            .build());
    double last = stats.lastScrapeSeconds();
    if (!Double.isNaN(last)) {
      out.add(families.gauge(EXPORTER_SCRAPE_DURATION).add(last, node).build());
    }
    out.add(
        families.gauge(EXPORTER_FILES_MAPPED).add(state.discovery().filesMapped(), node).build());
    var parse = families.counter(EXPORTER_PARSE_ERRORS);
    for (RegionException.Reason r : RegionException.Reason.values()) {
      parse.add((double) errors.count(r), labels.nodeWith(nodeName, "reason", r.label()));
    }
    parse.add(
        (double) errors.tooManyFiles(),
        labels.nodeWith(nodeName, "reason", ParseErrors.TOO_MANY_FILES));
    out.add(parse.build());
    out.add(
        families
            .counter(EXPORTER_BEST_EFFORT_READS)
            .add((double) errors.bestEffortReads(), node)
            .build());
    out.add(families.gauge(EXPORTER_APISERVER_UP).add(state.api().up() ? 1 : 0, node).build());
    out.add(
        families
            .gauge(EXPORTER_CACHE_ROOT_READABLE)
            .add(state.discovery().rootReadable() ? 1 : 0, node)
            .build());
    if (state.discovery().generation() > 0) {
      double age = Duration.between(state.discovery().scannedAt(), state.at()).toMillis() / 1000.0;
      out.add(families.gauge(EXPORTER_DISCOVERY_AGE).add(Math.max(0, age), node).build());
    }
    var success = families.gauge(EXPORTER_COLLECTOR_SUCCESS);
    var duration = families.gauge(EXPORTER_COLLECTOR_DURATION);
    Map<String, CollectorStats.Outcome> outcomes = new TreeMap<>(stats.outcomes());
    outcomes.forEach(
        (name, o) -> {
          Labels l = labels.nodeWith(nodeName, "collector", name);
          success.add(o.success() ? 1 : 0, l);
          duration.add(o.seconds(), l);
        });
    out.add(success.build());
    out.add(duration.build());
    var rejected = families.counter(HTTP_CONNECTIONS_REJECTED);
    for (CollectorStats.ConnectionRejection r : CollectorStats.ConnectionRejection.values()) {
      rejected.add(
          (double) stats.connectionsRejected(r), labels.nodeWith(nodeName, "reason", r.label()));
    }
    out.add(rejected.build());
    out.add(
        families
            .counter(HTTP_AUTH_THROTTLED)
            .add((double) stats.authThrottledCount(), node)
            .build());
  }
}

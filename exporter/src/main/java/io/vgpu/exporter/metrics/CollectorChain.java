package io.vgpu.exporter.metrics;

import io.prometheus.metrics.model.registry.MultiCollector;
import io.prometheus.metrics.model.registry.PrometheusScrapeRequest;
import io.prometheus.metrics.model.snapshots.MetricFamilyDescriptor;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import io.vgpu.exporter.exposition.Family;
import io.vgpu.exporter.exposition.FamilySource;
import io.vgpu.exporter.node.NodeState;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one collector registered: on each scrape it builds one {@link NodeState} (every mapped region
 * read once) and hands it to each member in list order, recording each member's outcome and
 * duration ({@code vgpu_exporter_collector_success/duration_seconds}). Members run in list order
 * because the exporter collector, last, reports the outcomes of the ones before it (a registry
 * keeps its collectors in a hash set). Duplicate family names across members fail at construction.
 *
 * <p>The node state is a local of the scrape: it is built when the first member that wants a family
 * asks (so a {@code name[]} filter that wants nothing of the regions reads none), and it is garbage
 * once the scrape returns. Nothing keeps it between scrapes, so concurrent scrapes each hold their
 * own and back-to-back scrapes never pile states up (each is ~1 MB at 200 containers); how many
 * scrapes run at once is bounded where they arrive ({@code MetricsEndpoint}: one render per format
 * shared by every waiting scrape, a few client_java scrapes at once).
 */
final class CollectorChain implements MultiCollector, FamilySource {
  private static final Logger LOG = LoggerFactory.getLogger(CollectorChain.class);

  /**
   * One member of the chain.
   *
   * @param name the {@code collector} label of its success and duration
   */
  record Member(String name, VgpuCollector collector) {
    Member {
      Objects.requireNonNull(name, "name");
      Objects.requireNonNull(collector, "collector");
    }
  }

  private final List<Member> members;
  private final Supplier<NodeState> nodeState;
  private final CollectorStats stats;
  private final List<MetricFamilyDescriptor> descriptors;

  /**
   * @param nodeState builds a fresh node state (reads every mapped region): called at most once a
   *     scrape
   * @param stats where each member's outcome and duration are recorded
   */
  CollectorChain(List<Member> members, Supplier<NodeState> nodeState, CollectorStats stats) {
    this.members = List.copyOf(members);
    this.nodeState = Objects.requireNonNull(nodeState, "nodeState");
    this.stats = Objects.requireNonNull(stats, "stats");
    List<MetricFamilyDescriptor> all = new ArrayList<>();
    Set<String> names = new HashSet<>();
    for (Member m : members) {
      for (MetricFamilyDescriptor d : m.collector().descriptors()) {
        if (!names.add(d.getPrometheusName())) {
          throw new IllegalArgumentException(
              "metric family registered twice: " + d.getPrometheusName());
        }
        all.add(d);
      }
    }
    this.descriptors = List.copyOf(all);
  }

  @Override
  public MetricSnapshots collect() {
    return collect(n -> true, null);
  }

  /** The client_java path (protobuf, {@code name[]}): the same families as snapshots. */
  @Override
  public MetricSnapshots collect(Predicate<String> includedNames, PrometheusScrapeRequest request) {
    List<Family> families = scrape(includedNames);
    List<MetricSnapshot> out = new ArrayList<>(families.size());
    for (Family f : families) {
      out.add(f.toSnapshot());
    }
    return new MetricSnapshots(out);
  }

  /**
   * One render's families from every member, ordered by name as client_java orders a registry's
   * snapshots (so both paths write the families in the same order).
   */
  @Override
  public List<Family> families() {
    List<Family> out = scrape(n -> true);
    out.sort(Comparator.comparing(f -> f.metadata().getPrometheusName()));
    return out;
  }

  @Override
  public List<MetricFamilyDescriptor> getMetricFamilyDescriptors() {
    return descriptors;
  }

  /**
   * One scrape: every member in order, sharing one node state. A member that throws is left out of
   * this scrape and recorded as failed (one broken collector never fails the scrape); so is one
   * whose node state could not be built (the next member that wants families tries again).
   */
  private List<Family> scrape(Predicate<String> includedNames) {
    NodeState state = null;
    List<Family> out = new ArrayList<>();
    for (Member m : members) {
      long start = System.nanoTime();
      try {
        if (m.collector().wantsAny(includedNames)) {
          if (state == null) {
            state = nodeState.get(); // timed as the first asking member's, as it waits for it
          }
          VgpuCollector.Sink sink = new VgpuCollector.Sink(includedNames);
          m.collector().collect(state, sink);
          out.addAll(sink.families());
        }
        stats.record(m.name(), true, System.nanoTime() - start);
      } catch (CollectorUnavailableException e) {
        LOG.atDebug()
            .setMessage("collector unavailable")
            .addKeyValue("collector", m.name())
            .addKeyValue("reason", e.getMessage())
            .log();
        stats.record(m.name(), false, System.nanoTime() - start);
      } catch (RuntimeException e) {
        LOG.atError()
            .setMessage("collector failed")
            .addKeyValue("collector", m.name())
            .setCause(e)
            .log();
        stats.record(m.name(), false, System.nanoTime() - start);
      }
    }
    return out;
  }
}

package io.vgpu.exporter.metrics;

import io.prometheus.metrics.model.registry.MultiCollector;
import io.prometheus.metrics.model.registry.PrometheusScrapeRequest;
import io.prometheus.metrics.model.snapshots.MetricFamilyDescriptor;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import io.vgpu.exporter.exposition.Family;
import io.vgpu.exporter.exposition.FamilySource;
import io.vgpu.exporter.exposition.UnsupportedFamilyException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Predicate;

/**
 * Runs collectors in list order as one registration. The registry keeps collectors in a hash set,
 * so without this the exporter collector could run before the ones whose outcomes it reports.
 * Duplicate family names across members fail at construction.
 */
final class CollectorChain implements MultiCollector, FamilySource {
  private final List<InstrumentedCollector> members;
  private final List<MetricFamilyDescriptor> descriptors;
  private final java.util.function.Consumer<Object> scrapeEnded;

  /**
   * @param scrapeEnded told when all members have collected a scrape, so per-scrape state (the
   *     shared NodeState) is released
   */
  CollectorChain(
      List<InstrumentedCollector> members, java.util.function.Consumer<Object> scrapeEnded) {
    this.members = List.copyOf(members);
    this.scrapeEnded = scrapeEnded;
    List<MetricFamilyDescriptor> all = new ArrayList<>();
    Set<String> names = new HashSet<>();
    for (MultiCollector m : members) {
      for (MetricFamilyDescriptor d : m.getMetricFamilyDescriptors()) {
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

  @Override
  public MetricSnapshots collect(PrometheusScrapeRequest request) {
    return collect(n -> true, request);
  }

  @Override
  public MetricSnapshots collect(Predicate<String> includedNames) {
    return collect(includedNames, null);
  }

  @Override
  public MetricSnapshots collect(Predicate<String> includedNames, PrometheusScrapeRequest request) {
    // Members share one NodeState per scrape, keyed by the request's identity. A scrape without a
    // request (registry.scrape(), tests, benchmarks) gets a fresh key so that every member still
    // reads the regions once, not once per member.
    PrometheusScrapeRequest scrape = request != null ? request : new UnnamedScrape();
    List<MetricSnapshot> out = new ArrayList<>();
    try {
      for (InstrumentedCollector m : members) {
        for (MetricSnapshot s : m.collect(includedNames, scrape)) {
          out.add(s);
        }
      }
    } finally {
      scrapeEnded.accept(scrape);
    }
    return new MetricSnapshots(out);
  }

  /**
   * One render's families from every member, sharing one NodeState, ordered by name as client_java
   * orders a registry's snapshots (so both paths write the families in the same order).
   */
  @Override
  public List<Family> families() throws UnsupportedFamilyException {
    PrometheusScrapeRequest scrape = new UnnamedScrape();
    List<Family> out = new ArrayList<>();
    try {
      for (InstrumentedCollector m : members) {
        out.addAll(m.families(scrape));
      }
    } finally {
      scrapeEnded.accept(scrape);
    }
    out.sort(Comparator.comparing(f -> f.metadata().getPrometheusName()));
    return out;
  }

  @Override
  public List<MetricFamilyDescriptor> getMetricFamilyDescriptors() {
    return descriptors;
  }

  /** Identity of one scrape that arrived without an HTTP request: no path, no parameters. */
  private static final class UnnamedScrape implements PrometheusScrapeRequest {
    @Override
    public String getRequestPath() {
      return "";
    }

    @Override
    public String[] getParameterValues(String name) {
      return null;
    }
  }
}

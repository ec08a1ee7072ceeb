package io.vgpu.exporter.metrics;

import io.prometheus.metrics.model.registry.MultiCollector;
import io.prometheus.metrics.model.registry.PrometheusScrapeRequest;
import io.prometheus.metrics.model.snapshots.MetricFamilyDescriptor;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import io.vgpu.exporter.exposition.Family;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.exporter.node.NodeStateProvider;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

/**
 * Base of every exporter collector: a client_java {@link MultiCollector} that declares its families
 * up front (so duplicate names fail at registration and {@code name[]} filters skip work) and turns
 * the scrape's shared {@link NodeState} into snapshots. Subclasses do no I/O.
 */
public abstract class VgpuCollector implements MultiCollector {
  private final NodeStateProvider states;

  /** This collector's label sets (cached per container, so families join and repeat cheaply). */
  protected final LabelSets labels = new LabelSets();

  /** This collector's family builders (metadata and last label order remembered per family). */
  protected final Families families = new Families();

  protected VgpuCollector(NodeStateProvider states) {
    this.states = states;
  }

  /** The families this collector can emit (names, types, label names). */
  protected abstract List<MetricFamilyDescriptor> descriptors();

  /** Adds snapshots for the families {@code out} wants. */
  protected abstract void collect(NodeState state, Sink out);

  /** Where a collector puts its families; skips families the scrape filtered out. */
  public static final class Sink {
    private final Predicate<String> included;
    private final List<Family> families = new ArrayList<>();

    Sink(Predicate<String> included) {
      this.included = included;
    }

    /** Whether the scrape wants family {@code name} (base name, without _total/_info). */
    public boolean wants(String name) {
      // client_java's name filters match a requested exposition name (x_total, x_info) against
      // the base name by prefix, so the base name is what to test.
      return included.test(name);
    }

    /** Whether the scrape wants the family {@code spec} declares. */
    public boolean wants(FamilySpec spec) {
      return wants(spec.name());
    }

    public void add(Family family) {
      if (family.size() > 0 && wants(family.metadata().getPrometheusName())) {
        families.add(family);
      }
    }
  }

  @Override
  public List<MetricFamilyDescriptor> getMetricFamilyDescriptors() {
    return descriptors();
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
    List<Family> families = families(includedNames, request);
    List<MetricSnapshot> snapshots = new ArrayList<>(families.size());
    for (Family f : families) {
      snapshots.add(f.toSnapshot());
    }
    return new MetricSnapshots(snapshots);
  }

  /**
   * The families {@code includedNames} wants, built for the render path ({@link
   * io.vgpu.exporter.exposition.TextEncoder}) without client_java's snapshot objects; {@link
   * #collect(Predicate, PrometheusScrapeRequest)} is the same data as snapshots.
   */
  public List<Family> families(Predicate<String> includedNames, PrometheusScrapeRequest request) {
    Sink sink = new Sink(includedNames);
    boolean any = false;
    for (MetricFamilyDescriptor d : descriptors()) {
      any |= sink.wants(d.getPrometheusName());
    }
    if (!any) {
      return List.of();
    }
    collect(states.forScrape(request), sink);
    return sink.families;
  }
}

package io.vgpu.exporter.metrics;

import io.prometheus.metrics.model.snapshots.MetricFamilyDescriptor;
import io.vgpu.exporter.exposition.Family;
import io.vgpu.exporter.node.NodeState;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

/**
 * Base of every exporter collector: declares its families up front (so duplicate names fail at
 * registration and {@code name[]} filters skip work) and turns the scrape's {@link NodeState} into
 * families. Subclasses do no I/O. A collector is never registered on its own: the {@link
 * CollectorChain} builds one node state per scrape and hands it to each collector in turn.
 */
public abstract class VgpuCollector {
  /** This collector's label sets (cached per container, so families join and repeat cheaply). */
  protected final LabelSets labels = new LabelSets();

  /** This collector's family builders (metadata and last label order remembered per family). */
  protected final Families families = new Families();

  private final List<MetricFamilyDescriptor> descriptors;

  /**
   * @param specs every family this collector can emit, each declared once by name: the chain
   *     registers their descriptors (names, types, label names) and skips the collector when a
   *     scrape's name filter wants none of them
   */
  protected VgpuCollector(List<? extends FamilySpec> specs) {
    this.descriptors = FamilySpec.descriptors(specs);
  }

  /** The families this collector can emit (names, types, label names). */
  final List<MetricFamilyDescriptor> descriptors() {
    return descriptors;
  }

  /** Adds families for the families {@code out} wants. */
  protected abstract void collect(NodeState state, Sink out);

  /** Whether the scrape wants any of this collector's families (else it is not asked). */
  final boolean wantsAny(Predicate<String> includedNames) {
    for (MetricFamilyDescriptor d : descriptors) {
      if (includedNames.test(d.getPrometheusName())) {
        return true;
      }
    }
    return false;
  }

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

    /** What the collector added. */
    List<Family> families() {
      return families;
    }
  }
}

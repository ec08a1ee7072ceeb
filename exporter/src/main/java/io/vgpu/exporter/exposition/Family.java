package io.vgpu.exporter.exposition;

import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.DataPointSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.InfoSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricMetadata;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import java.util.List;

/**
 * One metric family as {@link TextEncoder} writes it: metadata, a kind, and points already in
 * client_java's order (sorted by labels, no two with equal labels). The exporter's collectors build
 * these directly, so a render never creates client_java data point objects nor has client_java sort
 * and validate every family again ({@code Labels.compareTo} over ~13 000 points was a fifth of a
 * scrape's CPU); {@link #toSnapshot()} gives client_java's form to the scrapes it serves itself
 * (protobuf, {@code name[]}), where it sorts and validates as always.
 */
public interface Family {
  /** The kinds the fast encoder writes. */
  enum Kind {
    GAUGE,
    COUNTER,
    INFO
  }

  MetricMetadata metadata();

  Kind kind();

  /** Number of points. */
  int size();

  /** Labels of point {@code i}; points are in {@link Labels#compareTo} order, all distinct. */
  Labels labels(int i);

  /** Value of point {@code i} (1 for every point of an info family). */
  double value(int i);

  /** The same family as client_java's snapshot (sorted and validated by client_java). */
  MetricSnapshot toSnapshot();

  /**
   * A client_java snapshot as a family, when the fast encoder writes it exactly as client_java
   * would: a gauge, counter or info family without exemplars or timestamps.
   *
   * @throws UnsupportedFamilyException otherwise
   */
  static Family of(MetricSnapshot snapshot) throws UnsupportedFamilyException {
    String name = snapshot.getMetadata().getName();
    Kind kind =
        switch (snapshot) {
          case GaugeSnapshot g -> Kind.GAUGE;
          case CounterSnapshot c -> Kind.COUNTER;
          case InfoSnapshot i -> Kind.INFO;
          default ->
              throw new UnsupportedFamilyException("type " + snapshot.getClass().getSimpleName());
        };
    List<? extends DataPointSnapshot> points = snapshot.getDataPoints();
    for (DataPointSnapshot p : points) {
      if (p.hasScrapeTimestamp() || p.hasCreatedTimestamp()) {
        throw new UnsupportedFamilyException("timestamps in " + name);
      }
      if (p instanceof CounterSnapshot.CounterDataPointSnapshot c && c.getExemplar() != null) {
        throw new UnsupportedFamilyException("exemplar in " + name);
      }
    }
    return new Family() {
      @Override
      public MetricMetadata metadata() {
        return snapshot.getMetadata();
      }

      @Override
      public Kind kind() {
        return kind;
      }

      @Override
      public int size() {
        return points.size();
      }

      @Override
      public Labels labels(int i) {
        return points.get(i).getLabels();
      }

      @Override
      public double value(int i) {
        return switch (points.get(i)) {
          case GaugeSnapshot.GaugeDataPointSnapshot g -> g.getValue();
          case CounterSnapshot.CounterDataPointSnapshot c -> c.getValue();
          default -> 1;
        };
      }

      @Override
      public MetricSnapshot toSnapshot() {
        return snapshot;
      }
    };
  }
}

package io.vgpu.exporter.metrics;

import io.prometheus.metrics.model.registry.MetricType;
import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.CounterSnapshot.CounterDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot.GaugeDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.InfoSnapshot;
import io.prometheus.metrics.model.snapshots.InfoSnapshot.InfoDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricFamilyDescriptor;
import io.prometheus.metrics.model.snapshots.MetricMetadata;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.Unit;
import java.util.ArrayList;
import java.util.List;

/**
 * A metric family under construction: name, help, type and its data points. The unit is derived
 * from the name suffix ({@code _bytes}, {@code _seconds}, {@code _ratio}) so OpenMetrics carries
 * {@code # UNIT} lines. Not thread-safe; one per collect call.
 */
public final class Families {
  private Families() {}

  public static MetricMetadata metadata(String name, String help) {
    Unit unit = unitOf(name);
    return unit == null ? new MetricMetadata(name, help) : new MetricMetadata(name, help, unit);
  }

  private static Unit unitOf(String name) {
    if (name.endsWith("_bytes")) {
      return Unit.BYTES;
    }
    if (name.endsWith("_seconds")) {
      return Unit.SECONDS;
    }
    if (name.endsWith("_ratio")) {
      return Unit.RATIO;
    }
    return null;
  }

  public static MetricFamilyDescriptor describe(
      MetricType type, String name, String help, String... labels) {
    return MetricFamilyDescriptor.of(type, metadata(name, help), List.of(labels));
  }

  /** A gauge family. */
  public static final class Gauge {
    private final MetricMetadata meta;
    private final List<GaugeDataPointSnapshot> points = new ArrayList<>();

    public Gauge(String name, String help) {
      this.meta = metadata(name, help);
    }

    public Gauge add(double value, Labels labels) {
      points.add(new GaugeDataPointSnapshot(value, labels, null));
      return this;
    }

    public MetricSnapshot build() {
      return new GaugeSnapshot(meta, points);
    }
  }

  /** A counter family; {@code name} is without {@code _total}. */
  public static final class Counter {
    private final MetricMetadata meta;
    private final List<CounterDataPointSnapshot> points = new ArrayList<>();

    public Counter(String name, String help) {
      this.meta = metadata(name, help);
    }

    public Counter add(double value, Labels labels) {
      points.add(new CounterDataPointSnapshot(value, labels, null, 0L));
      return this;
    }

    public MetricSnapshot build() {
      return new CounterSnapshot(meta, points);
    }
  }

  /** An info family; {@code name} is without {@code _info}. */
  public static final class Info {
    private final MetricMetadata meta;
    private final List<InfoDataPointSnapshot> points = new ArrayList<>();

    public Info(String name, String help) {
      this.meta = new MetricMetadata(name, help);
    }

    public Info add(Labels labels) {
      points.add(new InfoDataPointSnapshot(labels));
      return this;
    }

    public MetricSnapshot build() {
      return new InfoSnapshot(meta, points);
    }
  }
}

package io.vgpu.exporter.metrics;

import io.prometheus.metrics.model.registry.MetricType;
import io.prometheus.metrics.model.snapshots.MetricFamilyDescriptor;
import io.prometheus.metrics.model.snapshots.MetricMetadata;
import io.prometheus.metrics.model.snapshots.Unit;
import java.util.List;

/**
 * One metric family a collector emits, declared once by name: its type, name, help text and label
 * names. The collector lists its specs as its descriptors and builds each family from the same
 * constant ({@code families.gauge(MEMORY_USED)}), so the family a reader sees built is the one
 * declared, and its help text cannot drift from the descriptor's. The type is the spec's class, so
 * a counter cannot be built as a gauge.
 */
public abstract sealed class FamilySpec
    permits FamilySpec.Gauge, FamilySpec.Counter, FamilySpec.Info {
  private final String name;
  private final String help;
  private final MetricFamilyDescriptor descriptor;

  private FamilySpec(MetricType type, String name, String help, String... labels) {
    this.name = name;
    this.help = help;
    this.descriptor = MetricFamilyDescriptor.of(type, metadata(name, help), List.of(labels));
  }

  /** Metadata with the unit its name ends in ({@code _bytes}, {@code _seconds}, {@code _ratio}). */
  static MetricMetadata metadata(String name, String help) {
    Unit unit = unitOf(name);
    return unit == null ? new MetricMetadata(name, help) : new MetricMetadata(name, help, unit);
  }

  /** The unit a family's name ends in; null for none (OpenMetrics then writes no # UNIT). */
  static Unit unitOf(String name) {
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

  /** A gauge family; {@code labels} are its label names. */
  public static Gauge gauge(String name, String help, String... labels) {
    return new Gauge(name, help, labels);
  }

  /** A counter family; {@code name} is without {@code _total}. */
  public static Counter counter(String name, String help, String... labels) {
    return new Counter(name, help, labels);
  }

  /** An info family; {@code name} is without {@code _info}. */
  public static Info info(String name, String help, String... labels) {
    return new Info(name, help, labels);
  }

  /** The descriptors of {@code specs}, in order (a collector's {@code descriptors()}). */
  public static List<MetricFamilyDescriptor> descriptors(List<? extends FamilySpec> specs) {
    return specs.stream().map(FamilySpec::descriptor).toList();
  }

  /** The family's base name (without {@code _total} or {@code _info}). */
  public final String name() {
    return name;
  }

  public final String help() {
    return help;
  }

  /** What the collector declares to the registry (name, type, label names, unit). */
  public final MetricFamilyDescriptor descriptor() {
    return descriptor;
  }

  @Override
  public final String toString() {
    return name;
  }

  /** A gauge family's spec. */
  public static final class Gauge extends FamilySpec {
    private Gauge(String name, String help, String... labels) {
      super(MetricType.GAUGE, name, help, labels);
    }
  }

  /** A counter family's spec. */
  public static final class Counter extends FamilySpec {
    private Counter(String name, String help, String... labels) {
      super(MetricType.COUNTER, name, help, labels);
    }
  }

  /** An info family's spec. */
  public static final class Info extends FamilySpec {
    private Info(String name, String help, String... labels) {
      super(MetricType.INFO, name, help, labels);
    }
  }
}

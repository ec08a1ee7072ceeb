package io.vgpu.exporter.metrics;

import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.CounterSnapshot.CounterDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.DuplicateLabelsException;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot.GaugeDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.InfoSnapshot;
import io.prometheus.metrics.model.snapshots.InfoSnapshot.InfoDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricMetadata;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.Unit;
import io.vgpu.exporter.exposition.Family;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Builds metric families (name, help, type and data points) for one collector, remembering what
 * makes the next scrape cheaper: each family's metadata and the label order of its last build. Each
 * collector owns one instance, so nothing is shared between collectors or exporters in one JVM. The
 * unit is derived from the name suffix ({@code _bytes}, {@code _seconds}, {@code _ratio}) so
 * OpenMetrics carries {@code # UNIT} lines. Thread-safe; the builders it hands out ({@link Gauge},
 * {@link Counter}, {@link Info}) are not: one per collect call.
 */
public final class Families {
  /**
   * The label order of each family's last build, keyed by family name. A family's points must be in
   * {@link Labels#compareTo} order with no two equal ({@link Family}); sorting ~13 000 points a
   * scrape with that comparison was a fifth of a scrape's CPU. Label sets come from {@link
   * LabelSets}' cache, so while the node's containers do not change a scrape produces the same
   * label objects in the same sequence and the remembered permutation (checked by identity, point
   * by point) applies; any difference sorts and checks for duplicates again. Only the order is
   * remembered, never a value.
   */
  private final ConcurrentHashMap<String, Order> orders = new ConcurrentHashMap<>();

  private static final int ORDERS_LIMIT = 1024;

  /**
   * {@code input}: the label objects of the build the order was computed for, in the order they
   * were added; {@code sorted}: the permutation into label order, null when already in order.
   */
  @SuppressWarnings("ArrayRecordComponent") // never compared or hashed; the arrays are owned
  private record Order(Labels[] input, int[] sorted) {}

  /** Last build's point count, so the next build's arrays do not grow by copying. */
  private int sizeHint(String family) {
    Order order = orders.get(family);
    return order == null ? 16 : Math.max(1, order.input().length);
  }

  /**
   * The permutation that puts {@code labels[0..n)} in label order (null: already in order).
   *
   * @throws DuplicateLabelsException when two points have equal labels, as client_java would
   */
  private int[] orderOf(MetricMetadata meta, Labels[] labels, int n) {
    if (n < 2) {
      return null;
    }
    Order order = orders.get(meta.getName());
    if (order != null && sameLabels(order.input(), labels, n)) {
      return order.sorted();
    }
    Labels[] input = Arrays.copyOf(labels, n);
    Integer[] index = new Integer[n];
    for (int i = 0; i < n; i++) {
      index[i] = i;
    }
    Arrays.sort(index, (a, b) -> input[a].compareTo(input[b]));
    int[] sorted = new int[n];
    boolean identity = true;
    for (int i = 0; i < n; i++) {
      sorted[i] = index[i];
      identity &= sorted[i] == i;
      if (i > 0 && input[sorted[i - 1]].equals(input[sorted[i]])) {
        throw new DuplicateLabelsException(meta, input[sorted[i]]);
      }
    }
    if (orders.size() >= ORDERS_LIMIT) {
      orders.clear();
    }
    Order computed = new Order(input, identity ? null : sorted);
    orders.put(meta.getName(), computed);
    return computed.sorted();
  }

  @SuppressWarnings("ReferenceEquality") // the same label objects as last build, by design
  private static boolean sameLabels(Labels[] input, Labels[] labels, int n) {
    if (input.length != n) {
      return false;
    }
    for (int i = 0; i < n; i++) {
      if (input[i] != labels[i]) {
        return false;
      }
    }
    return true;
  }

  /**
   * Metadata per family name: building it validates the name through client_java's UTF-8 check,
   * which allocates an encoder per call; families are rebuilt every scrape.
   */
  private final ConcurrentHashMap<String, MetricMetadata> metadata = new ConcurrentHashMap<>();

  /** Metadata with the unit its name ends in ({@code _bytes}, {@code _seconds}, {@code _ratio}). */
  public static MetricMetadata metadata(String name, String help) {
    return FamilySpec.metadata(name, help);
  }

  /** Cached by name; rebuilt when the help text or unit asked for differs from the cached one. */
  private MetricMetadata cachedMetadata(String name, String help, Unit unit) {
    MetricMetadata m = metadata.get(name);
    if (m == null
        || !java.util.Objects.equals(m.getHelp(), help)
        || !java.util.Objects.equals(m.getUnit(), unit)) {
      m = unit == null ? new MetricMetadata(name, help) : new MetricMetadata(name, help, unit);
      if (metadata.size() >= ORDERS_LIMIT) {
        metadata.clear();
      }
      metadata.put(name, m);
    }
    return m;
  }

  /** A gauge family under construction. */
  public Gauge gauge(String name, String help) {
    return new Gauge(cachedMetadata(name, help, unitOf(name)));
  }

  /** A counter family under construction; {@code name} is without {@code _total}. */
  public Counter counter(String name, String help) {
    return new Counter(cachedMetadata(name, help, unitOf(name)));
  }

  /** An info family under construction; {@code name} is without {@code _info}. */
  public Info info(String name, String help) {
    return new Info(cachedMetadata(name, help, null)); // info families carry no unit
  }

  /** The gauge family {@code spec} declares, under construction. */
  public Gauge gauge(FamilySpec.Gauge spec) {
    return gauge(spec.name(), spec.help());
  }

  /** The counter family {@code spec} declares, under construction. */
  public Counter counter(FamilySpec.Counter spec) {
    return counter(spec.name(), spec.help());
  }

  /** The info family {@code spec} declares, under construction. */
  public Info info(FamilySpec.Info spec) {
    return info(spec.name(), spec.help());
  }

  private static Unit unitOf(String name) {
    return FamilySpec.unitOf(name);
  }

  /** A family under construction: points in the order added, sorted once by {@link #finish}. */
  abstract class Builder {
    private final MetricMetadata meta;
    private Labels[] labels;
    private double[] values;
    private int n;

    Builder(MetricMetadata meta) {
      this.meta = meta;
      int hint = sizeHint(meta.getName());
      this.labels = new Labels[hint];
      this.values = new double[hint];
    }

    final void point(double value, Labels l) {
      if (n == labels.length) {
        int grown = n + (n >> 1) + 1;
        labels = Arrays.copyOf(labels, grown);
        values = Arrays.copyOf(values, grown);
      }
      labels[n] = java.util.Objects.requireNonNull(l, "labels");
      values[n] = value;
      n++;
    }

    final Family finish(Family.Kind kind) {
      int[] sorted = orderOf(meta, labels, n);
      if (sorted == null) {
        return new Built(meta, kind, labels, values, n);
      }
      Labels[] l = new Labels[n];
      double[] v = new double[n];
      for (int i = 0; i < n; i++) {
        l[i] = labels[sorted[i]];
        v[i] = values[sorted[i]];
      }
      return new Built(meta, kind, l, v, n);
    }
  }

  /** A gauge family. */
  public final class Gauge extends Builder {
    private Gauge(MetricMetadata meta) {
      super(meta);
    }

    public Gauge add(double value, Labels labels) {
      point(value, labels);
      return this;
    }

    /**
     * The family, points in label order.
     *
     * @throws DuplicateLabelsException when two points have equal labels
     */
    public Family build() {
      return finish(Family.Kind.GAUGE);
    }
  }

  /** A counter family; {@code name} is without {@code _total}. */
  public final class Counter extends Builder {
    private Counter(MetricMetadata meta) {
      super(meta);
    }

    public Counter add(double value, Labels labels) {
      point(value, labels);
      return this;
    }

    /**
     * The family, points in label order.
     *
     * @throws DuplicateLabelsException when two points have equal labels
     */
    public Family build() {
      return finish(Family.Kind.COUNTER);
    }
  }

  /** An info family; {@code name} is without {@code _info}. */
  public final class Info extends Builder {
    private Info(MetricMetadata meta) {
      super(meta);
    }

    public Info add(Labels labels) {
      point(1, labels);
      return this;
    }

    /**
     * The family, points in label order.
     *
     * @throws DuplicateLabelsException when two points have equal labels
     */
    public Family build() {
      return finish(Family.Kind.INFO);
    }
  }

  /** A built family: immutable, points in label order, all distinct. */
  static final class Built implements Family {
    private final MetricMetadata meta;
    private final Kind kind;
    private final Labels[] labels;
    private final double[] values;
    private final int size;

    Built(MetricMetadata meta, Kind kind, Labels[] labels, double[] values, int size) {
      this.meta = meta;
      this.kind = kind;
      this.labels = labels;
      this.values = values;
      this.size = size;
    }

    @Override
    public MetricMetadata metadata() {
      return meta;
    }

    @Override
    public Kind kind() {
      return kind;
    }

    @Override
    public int size() {
      return size;
    }

    @Override
    public Labels labels(int i) {
      java.util.Objects.checkIndex(i, size);
      return labels[i];
    }

    @Override
    public double value(int i) {
      java.util.Objects.checkIndex(i, size);
      return values[i];
    }

    @Override
    public MetricSnapshot toSnapshot() {
      return switch (kind) {
        case GAUGE -> {
          List<GaugeDataPointSnapshot> points = new ArrayList<>(size);
          for (int i = 0; i < size; i++) {
            points.add(new GaugeDataPointSnapshot(values[i], labels[i], null));
          }
          yield new GaugeSnapshot(meta, points);
        }
        case COUNTER -> {
          List<CounterDataPointSnapshot> points = new ArrayList<>(size);
          for (int i = 0; i < size; i++) {
            points.add(new CounterDataPointSnapshot(values[i], labels[i], null, 0L));
          }
          yield new CounterSnapshot(meta, points);
        }
        case INFO -> {
          List<InfoDataPointSnapshot> points = new ArrayList<>(size);
          for (int i = 0; i < size; i++) {
            points.add(new InfoDataPointSnapshot(labels[i]));
          }
          yield new InfoSnapshot(meta, points);
        }
      };
    }
  }
}

package io.vgpu.exporter.metrics;

import io.prometheus.metrics.model.registry.MetricType;
import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.CounterSnapshot.CounterDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.DataPointSnapshot;
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
  /** Below this many points client_java's own sort is cheaper than checking a remembered order. */
  private static final int ORDER_CACHE_MIN_POINTS = 32;

  /**
   * The label order of each family's last build, keyed by family name. client_java sorts every
   * snapshot's points by labels (~15 000 points, 200 000 label comparisons a scrape of 100 x 8);
   * handing it points already in order makes that sort a single linear pass. Label sets come from
   * {@link LabelSets}' cache, so while the node's containers do not change a scrape produces the
   * same label objects in the same sequence and the remembered permutation applies; any difference
   * (checked by identity, point by point) recomputes it. Only the order is remembered, never a
   * value, so correctness does not depend on the hint: client_java still sorts and validates.
   */
  private final ConcurrentHashMap<String, Order> orders = new ConcurrentHashMap<>();

  private static final int ORDERS_LIMIT = 1024;

  /** {@code sorted} is null when the points already arrived in label order. */
  private record Order(Labels[] input, int[] sorted) {}

  /** Last build's point count, so the next build's list does not grow by copying. */
  private int sizeHint(String family) {
    Order order = orders.get(family);
    return order == null ? 16 : order.input().length;
  }

  <P extends DataPointSnapshot> List<P> inLabelOrder(String family, List<P> points) {
    int n = points.size();
    if (n < ORDER_CACHE_MIN_POINTS) {
      return points;
    }
    Order order = orders.get(family);
    if (order == null || !sameLabels(order.input(), points)) {
      order = orderOf(points);
      if (orders.size() >= ORDERS_LIMIT) {
        orders.clear();
      }
      orders.put(family, order);
    }
    if (order.sorted() == null) {
      return points;
    }
    // Permute in place through a per-thread scratch array: a new list per family per scrape was
    // ~60 KB of a large node's scrape.
    Object[] scratch = reorderScratch.get();
    if (scratch.length < n) {
      scratch = new Object[n];
      reorderScratch.set(scratch);
    }
    for (int i = 0; i < n; i++) {
      scratch[i] = points.get(i);
    }
    int[] sorted = order.sorted();
    for (int i = 0; i < n; i++) {
      @SuppressWarnings("unchecked") // scratch holds exactly the P elements copied above
      P p = (P) scratch[sorted[i]];
      points.set(i, p);
    }
    java.util.Arrays.fill(scratch, 0, n, null);
    return points;
  }

  private final ThreadLocal<Object[]> reorderScratch =
      ThreadLocal.withInitial(() -> new Object[1024]);

  private static boolean sameLabels(Labels[] input, List<? extends DataPointSnapshot> points) {
    if (input.length != points.size()) {
      return false;
    }
    for (int i = 0; i < input.length; i++) {
      if (input[i] != points.get(i).getLabels()) {
        return false;
      }
    }
    return true;
  }

  private static Order orderOf(List<? extends DataPointSnapshot> points) {
    int n = points.size();
    Labels[] input = new Labels[n];
    Integer[] index = new Integer[n];
    for (int i = 0; i < n; i++) {
      input[i] = points.get(i).getLabels();
      index[i] = i;
    }
    Arrays.sort(index, (a, b) -> input[a].compareTo(input[b]));
    int[] sorted = new int[n];
    boolean identity = true;
    for (int i = 0; i < n; i++) {
      sorted[i] = index[i];
      identity &= sorted[i] == i;
    }
    return new Order(input, identity ? null : sorted);
  }

  /**
   * Metadata per family name: building it validates the name through client_java's UTF-8 check,
   * which allocates an encoder per call; families are rebuilt every scrape.
   */
  private final ConcurrentHashMap<String, MetricMetadata> metadata = new ConcurrentHashMap<>();

  /** Metadata with the unit its name ends in ({@code _bytes}, {@code _seconds}, {@code _ratio}). */
  public static MetricMetadata metadata(String name, String help) {
    Unit unit = unitOf(name);
    return unit == null ? new MetricMetadata(name, help) : new MetricMetadata(name, help, unit);
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
  public final class Gauge {
    private final MetricMetadata meta;
    private final List<GaugeDataPointSnapshot> points;

    private Gauge(MetricMetadata meta) {
      this.meta = meta;
      this.points = new ArrayList<>(sizeHint(meta.getName()));
    }

    public Gauge add(double value, Labels labels) {
      points.add(new GaugeDataPointSnapshot(value, labels, null));
      return this;
    }

    public MetricSnapshot build() {
      return new GaugeSnapshot(meta, inLabelOrder(meta.getName(), points));
    }
  }

  /** A counter family; {@code name} is without {@code _total}. */
  public final class Counter {
    private final MetricMetadata meta;
    private final List<CounterDataPointSnapshot> points;

    private Counter(MetricMetadata meta) {
      this.meta = meta;
      this.points = new ArrayList<>(sizeHint(meta.getName()));
    }

    public Counter add(double value, Labels labels) {
      points.add(new CounterDataPointSnapshot(value, labels, null, 0L));
      return this;
    }

    public MetricSnapshot build() {
      return new CounterSnapshot(meta, inLabelOrder(meta.getName(), points));
    }
  }

  /** An info family; {@code name} is without {@code _info}. */
  public final class Info {
    private final MetricMetadata meta;
    private final List<InfoDataPointSnapshot> points = new ArrayList<>();

    private Info(MetricMetadata meta) {
      this.meta = meta;
    }

    public Info add(Labels labels) {
      points.add(new InfoDataPointSnapshot(labels));
      return this;
    }

    public MetricSnapshot build() {
      return new InfoSnapshot(meta, inLabelOrder(meta.getName(), points));
    }
  }
}

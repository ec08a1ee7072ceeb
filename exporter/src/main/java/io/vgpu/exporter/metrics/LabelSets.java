package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.HAMI_ZONE;
import static io.vgpu.exporter.metrics.MetricNames.HAMI_ZONE_LABEL;
import static io.vgpu.exporter.metrics.MetricNames.L_CONTAINER;
import static io.vgpu.exporter.metrics.MetricNames.L_DEVICE_INDEX;
import static io.vgpu.exporter.metrics.MetricNames.L_DEVICE_UUID;
import static io.vgpu.exporter.metrics.MetricNames.L_HAMI_VDEVICE_INDEX;
import static io.vgpu.exporter.metrics.MetricNames.L_NAMESPACE;
import static io.vgpu.exporter.metrics.MetricNames.L_NODE;
import static io.vgpu.exporter.metrics.MetricNames.L_POD;
import static io.vgpu.exporter.metrics.MetricNames.L_POD_UID;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.DeviceUsageSummary;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The label sets every collector uses, so series from different families join. Each collector owns
 * an instance (its cache, below); {@link #index} needs none.
 */
public final class LabelSets {
  private static final String[] CONTAINER_NAMES = {
    L_CONTAINER, L_NAMESPACE, L_NODE, L_POD, L_POD_UID
  };
  private static final String[] DEVICE_NAMES = {
    L_CONTAINER, L_DEVICE_INDEX, L_DEVICE_UUID, L_NAMESPACE, L_NODE, L_POD, L_POD_UID
  };
  private static final String[] HAMI_NAMES = {
    L_CONTAINER, L_DEVICE_UUID, L_NAMESPACE, L_POD, L_HAMI_VDEVICE_INDEX, HAMI_ZONE_LABEL
  };
  private static final String[] SMALL_INTS = new String[17];

  static {
    for (int i = 0; i < SMALL_INTS.length; i++) {
      SMALL_INTS[i] = Integer.toString(i);
    }
  }

  /**
   * Label sets are rebuilt only when a container's identity or metadata changes: building one
   * (validation, sorting, copies) costs more than the data point it labels, and a scrape of 100
   * containers x 8 devices needs ~15 000 of them. One entry per container holds all of its label
   * sets, so a hit allocates nothing (a scrape makes ~16 000 lookups). Bounded: cleared when it
   * outgrows any real node.
   */
  private final ConcurrentHashMap<ContainerKey, PerContainer> cache = new ConcurrentHashMap<>();

  private static final int CACHE_LIMIT = 20_000;

  /**
   * The label sets of one container under one identity (node, namespace, pod); replaced as a whole
   * when any of those change. Lookups race benignly: two threads may build the same set, and either
   * result is equal.
   */
  private static final class PerContainer {
    private final String node;
    private final String namespace;
    private final String podName;
    private volatile Labels container;
    private final ConcurrentHashMap<Integer, PerDevice> devices = new ConcurrentHashMap<>();
    private volatile Extra[] containerExtras = new Extra[0];
    private volatile Multi[] containerMultis = new Multi[0];

    PerContainer(String node, String namespace, String podName) {
      this.node = node;
      this.namespace = namespace;
      this.podName = podName;
    }

    /** {@code node} null matches any node (HAMi's label sets carry none). */
    boolean matches(String node, ContainerState c) {
      return (node == null || this.node.equals(node))
          && this.namespace.equals(c.namespace())
          && this.podName.equals(c.podName());
    }

    PerDevice device(DeviceUsageSummary d) {
      PerDevice pd = devices.get(d.index());
      if (pd == null || !pd.uuid.equals(d.uuid())) {
        pd = new PerDevice(d.uuid());
        devices.put(d.index(), pd);
      }
      return pd;
    }
  }

  private static final class PerDevice {
    private final String uuid;
    private volatile Labels device;
    private volatile Labels hami;
    private volatile Extra[] extras = new Extra[0];

    PerDevice(String uuid) {
      this.uuid = uuid;
    }
  }

  /** A base label set plus one (name, value) label. */
  private record Extra(String name, String value, Labels labels) {}

  /** A base label set plus several labels (pod info, region info). */
  @SuppressWarnings("ArrayRecordComponent") // a cache entry found by key, never compared
  private record Multi(String[] names, String[] values, Labels labels) {}

  /** Per container, at most this many multi-label sets are cached; more are built per call. */
  private static final int MULTI_LIMIT = 16;

  private PerContainer entry(String node, ContainerState c) {
    PerContainer pc = cache.get(c.key());
    if (pc == null || !pc.matches(node, c)) {
      if (cache.size() > CACHE_LIMIT) {
        cache.clear();
      }
      pc = new PerContainer(node == null ? "" : node, c.namespace(), c.podName());
      cache.put(c.key(), pc);
    }
    return pc;
  }

  private static Labels find(Extra[] extras, String name, String value) {
    for (Extra e : extras) {
      if (e.name().equals(name) && e.value().equals(value)) {
        return e.labels();
      }
    }
    return null;
  }

  private static Extra[] with(Extra[] extras, String name, String value, Labels labels) {
    Extra[] grown = java.util.Arrays.copyOf(extras, extras.length + 1);
    grown[extras.length] = new Extra(name, value, labels);
    return grown;
  }

  /** {@link #container} plus one extra label (e.g. state="running"), cached. */
  public Labels containerWith(String node, ContainerState c, String name, String value) {
    PerContainer pc = entry(node, c);
    Labels l = find(pc.containerExtras, name, value);
    if (l == null) {
      l = container(node, c).add(name, value);
      pc.containerExtras = with(pc.containerExtras, name, value, l);
    }
    return l;
  }

  /**
   * {@link #container} plus several labels, cached by value so that validating the names (which
   * client_java does through a UTF-8 encoder per name) happens once per distinct set, not once per
   * scrape. The arrays must not be modified after the call.
   */
  public Labels containerWithAll(String node, ContainerState c, String[] names, String[] values) {
    PerContainer pc = entry(node, c);
    Multi[] multis = pc.containerMultis;
    for (Multi m : multis) {
      if (java.util.Arrays.equals(m.names(), names)
          && java.util.Arrays.equals(m.values(), values)) {
        return m.labels();
      }
    }
    Labels l = container(node, c).merge(names, values);
    if (multis.length < MULTI_LIMIT) {
      Multi[] grown = java.util.Arrays.copyOf(multis, multis.length + 1);
      grown[multis.length] = new Multi(names, values, l);
      pc.containerMultis = grown;
    }
    return l;
  }

  /** {@link #device} plus one extra label (e.g. kind="context"), cached. */
  public Labels deviceWith(
      String node, ContainerState c, DeviceUsageSummary d, String name, String value) {
    PerDevice pd = entry(node, c).device(d);
    Labels l = find(pd.extras, name, value);
    if (l == null) {
      l = device(node, c, d).add(name, value);
      pd.extras = with(pd.extras, name, value, l);
    }
    return l;
  }

  /** {node, namespace, pod, container, pod_uid}. */
  public Labels container(String node, ContainerState c) {
    PerContainer pc = entry(node, c);
    Labels l = pc.container;
    if (l == null) {
      l =
          Labels.of(
              CONTAINER_NAMES,
              new String[] {
                c.key().containerName(), c.namespace(), node, c.podName(), c.key().podUid()
              });
      pc.container = l;
    }
    return l;
  }

  /** {node, namespace, pod, container, pod_uid, device_index, device_uuid}. */
  public Labels device(String node, ContainerState c, DeviceUsageSummary d) {
    PerDevice pd = entry(node, c).device(d);
    Labels l = pd.device;
    if (l == null) {
      l =
          Labels.of(
              DEVICE_NAMES,
              new String[] {
                c.key().containerName(),
                index(d.index()),
                d.uuid(),
                c.namespace(),
                node,
                c.podName(),
                c.key().podUid()
              });
      pd.device = l;
    }
    return l;
  }

  /**
   * HAMi's container labels: {namespace, pod, container, vdevice_index, device_uuid, zone}. HAMi's
   * set has no node label, so any node's entry serves.
   */
  public Labels hami(ContainerState c, DeviceUsageSummary d) {
    PerDevice pd = entry(null, c).device(d);
    Labels l = pd.hami;
    if (l == null) {
      l =
          Labels.of(
              HAMI_NAMES,
              new String[] {
                c.key().containerName(),
                d.uuid(),
                c.namespace(),
                c.podName(),
                index(d.index()),
                HAMI_ZONE
              });
      pd.hami = l;
    }
    return l;
  }

  private static final String[] NODE_NAMES = {L_NODE};

  /** A label set of the node, GPU or exporter (outside any container), cached by value. */
  @SuppressWarnings("ArrayRecordComponent") // a cache entry found by key, never compared
  private record Plain(String[] names, String[] values) {
    @Override
    public boolean equals(Object o) {
      return o instanceof Plain p
          && java.util.Arrays.equals(names, p.names)
          && java.util.Arrays.equals(values, p.values);
    }

    @Override
    public int hashCode() {
      return 31 * java.util.Arrays.hashCode(names) + java.util.Arrays.hashCode(values);
    }

    @Override
    public String toString() {
      return java.util.Arrays.toString(names) + "=" + java.util.Arrays.toString(values);
    }
  }

  private final ConcurrentHashMap<Plain, Labels> plain = new ConcurrentHashMap<>();

  private static final int PLAIN_LIMIT = 4096;

  /**
   * The label set {@code names}={@code values} (same lengths), cached so that a steady node's
   * scrapes reuse the same objects: the encoder's label bytes and each family's point order are
   * remembered by identity. The arrays must not be modified after the call.
   */
  public Labels of(String[] names, String[] values) {
    Plain key = new Plain(names, values);
    Labels l = plain.get(key);
    if (l == null) {
      if (plain.size() >= PLAIN_LIMIT) {
        plain.clear();
      }
      l = Labels.of(names, values);
      plain.put(key, l);
    }
    return l;
  }

  /** {node}, cached. */
  public Labels node(String node) {
    return of(NODE_NAMES, new String[] {node});
  }

  /** {node} plus one label, cached. */
  public Labels nodeWith(String node, String name, String value) {
    return of(new String[] {L_NODE, name}, new String[] {node, value});
  }

  public static String index(int i) {
    return i >= 0 && i < SMALL_INTS.length ? SMALL_INTS[i] : Integer.toString(i);
  }
}

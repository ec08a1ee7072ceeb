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

/** The label sets every collector uses, so series from different families join. */
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
   * containers x 8 devices needs ~15 000 of them. Bounded: cleared when it outgrows any real node.
   */
  private static final java.util.concurrent.ConcurrentHashMap<Key, Labels> CACHE =
      new java.util.concurrent.ConcurrentHashMap<>();

  private static final int CACHE_LIMIT = 200_000;

  private record Key(
      String variant,
      String extraName,
      String extraValue,
      String node,
      String namespace,
      String pod,
      String container,
      String podUid,
      int device,
      String uuid) {}

  /** The cached label set for {@code key}, built by {@code make} on a miss. */
  private static Labels cached(Key key, java.util.function.Supplier<Labels> make) {
    Labels l = CACHE.get(key);
    if (l == null) {
      if (CACHE.size() > CACHE_LIMIT) {
        CACHE.clear();
      }
      l = make.get();
      CACHE.put(key, l);
    }
    return l;
  }

  private static Key key(String variant, String node, ContainerState c, int device, String uuid) {
    return key(variant, "", "", node, c, device, uuid);
  }

  private static Key key(
      String variant,
      String extraName,
      String extraValue,
      String node,
      ContainerState c,
      int device,
      String uuid) {
    return new Key(
        variant,
        extraName,
        extraValue,
        node,
        c.namespace(),
        c.podName(),
        c.key().containerName(),
        c.key().podUid(),
        device,
        uuid);
  }

  /** {@link #container} plus one extra label (e.g. state="running"), cached. */
  public static Labels containerWith(String node, ContainerState c, String name, String value) {
    return cached(
        key("c+", name, value, node, c, -1, ""), () -> container(node, c).add(name, value));
  }

  /** {@link #device} plus one extra label (e.g. kind="context"), cached. */
  public static Labels deviceWith(
      String node, ContainerState c, DeviceUsageSummary d, String name, String value) {
    return cached(
        key("d+", name, value, node, c, d.index(), d.uuid()),
        () -> device(node, c, d).add(name, value));
  }

  private LabelSets() {}

  /** {node, namespace, pod, container, pod_uid}. */
  public static Labels container(String node, ContainerState c) {
    return cached(
        key("c", node, c, -1, ""),
        () ->
            Labels.of(
                CONTAINER_NAMES,
                new String[] {
                  c.key().containerName(), c.namespace(), node, c.podName(), c.key().podUid()
                }));
  }

  /** {node, namespace, pod, container, pod_uid, device_index, device_uuid}. */
  public static Labels device(String node, ContainerState c, DeviceUsageSummary d) {
    return cached(
        key("d", node, c, d.index(), d.uuid()),
        () ->
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
                }));
  }

  /** HAMi's container labels: {namespace, pod, container, vdevice_index, device_uuid, zone}. */
  public static Labels hami(ContainerState c, DeviceUsageSummary d) {
    return cached(
        key("h", "", c, d.index(), d.uuid()),
        () ->
            Labels.of(
                HAMI_NAMES,
                new String[] {
                  c.key().containerName(),
                  d.uuid(),
                  c.namespace(),
                  c.podName(),
                  index(d.index()),
                  HAMI_ZONE
                }));
  }

  public static Labels node(String node) {
    return Labels.of(L_NODE, node);
  }

  public static String index(int i) {
    return i >= 0 && i < SMALL_INTS.length ? SMALL_INTS[i] : Integer.toString(i);
  }
}

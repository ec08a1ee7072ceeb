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

  private LabelSets() {}

  /** {node, namespace, pod, container, pod_uid}. */
  public static Labels container(String node, ContainerState c) {
    return Labels.of(
        CONTAINER_NAMES,
        new String[] {c.key().containerName(), c.namespace(), node, c.podName(), c.key().podUid()});
  }

  /** {node, namespace, pod, container, pod_uid, device_index, device_uuid}. */
  public static Labels device(String node, ContainerState c, DeviceUsageSummary d) {
    return Labels.of(
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
  }

  /** HAMi's container labels: {namespace, pod, container, vdevice_index, device_uuid, zone}. */
  public static Labels hami(ContainerState c, DeviceUsageSummary d) {
    return Labels.of(
        HAMI_NAMES,
        new String[] {
          c.key().containerName(), d.uuid(), c.namespace(), c.podName(), index(d.index()), HAMI_ZONE
        });
  }

  public static Labels node(String node) {
    return Labels.of(L_NODE, node);
  }

  public static String index(int i) {
    return i >= 0 && i < SMALL_INTS.length ? SMALL_INTS[i] : Integer.toString(i);
  }
}

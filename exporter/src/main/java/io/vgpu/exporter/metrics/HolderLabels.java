package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.L_CONTAINER;
import static io.vgpu.exporter.metrics.MetricNames.L_DEVICE_INDEX;
import static io.vgpu.exporter.metrics.MetricNames.L_DEVICE_UUID;
import static io.vgpu.exporter.metrics.MetricNames.L_NAMESPACE;
import static io.vgpu.exporter.metrics.MetricNames.L_NODE;
import static io.vgpu.exporter.metrics.MetricNames.L_POD;
import static io.vgpu.exporter.metrics.MetricNames.L_POD_UID;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.attribution.DeviceHolders.HeldDevice;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The label sets of a container without a region, the same names as a region container's ({@link
 * LabelSets#container}, {@link LabelSets#device}), cached through {@link LabelSets#of}. Its {@code
 * device_index} is the device's place among the devices the container holds (as a region's is), in
 * the kubelet's order.
 */
final class HolderLabels {
  private static final String[] CONTAINER = {L_CONTAINER, L_NAMESPACE, L_NODE, L_POD, L_POD_UID};
  private static final String[] DEVICE = {
    L_CONTAINER, L_DEVICE_INDEX, L_DEVICE_UUID, L_NAMESPACE, L_NODE, L_POD, L_POD_UID
  };

  private HolderLabels() {}

  static Labels container(LabelSets labels, String node, HeldDevice h) {
    return labels.of(
        CONTAINER, new String[] {h.container(), h.namespace(), node, h.pod(), h.podUid()});
  }

  static Labels containerWith(
      LabelSets labels, String node, HeldDevice h, String name, String value) {
    return labels.of(
        new String[] {L_CONTAINER, L_NAMESPACE, L_NODE, L_POD, L_POD_UID, name},
        new String[] {h.container(), h.namespace(), node, h.pod(), h.podUid(), value});
  }

  static Labels containerWithAll(
      LabelSets labels, String node, HeldDevice h, String[] names, String[] values) {
    String[] n = java.util.Arrays.copyOf(CONTAINER, CONTAINER.length + names.length);
    System.arraycopy(names, 0, n, CONTAINER.length, names.length);
    String[] v = {h.container(), h.namespace(), node, h.pod(), h.podUid()};
    v = java.util.Arrays.copyOf(v, v.length + values.length);
    System.arraycopy(values, 0, v, CONTAINER.length, values.length);
    return labels.of(n, v);
  }

  static Labels device(LabelSets labels, String node, HeldDevice h, int index) {
    return labels.of(
        DEVICE,
        new String[] {
          h.container(),
          LabelSets.index(index),
          h.deviceUuid(),
          h.namespace(),
          node,
          h.pod(),
          h.podUid()
        });
  }

  static Labels deviceWith(
      LabelSets labels, String node, HeldDevice h, int index, String name, String value) {
    String[] names = java.util.Arrays.copyOf(DEVICE, DEVICE.length + 1);
    names[DEVICE.length] = name;
    return labels.of(
        names,
        new String[] {
          h.container(),
          LabelSets.index(index),
          h.deviceUuid(),
          h.namespace(),
          node,
          h.pod(),
          h.podUid(),
          value
        });
  }

  /** Each held device with its index in its container (0, 1, … in the kubelet's order). */
  static List<Map.Entry<HeldDevice, Integer>> indexed(List<HeldDevice> held) {
    Map<String, Integer> next = new HashMap<>();
    List<Map.Entry<HeldDevice, Integer>> out = new ArrayList<>(held.size());
    for (HeldDevice h : held) {
      int i = next.merge(h.namespace() + '/' + h.pod() + '/' + h.container(), 1, Integer::sum) - 1;
      out.add(Map.entry(h, i));
    }
    return out;
  }

  /** The held devices grouped by container (first device's row stands for the container). */
  static Map<String, List<HeldDevice>> byContainer(List<HeldDevice> held) {
    Map<String, List<HeldDevice>> out = new LinkedHashMap<>();
    for (HeldDevice h : held) {
      out.computeIfAbsent(
              h.namespace() + '/' + h.pod() + '/' + h.container(), k -> new ArrayList<>())
          .add(h);
    }
    return out;
  }
}

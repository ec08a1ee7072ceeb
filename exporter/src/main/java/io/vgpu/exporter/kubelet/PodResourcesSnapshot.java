package io.vgpu.exporter.kubelet;

import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * One answer of the kubelet, validated and bounded: who holds which GPU device, and what the
 * kubelet can hand out.
 *
 * @param fetchedAt when the answer arrived
 * @param assignments every GPU device (and DRA claim) a container holds, in the kubelet's order
 * @param allocatable GPU device ids the kubelet can allocate, by resource name
 * @param pods pods read (all pods in the answer, devices or not, up to the limit)
 * @param rejected entries dropped as malformed (names that are not Kubernetes names, ids of
 *     nvidia/hami resources that are no GPU id form); never printed
 * @param truncated the answer was over a limit (pods, assignments): the rest was not read
 */
public record PodResourcesSnapshot(
    Instant fetchedAt,
    List<DeviceAssignment> assignments,
    Map<String, List<String>> allocatable,
    int pods,
    int rejected,
    boolean truncated) {
  public PodResourcesSnapshot {
    Objects.requireNonNull(fetchedAt, "fetchedAt");
    assignments = List.copyOf(assignments);
    var copy = new LinkedHashMap<String, List<String>>();
    allocatable.forEach((k, v) -> copy.put(k, List.copyOf(v)));
    allocatable = java.util.Collections.unmodifiableMap(copy);
  }

  /** Assignments by the NVML UUID of their device (a GPU's replicas and slots under the GPU). */
  public Map<String, List<DeviceAssignment>> byDeviceUuid() {
    var out = new LinkedHashMap<String, List<DeviceAssignment>>();
    for (DeviceAssignment a : assignments) {
      a.deviceUuid().ifPresent(u -> out.computeIfAbsent(u, k -> new ArrayList<>()).add(a));
    }
    return out;
  }

  /** Assignments of one container. */
  public List<DeviceAssignment> of(String namespace, String pod, String container) {
    return assignments.stream()
        .filter(
            a ->
                a.namespace().equals(namespace)
                    && a.pod().equals(pod)
                    && a.container().equals(container))
        .toList();
  }
}

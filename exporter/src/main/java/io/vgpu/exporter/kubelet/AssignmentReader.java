package io.vgpu.exporter.kubelet;

import io.vgpu.kubelet.podresources.v1.AllocatableResourcesResponse;
import io.vgpu.kubelet.podresources.v1.ClaimResource;
import io.vgpu.kubelet.podresources.v1.ContainerDevices;
import io.vgpu.kubelet.podresources.v1.ContainerResources;
import io.vgpu.kubelet.podresources.v1.DynamicResource;
import io.vgpu.kubelet.podresources.v1.ListPodResourcesResponse;
import io.vgpu.kubelet.podresources.v1.PodResources;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Turns the kubelet's replies into a {@link PodResourcesSnapshot}: only GPU devices and GPU DRA
 * claims, every name checked, every count bounded by {@link PodResourcesLimits}.
 */
final class AssignmentReader {
  private final PodResourcesLimits limits;
  private final List<DeviceAssignment> out = new ArrayList<>();
  private int rejected;
  private boolean truncated;

  private AssignmentReader(PodResourcesLimits limits) {
    this.limits = limits;
  }

  static PodResourcesSnapshot read(
      ListPodResourcesResponse list,
      Optional<AllocatableResourcesResponse> allocatable,
      PodResourcesLimits limits,
      Instant fetchedAt) {
    var reader = new AssignmentReader(limits);
    int pods = Math.min(list.getPodResourcesCount(), limits.maxPods());
    reader.truncated = list.getPodResourcesCount() > limits.maxPods();
    for (int i = 0; i < pods; i++) {
      reader.pod(list.getPodResources(i));
    }
    Map<String, List<String>> alloc = new LinkedHashMap<>();
    allocatable.ifPresent(a -> reader.allocatable(a, alloc));
    return new PodResourcesSnapshot(
        fetchedAt, reader.out, alloc, pods, reader.rejected, reader.truncated);
  }

  /** Keeps {@code a}, or marks the answer truncated when the assignments are at the limit. */
  private boolean add(DeviceAssignment a) {
    if (out.size() >= limits.maxAssignments()) {
      truncated = true;
      return false;
    }
    out.add(a);
    return true;
  }

  private void pod(PodResources pod) {
    String ns = pod.getNamespace();
    String name = pod.getName();
    if (!KubeNames.label(ns) || !KubeNames.subdomain(name)) {
      rejected++;
      return;
    }
    for (ContainerResources c : pod.getContainersList()) {
      if (!KubeNames.label(c.getName())) {
        rejected++;
        continue;
      }
      for (ContainerDevices d : c.getDevicesList()) {
        devices(ns, name, c.getName(), d);
      }
      for (DynamicResource r : c.getDynamicResourcesList()) {
        claim(ns, name, c.getName(), r);
      }
    }
  }

  private void devices(String ns, String pod, String container, ContainerDevices d) {
    String resource = d.getResourceName();
    if (!KubeNames.resource(resource)) {
      rejected++;
      return;
    }
    for (String raw : d.getDeviceIdsList()) {
      Optional<DeviceId> id = DeviceId.parse(raw);
      if (id.isPresent()) {
        if (!add(DeviceAssignment.plugin(ns, pod, container, resource, id.get()))) {
          return;
        }
      } else if (KubeNames.gpuResource(resource)) {
        rejected++;
      }
    }
  }

  private void claim(String ns, String pod, String container, DynamicResource r) {
    String claim = r.getClaimNamespace() + "/" + r.getClaimName();
    if (!KubeNames.label(r.getClaimNamespace()) || !KubeNames.subdomain(r.getClaimName())) {
      rejected++;
      return;
    }
    for (ClaimResource cr : r.getClaimResourcesList()) {
      String driver = cr.getDriverName();
      if (!KubeNames.resource(driver)) {
        rejected++;
        continue;
      }
      Optional<DeviceId> id = claimDevice(cr);
      if ((id.isPresent() || KubeNames.gpuResource(driver))
          && !add(new DeviceAssignment(ns, pod, container, driver, id, Sharing.DRA, "", claim))) {
        return;
      }
    }
  }

  /** The GPU a DRA device names: its device name, or a CDI device name's part after '='. */
  private static Optional<DeviceId> claimDevice(ClaimResource cr) {
    Optional<DeviceId> byName = DeviceId.parse(cr.getDeviceName());
    if (byName.isPresent()) {
      return byName;
    }
    for (var cdi : cr.getCdiDevicesList()) {
      String name = cdi.getName();
      int eq = name.lastIndexOf('=');
      if (eq >= 0 && name.length() <= 512) {
        Optional<DeviceId> id = DeviceId.parse(name.substring(eq + 1));
        if (id.isPresent()) {
          return id;
        }
      }
    }
    return Optional.empty();
  }

  private void allocatable(AllocatableResourcesResponse a, Map<String, List<String>> alloc) {
    int kept = 0;
    for (ContainerDevices d : a.getDevicesList()) {
      String resource = d.getResourceName();
      if (!KubeNames.resource(resource)) {
        rejected++;
        continue;
      }
      for (String raw : d.getDeviceIdsList()) {
        if (kept >= limits.maxAssignments()) {
          truncated = true;
          return;
        }
        if (DeviceId.parse(raw).isPresent()) {
          alloc.computeIfAbsent(resource, k -> new ArrayList<>()).add(raw);
          kept++;
        } else if (KubeNames.gpuResource(resource)) {
          rejected++;
        }
      }
    }
  }
}

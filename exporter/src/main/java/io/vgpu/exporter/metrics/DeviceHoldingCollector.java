package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.CONTAINER_DEVICE_INFO;
import static io.vgpu.exporter.metrics.MetricNames.L_CONTAINER;
import static io.vgpu.exporter.metrics.MetricNames.L_DEVICE_UUID;
import static io.vgpu.exporter.metrics.MetricNames.L_NAMESPACE;
import static io.vgpu.exporter.metrics.MetricNames.L_NODE;
import static io.vgpu.exporter.metrics.MetricNames.L_POD;
import static io.vgpu.exporter.metrics.MetricNames.L_POD_UID;

import io.prometheus.metrics.model.registry.MetricType;
import io.prometheus.metrics.model.snapshots.MetricFamilyDescriptor;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.kubelet.DeviceAssignment;
import io.vgpu.exporter.kubelet.PodResourcesState;
import io.vgpu.exporter.kubelet.Sharing;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.DeviceUsageSummary;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.exporter.node.NodeStateProvider;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;

/**
 * How each container holds each device: one {@code vgpu_container_device_info} series per container
 * and device, from the container's regions ({@code sharing="vgpu"}) and from the kubelet's
 * pod-resources assignment (whole GPUs, MIG devices, time-slicing/MPS replicas, HAMi slots, DRA
 * claims; docs/pod-resources.md). A container in both is reported once, as its regions say.
 * Example:
 *
 * <pre>
 * vgpu_container_device_info{container="torch",device_uuid="GPU-0f1e...",mig_profile="",namespace="team-a",node="gpu-1",pod="trainer-0",pod_uid="7c9e...",sharing="whole"} 1
 * vgpu_container_device_info{...,device_uuid="MIG-aaaa...",mig_profile="1g.10gb",sharing="mig"} 1
 * </pre>
 */
public final class DeviceHoldingCollector extends VgpuCollector {
  static final String L_SHARING = "sharing";
  static final String L_MIG_PROFILE = "mig_profile";
  private static final String[] NAMES = {
    L_CONTAINER, L_DEVICE_UUID, L_MIG_PROFILE, L_NAMESPACE, L_NODE, L_POD, L_POD_UID, L_SHARING
  };
  private static final List<MetricFamilyDescriptor> DESCRIPTORS =
      List.of(
          Families.describe(
              MetricType.INFO,
              CONTAINER_DEVICE_INFO,
              "How the container holds the device (value 1): sharing=vgpu (a shared region),"
                  + " whole, mig, timeslice, mps or dra (the kubelet's pod-resources assignment);"
                  + " mig_profile from a MIG resource name, else empty; device_uuid empty for a"
                  + " DRA device that names no GPU.",
              NAMES));

  private final Supplier<PodResourcesState> podResources;
  private final Supplier<Collection<PodMeta>> pods;

  /**
   * @param podResources the kubelet's latest answer ({@link PodResourcesState#DISABLED} when off)
   * @param pods known pods, for the pod_uid of a pod-resources container
   */
  public DeviceHoldingCollector(
      NodeStateProvider states,
      Supplier<PodResourcesState> podResources,
      Supplier<Collection<PodMeta>> pods) {
    super(states);
    this.podResources = podResources;
    this.pods = pods;
  }

  @Override
  protected List<MetricFamilyDescriptor> descriptors() {
    return DESCRIPTORS;
  }

  @Override
  protected void collect(NodeState state, Sink out) {
    var info = families.info(CONTAINER_DEVICE_INFO, help(0));
    Set<String> seen = new HashSet<>();
    for (ContainerState c : state.containers()) {
      if (c.finished() || c.stale()) {
        continue;
      }
      for (DeviceUsageSummary d : c.devices()) {
        if (seen.add(key(c.namespace(), c.podName(), c.key().containerName(), d.uuid()))) {
          info.add(
              labels.of(
                  NAMES,
                  new String[] {
                    c.key().containerName(),
                    d.uuid(),
                    "",
                    c.namespace(),
                    state.node(),
                    c.podName(),
                    c.key().podUid(),
                    Sharing.VGPU.label()
                  }));
        }
      }
    }
    var snapshot = podResources.get().snapshot();
    if (snapshot.isPresent()) {
      Map<String, String> uids = new HashMap<>();
      for (PodMeta p : pods.get()) {
        uids.put(p.namespace() + "/" + p.name(), p.uid());
      }
      for (DeviceAssignment a : snapshot.get().assignments()) {
        String uuid = a.deviceUuid().orElse("");
        if (seen.add(key(a.namespace(), a.pod(), a.container(), uuid))) {
          info.add(
              labels.of(
                  NAMES,
                  new String[] {
                    a.container(),
                    uuid,
                    a.migProfile(),
                    a.namespace(),
                    state.node(),
                    a.pod(),
                    uids.getOrDefault(a.namespace() + "/" + a.pod(), ""),
                    a.sharing().label()
                  }));
        }
      }
    }
    RegionUsageCollector.addIf(out, CONTAINER_DEVICE_INFO, info.build());
  }

  private static String key(String namespace, String pod, String container, String uuid) {
    return namespace + '\u0000' + pod + '\u0000' + container + '\u0000' + uuid;
  }
}

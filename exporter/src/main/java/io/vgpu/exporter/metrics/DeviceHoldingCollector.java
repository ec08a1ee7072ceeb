package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.CONTAINER_DEVICE_INFO;
import static io.vgpu.exporter.metrics.MetricNames.L_CONTAINER;
import static io.vgpu.exporter.metrics.MetricNames.L_DEVICE_UUID;
import static io.vgpu.exporter.metrics.MetricNames.L_NAMESPACE;
import static io.vgpu.exporter.metrics.MetricNames.L_NODE;
import static io.vgpu.exporter.metrics.MetricNames.L_POD;
import static io.vgpu.exporter.metrics.MetricNames.L_POD_UID;

import io.vgpu.exporter.attribution.DeviceHolders.HeldDevice;
import io.vgpu.exporter.kubelet.Sharing;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.DeviceUsageSummary;
import io.vgpu.exporter.node.NodeState;
import java.util.List;

/**
 * How each container holds each device: one {@code vgpu_container_device_info} series per container
 * and device, {@code sharing="vgpu"} from the container's regions, and for containers without a
 * region how the kubelet's pod-resources answer says they hold it (whole GPUs, MIG devices,
 * time-slicing/MPS replicas, HAMi slots, DRA claims; docs/pod-resources.md), or {@code whole} for a
 * pod process found by its cgroup when the kubelet has not answered. Example:
 *
 * <pre>
 * vgpu_container_device_info{container="torch",device_uuid="GPU-0f1e...",mig_profile="",namespace="team-a",node="gpu-1",pod="trainer-0",pod_uid="7c9e...",sharing="whole"} 1
 * vgpu_container_device_info{...,device_uuid="MIG-aaaa...",mig_profile="1g.10gb",sharing="mig"} 1
 * </pre>
 *
 * <p>Cost: one series per region container and device (as {@code vgpu_container_memory_used_bytes})
 * plus one per held device; the label sets are cached per container like the other families'.
 */
public final class DeviceHoldingCollector extends VgpuCollector {
  static final String L_SHARING = "sharing";
  static final String L_MIG_PROFILE = "mig_profile";
  private static final String[] NAMES = {
    L_CONTAINER, L_DEVICE_UUID, L_MIG_PROFILE, L_NAMESPACE, L_NODE, L_POD, L_POD_UID, L_SHARING
  };
  private static final String[] VGPU_EXTRA = {L_DEVICE_UUID, L_MIG_PROFILE, L_SHARING};
  private static final FamilySpec.Info CONTAINER_DEVICE_INFO =
      FamilySpec.info(
          MetricNames.CONTAINER_DEVICE_INFO,
          "How the container holds the device (value 1): sharing=vgpu (a shared region),"
              + " whole, mig, timeslice, mps or dra (the kubelet's pod-resources assignment;"
              + " whole also for a pod's GPU process found by its cgroup while the kubelet has"
              + " not answered); mig_profile from a MIG resource name or else NVML's MIG device"
              + " name, else empty; device_uuid"
              + " empty for a DRA device that names no GPU.",
          NAMES);

  private static final List<FamilySpec> FAMILIES = List.of(CONTAINER_DEVICE_INFO);

  private final HolderSource holders;

  public DeviceHoldingCollector(HolderSource holders) {
    super(FAMILIES);
    this.holders = holders;
  }

  @Override
  protected void collect(NodeState state, Sink out) {
    var info = families.info(CONTAINER_DEVICE_INFO);
    String node = state.node();
    for (ContainerState c : state.containers()) {
      if (c.finished() || c.stale()) {
        continue;
      }
      List<DeviceUsageSummary> devices = c.devices();
      for (int i = 0; i < devices.size(); i++) {
        DeviceUsageSummary d = devices.get(i);
        if (seenBefore(devices, i)) {
          continue; // two regions of one container on one GPU: one series
        }
        info.add(
            labels.containerWithAll(
                node, c, VGPU_EXTRA, new String[] {d.uuid(), "", Sharing.VGPU.label()}));
      }
    }
    for (HeldDevice h : holders.get(state).held()) {
      info.add(
          labels.of(
              NAMES,
              new String[] {
                h.container(),
                h.deviceUuid(),
                h.migProfile(),
                h.namespace(),
                node,
                h.pod(),
                h.podUid(),
                h.sharing().label()
              }));
    }
    RegionUsageCollector.addIf(out, CONTAINER_DEVICE_INFO, info.build());
  }

  private static boolean seenBefore(List<DeviceUsageSummary> devices, int i) {
    for (int j = 0; j < i; j++) {
      if (devices.get(j).uuid().equals(devices.get(i).uuid())) {
        return true;
      }
    }
    return false;
  }
}

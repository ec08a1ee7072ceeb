package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.HAMI_MIG_DEVICE_INFO;
import static io.vgpu.exporter.metrics.MetricNames.HAMI_ZONE;
import static io.vgpu.exporter.metrics.MetricNames.HAMI_ZONE_LABEL;
import static io.vgpu.exporter.metrics.MetricNames.L_CONTAINER;
import static io.vgpu.exporter.metrics.MetricNames.L_DEVICE_INDEX;
import static io.vgpu.exporter.metrics.MetricNames.L_DEVICE_UUID;
import static io.vgpu.exporter.metrics.MetricNames.L_HAMI_VDEVICE_INDEX;
import static io.vgpu.exporter.metrics.MetricNames.L_NAMESPACE;
import static io.vgpu.exporter.metrics.MetricNames.L_NODE;
import static io.vgpu.exporter.metrics.MetricNames.L_POD;
import static io.vgpu.exporter.metrics.MetricNames.MIG_DEVICE_INFO;
import static io.vgpu.exporter.metrics.MetricNames.MIG_MEMORY_TOTAL;
import static io.vgpu.exporter.metrics.MetricNames.MIG_MEMORY_USED;
import static io.vgpu.exporter.metrics.MetricNames.MIG_PROCESSES;
import static io.vgpu.exporter.metrics.MetricNames.MIG_SM_ACTIVITY;
import static io.vgpu.exporter.metrics.MetricNames.MIG_SM_ACTIVITY_UNKNOWN;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.attribution.DeviceHolders.HeldDevice;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.DeviceUsageSummary;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.exporter.nvml.MigInstance;
import io.vgpu.exporter.nvml.NvmlSampler;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * MIG devices from the NVML sampler's latest snapshot: what each is (parent, GPU and compute
 * instance, profile), its memory and processes, and its GPU instance's SM activity from NVML GPM,
 * or why that is unknown (never a silent 0). With {@code --hami-compat}, HAMi's {@code
 * hami_mig_device_info} for each container that holds a MIG device. Example:
 *
 * <pre>
 * vgpu_mig_device_info{compute_instance_id="0",device_index="0",device_uuid="GPU-0a",gpu_instance_id="7",mig_profile="1g.10gb",mig_uuid="MIG-aa",node="n1"} 1
 * vgpu_mig_memory_used_bytes{device_uuid="GPU-0a",mig_uuid="MIG-aa",node="n1"} 1.073741824E9
 * vgpu_mig_sm_activity_ratio{device_uuid="GPU-0a",mig_uuid="MIG-aa",node="n1"} 0.4
 * vgpu_mig_sm_activity_unknown{device_uuid="GPU-1b",mig_uuid="MIG-bb",node="n1",reason="gpm_unsupported"} 1
 * hami_mig_device_info{compute_instance_id="0",container="c",device_uuid="GPU-0a",gpu_instance_id="7",mig_uuid="MIG-aa",namespace="ns",pod="p",profile="1g.10gb",vdevice_index="0",zone="vGPU"} 1
 * </pre>
 *
 * <p>Cost: 5 series per MIG device (info, used, total, processes, activity or its unknown) and,
 * with --hami-compat, one per container x MIG device it holds.
 */
public final class MigCollector extends VgpuCollector {
  static final String L_MIG_UUID = "mig_uuid";
  static final String L_GPU_INSTANCE_ID = "gpu_instance_id";
  static final String L_COMPUTE_INSTANCE_ID = "compute_instance_id";
  static final String L_REASON = "reason";
  private static final String[] MIG = {L_NODE, L_DEVICE_UUID, L_MIG_UUID};
  private static final String[] MIG_REASON = {L_NODE, L_DEVICE_UUID, L_MIG_UUID, L_REASON};
  private static final String[] INFO = {
    L_NODE,
    L_DEVICE_INDEX,
    L_DEVICE_UUID,
    L_MIG_UUID,
    L_GPU_INSTANCE_ID,
    L_COMPUTE_INSTANCE_ID,
    DeviceHoldingCollector.L_MIG_PROFILE
  };
  private static final String[] HAMI = {
    L_NAMESPACE,
    L_POD,
    L_CONTAINER,
    L_HAMI_VDEVICE_INDEX,
    L_DEVICE_UUID,
    L_MIG_UUID,
    "profile",
    L_GPU_INSTANCE_ID,
    L_COMPUTE_INSTANCE_ID,
    HAMI_ZONE_LABEL
  };

  private static final FamilySpec.Info DEVICE_INFO =
      FamilySpec.info(
          MIG_DEVICE_INFO,
          "A MIG device (value 1): device_uuid and device_index are its parent GPU's, the GPU and"
              + " compute instance ids and the profile NVML names it by (mig_profile, empty when"
              + " the device's name carries none; ids empty when NVML did not tell them).",
          INFO);
  private static final FamilySpec.Gauge MEMORY_USED =
      FamilySpec.gauge(MIG_MEMORY_USED, "MIG device memory in use (NVML)", MIG);
  private static final FamilySpec.Gauge MEMORY_TOTAL =
      FamilySpec.gauge(MIG_MEMORY_TOTAL, "MIG device memory size (NVML)", MIG);
  private static final FamilySpec.Gauge PROCESSES =
      FamilySpec.gauge(MIG_PROCESSES, "Compute processes NVML lists on the MIG device", MIG);
  private static final FamilySpec.Gauge SM_ACTIVITY =
      FamilySpec.gauge(
          MIG_SM_ACTIVITY,
          "Share of the MIG device's GPU instance SMs busy over the last NVML poll interval (NVML"
              + " GPM SM utilization between two samples; Hopper and newer)",
          MIG);
  private static final FamilySpec.Gauge SM_ACTIVITY_UNKNOWN =
      FamilySpec.gauge(
          MIG_SM_ACTIVITY_UNKNOWN,
          "1 while the MIG device's SM activity is unknown, by reason: gpm_unsupported (no GPM"
              + " counters: before Hopper), driver_without_gpm, first_sample (the next poll has"
              + " it), gpm_error, instance_unknown, sample_limit",
          MIG_REASON);
  private static final FamilySpec.Info HAMI_INFO =
      FamilySpec.info(
          HAMI_MIG_DEVICE_INFO,
          "MIG device of a container (HAMi's family; device_uuid is the parent GPU's)",
          HAMI);

  private static final List<FamilySpec> FAMILIES =
      List.of(DEVICE_INFO, MEMORY_USED, MEMORY_TOTAL, PROCESSES, SM_ACTIVITY, SM_ACTIVITY_UNKNOWN);
  private static final List<FamilySpec> FAMILIES_WITH_HAMI =
      java.util.stream.Stream.concat(FAMILIES.stream(), java.util.stream.Stream.of(HAMI_INFO))
          .toList();

  private final NvmlSampler sampler;
  private final HolderSource holders;
  private final boolean hamiCompat;

  public MigCollector(NvmlSampler sampler, HolderSource holders, boolean hamiCompat) {
    super(hamiCompat ? FAMILIES_WITH_HAMI : FAMILIES);
    this.sampler = sampler;
    this.holders = holders;
    this.hamiCompat = hamiCompat;
  }

  private static String id(Optional<Integer> v) {
    return v.map(LabelSets::index).orElse("");
  }

  @Override
  protected void collect(NodeState state, Sink out) {
    NvmlSnapshot snap = sampler.latest();
    String node = state.node();
    var info = families.info(DEVICE_INFO);
    var used = families.gauge(MEMORY_USED);
    var total = families.gauge(MEMORY_TOTAL);
    var processes = families.gauge(PROCESSES);
    var activity = families.gauge(SM_ACTIVITY);
    var unknown = families.gauge(SM_ACTIVITY_UNKNOWN);
    for (GpuSnapshot g : snap.gpus()) {
      if (g.mig().isEmpty()) {
        continue;
      }
      MigInstance m = g.mig().get();
      String migUuid = g.identity().uuid();
      info.add(
          labels.of(
              INFO,
              new String[] {
                node,
                LabelSets.index(g.identity().index()),
                m.parentUuid(),
                migUuid,
                id(m.ids().map(i -> i.gpuInstanceId())),
                id(m.ids().map(i -> i.computeInstanceId())),
                m.profile()
              }));
      Labels l = labels.of(MIG, new String[] {node, m.parentUuid(), migUuid});
      g.memory()
          .ifPresent(
              mem -> {
                used.add((double) mem.usedBytes(), l);
                total.add((double) mem.totalBytes(), l);
              });
      g.processes().ifPresent(ps -> processes.add(ps.size(), l));
      m.smActivity().ratio().ifPresent(r -> activity.add(r, l));
      m.smActivity()
          .unknown()
          .ifPresent(
              why ->
                  unknown.add(
                      1,
                      labels.of(
                          MIG_REASON, new String[] {node, m.parentUuid(), migUuid, why.label()})));
    }
    RegionUsageCollector.addIf(out, DEVICE_INFO, info.build());
    RegionUsageCollector.addIf(out, MEMORY_USED, used.build());
    RegionUsageCollector.addIf(out, MEMORY_TOTAL, total.build());
    RegionUsageCollector.addIf(out, PROCESSES, processes.build());
    RegionUsageCollector.addIf(out, SM_ACTIVITY, activity.build());
    RegionUsageCollector.addIf(out, SM_ACTIVITY_UNKNOWN, unknown.build());
    if (hamiCompat && out.wants(HAMI_INFO)) {
      out.add(hamiInfo(state, snap));
    }
  }

  /** HAMi's family: one series per container and MIG device it holds (regions or pod-resources). */
  private io.vgpu.exporter.exposition.Family hamiInfo(NodeState state, NvmlSnapshot snap) {
    var hami = families.info(HAMI_INFO);
    Set<Labels> seen = new HashSet<>();
    for (ContainerState c : state.containers()) {
      if (c.stale()) {
        continue;
      }
      for (DeviceUsageSummary d : c.devices()) {
        addHami(
            hami,
            seen,
            snap,
            c.namespace(),
            c.podName(),
            c.key().containerName(),
            d.index(),
            d.uuid());
      }
    }
    for (Map.Entry<HeldDevice, Integer> e : HolderLabels.indexed(holders.get(state).held())) {
      HeldDevice h = e.getKey();
      addHami(
          hami, seen, snap, h.namespace(), h.pod(), h.container(), e.getValue(), h.deviceUuid());
    }
    return hami.build();
  }

  private void addHami(
      Families.Info hami,
      Set<Labels> seen,
      NvmlSnapshot snap,
      String namespace,
      String pod,
      String container,
      int index,
      String uuid) {
    if (uuid.isEmpty()) {
      return;
    }
    Optional<GpuSnapshot> g = snap.byUuid(uuid);
    if (g.isEmpty() || g.get().mig().isEmpty()) {
      return;
    }
    MigInstance m = g.get().mig().get();
    Labels l =
        labels.of(
            HAMI,
            new String[] {
              namespace,
              pod,
              container,
              LabelSets.index(index),
              m.parentUuid(),
              uuid,
              m.profile(),
              id(m.ids().map(i -> i.gpuInstanceId())),
              id(m.ids().map(i -> i.computeInstanceId())),
              HAMI_ZONE
            });
    if (seen.add(l)) {
      hami.add(l);
    }
  }
}

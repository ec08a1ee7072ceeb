package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.*;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.attribution.UsageAccountant;
import io.vgpu.exporter.attribution.UsageSnapshot;
import io.vgpu.exporter.node.NodeState;
import java.util.List;

/**
 * Usage accounting counters, from the latest {@link UsageSnapshot} (integrated by the attribution
 * pass, not at scrape time; docs/usage-accounting.md). Example:
 *
 * <pre>
 * vgpu_container_sm_busy_seconds_total{container="train",device_index="0",device_uuid="GPU-0a",namespace="ml",node="n1",pod="train-0",pod_uid="..."} 812.4
 * vgpu_container_memory_used_byte_seconds_total{...} 3.2e12
 * vgpu_container_memory_limit_byte_seconds_total{...} 6.9e12
 * vgpu_container_energy_joules_total{...} 251330.125
 * vgpu_gpu_energy_joules_total{device_index="0",device_uuid="GPU-0a",model="NVIDIA H100",node="n1"} 402113.5
 * vgpu_gpu_unattributed_energy_joules_total{...} 150783.375
 * vgpu_gpu_expired_container_energy_joules_total{...} 0.0
 * vgpu_gpu_unattributed_sm_busy_seconds_total{...} 3.2
 * vgpu_gpu_usage_unknown{...,reason="energy_unsupported"} 1.0
 * vgpu_exporter_usage_accounted_timestamp_seconds{node="n1"} 1.79e9
 * </pre>
 *
 * Why a container's NVML usage is not accounted is {@code vgpu_container_sm_utilization_unknown}
 * (the attribution collector's). Per GPU, containers + unattributed + expired == device exactly in
 * millijoules (each exported value is that integer / 1000).
 */
public final class UsageCollector extends VgpuCollector {
  private static final String[] D = {
    L_NODE, L_NAMESPACE, L_POD, L_CONTAINER, L_POD_UID, L_DEVICE_INDEX, L_DEVICE_UUID
  };
  private static final String[] G = {L_NODE, L_DEVICE_INDEX, L_DEVICE_UUID, L_MODEL};
  private static final String[] GR = {L_NODE, L_DEVICE_INDEX, L_DEVICE_UUID, L_MODEL, "reason"};
  private static final String[] D_SORTED = {
    L_CONTAINER, L_DEVICE_INDEX, L_DEVICE_UUID, L_NAMESPACE, L_NODE, L_POD, L_POD_UID
  };
  private static final String[] G_SORTED = {L_DEVICE_INDEX, L_DEVICE_UUID, L_MODEL, L_NODE};
  private static final String[] GR_SORTED = {
    L_DEVICE_INDEX, L_DEVICE_UUID, L_MODEL, L_NODE, "reason"
  };

  private static final FamilySpec.Counter CONTAINER_SM_BUSY_SECONDS =
      FamilySpec.counter(
          MetricNames.CONTAINER_SM_BUSY_SECONDS,
          "SM-busy time of the container's processes on the GPU: the integral of NVML's per-process samples, each counted once (one second of a fully busy GPU is one second). From 0 when the exporter first saw the container.",
          D);
  private static final FamilySpec.Counter CONTAINER_MEMORY_USED_BYTE_SECONDS =
      FamilySpec.counter(
          MetricNames.CONTAINER_MEMORY_USED_BYTE_SECONDS,
          "Integral of vgpu_container_memory_used_bytes over time, at the attribution pass rate.",
          D);
  private static final FamilySpec.Counter CONTAINER_MEMORY_LIMIT_BYTE_SECONDS =
      FamilySpec.counter(
          MetricNames.CONTAINER_MEMORY_LIMIT_BYTE_SECONDS,
          "Integral of vgpu_container_memory_limit_bytes (the reservation) over time, at the attribution pass rate.",
          D);
  private static final FamilySpec.Counter CONTAINER_ENERGY =
      FamilySpec.counter(
          MetricNames.CONTAINER_ENERGY,
          "GPU energy given to the container: each interval's energy counter increase split by SM-busy share of the interval.",
          D);
  private static final FamilySpec.Counter GPU_ENERGY =
      FamilySpec.counter(
          MetricNames.GPU_ENERGY,
          "The GPU's energy counter increase while accounted (NVML total energy; a reset or NVML outage is not counted).",
          G);
  private static final FamilySpec.Counter GPU_UNATTRIBUTED_ENERGY =
      FamilySpec.counter(
          MetricNames.GPU_UNATTRIBUTED_ENERGY,
          "GPU energy no container was given: idle time and processes of no container.",
          G);
  private static final FamilySpec.Counter GPU_EXPIRED_ENERGY =
      FamilySpec.counter(
          MetricNames.GPU_EXPIRED_ENERGY,
          "Energy of containers whose usage series were dropped after the grace period, so that containers + unattributed + expired == device.",
          G);
  private static final FamilySpec.Counter GPU_UNATTRIBUTED_SM_BUSY =
      FamilySpec.counter(
          MetricNames.GPU_UNATTRIBUTED_SM_BUSY,
          "SM-busy time of processes on the GPU that belong to no container.",
          G);
  private static final FamilySpec.Gauge GPU_USAGE_UNKNOWN =
      FamilySpec.gauge(
          MetricNames.GPU_USAGE_UNKNOWN,
          "1 while the GPU's usage cannot be fully accounted (reason: nvml_unavailable, nvml_unsupported, energy_unsupported).",
          GR);
  private static final FamilySpec.Gauge EXPORTER_USAGE_ACCOUNTED_TIMESTAMP =
      FamilySpec.gauge(
          MetricNames.EXPORTER_USAGE_ACCOUNTED_TIMESTAMP,
          "Unix time of the accounting pass the usage counters are as of (they move once per attribution pass, not per scrape).",
          L_NODE);

  private static final List<FamilySpec> FAMILIES =
      List.of(
          CONTAINER_SM_BUSY_SECONDS,
          CONTAINER_MEMORY_USED_BYTE_SECONDS,
          CONTAINER_MEMORY_LIMIT_BYTE_SECONDS,
          CONTAINER_ENERGY,
          GPU_ENERGY,
          GPU_UNATTRIBUTED_ENERGY,
          GPU_EXPIRED_ENERGY,
          GPU_UNATTRIBUTED_SM_BUSY,
          GPU_USAGE_UNKNOWN,
          EXPORTER_USAGE_ACCOUNTED_TIMESTAMP);

  private final UsageAccountant usage;

  public UsageCollector(UsageAccountant usage) {
    super(FAMILIES);
    this.usage = usage;
  }

  @Override
  protected void collect(NodeState state, Sink out) {
    UsageSnapshot snap = usage.latest();
    String node = state.node();
    var busy = families.counter(CONTAINER_SM_BUSY_SECONDS);
    var used = families.counter(CONTAINER_MEMORY_USED_BYTE_SECONDS);
    var limit = families.counter(CONTAINER_MEMORY_LIMIT_BYTE_SECONDS);
    var energy = families.counter(CONTAINER_ENERGY);
    var device = families.counter(GPU_ENERGY);
    var unattributed = families.counter(GPU_UNATTRIBUTED_ENERGY);
    var expired = families.counter(GPU_EXPIRED_ENERGY);
    var unattributedBusy = families.counter(GPU_UNATTRIBUTED_SM_BUSY);
    var gpuUnknown = families.gauge(GPU_USAGE_UNKNOWN);
    var accountedAt = families.gauge(EXPORTER_USAGE_ACCOUNTED_TIMESTAMP);
    for (UsageSnapshot.ContainerUsage c : snap.containers()) {
      String[] v = {
        c.key().containerName(),
        LabelSets.index(c.deviceIndex()),
        c.deviceUuid(),
        c.namespace(),
        node,
        c.pod(),
        c.key().podUid()
      };
      Labels l = labels.of(D_SORTED, v);
      busy.add(c.smBusySeconds(), l);
      used.add(c.usedByteSeconds(), l);
      limit.add(c.limitByteSeconds(), l);
      energy.add(c.energyJoules(), l);
    }
    for (UsageSnapshot.GpuUsage g : snap.gpus()) {
      String[] v = {LabelSets.index(g.index()), g.uuid(), g.model(), node};
      Labels l = labels.of(G_SORTED, v);
      device.add(g.deviceMillijoules() / 1e3, l);
      unattributed.add(g.unattributedMillijoules() / 1e3, l);
      expired.add(g.expiredMillijoules() / 1e3, l);
      unattributedBusy.add(g.unattributedBusyPercentMicros() / 1e8, l);
      if (g.unknown().isPresent()) {
        unknown(gpuUnknown, v, g.unknown().get());
      }
    }
    RegionUsageCollector.addIf(out, CONTAINER_SM_BUSY_SECONDS, busy.build());
    RegionUsageCollector.addIf(out, CONTAINER_MEMORY_USED_BYTE_SECONDS, used.build());
    RegionUsageCollector.addIf(out, CONTAINER_MEMORY_LIMIT_BYTE_SECONDS, limit.build());
    RegionUsageCollector.addIf(out, CONTAINER_ENERGY, energy.build());
    RegionUsageCollector.addIf(out, GPU_ENERGY, device.build());
    RegionUsageCollector.addIf(out, GPU_UNATTRIBUTED_ENERGY, unattributed.build());
    RegionUsageCollector.addIf(out, GPU_EXPIRED_ENERGY, expired.build());
    RegionUsageCollector.addIf(out, GPU_UNATTRIBUTED_SM_BUSY, unattributedBusy.build());
    RegionUsageCollector.addIf(out, GPU_USAGE_UNKNOWN, gpuUnknown.build());
    if (!snap.containers().isEmpty() || !snap.gpus().isEmpty()) {
      accountedAt.add(snap.at().toEpochMilli() / 1e3, labels.node(node));
    }
    RegionUsageCollector.addIf(out, EXPORTER_USAGE_ACCOUNTED_TIMESTAMP, accountedAt.build());
  }

  private void unknown(Families.Gauge gauge, String[] gpuValues, String reason) {
    String[] r = java.util.Arrays.copyOf(gpuValues, gpuValues.length + 1);
    r[gpuValues.length] = reason;
    gauge.add(1, labels.of(GR_SORTED, r));
  }
}

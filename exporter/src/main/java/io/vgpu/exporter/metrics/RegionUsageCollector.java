package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.*;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.DeviceUsageSummary;
import io.vgpu.exporter.node.NodeState;
import java.util.List;

/**
 * Per container x device, from the shared regions. Example:
 *
 * <pre>
 * vgpu_container_memory_used_bytes{container="train",device_index="0",device_uuid="GPU-0a1b",namespace="ml",node="gpu-1",pod="train-0",pod_uid="7c9e..."} 2.147483648E9
 * vgpu_container_memory_limit_bytes{...} 4.294967296E9
 * vgpu_container_memory_breakdown_bytes{...,kind="context"} 3.145728E8
 * vgpu_container_sm_limit_ratio{...} 0.3
 * vgpu_container_region_sm_utilization_ratio{...} 0.27
 * vgpu_container_oom_rejections_total{...} 2.0
 * </pre>
 *
 * Extension counters (OOM rejections, throttling) appear only for regions written by libvgpu.
 */
public final class RegionUsageCollector extends VgpuCollector {
  private static final String[] DEVICE = {
    L_NODE, L_NAMESPACE, L_POD, L_CONTAINER, L_POD_UID, L_DEVICE_INDEX, L_DEVICE_UUID
  };
  private static final FamilySpec.Gauge CONTAINER_MEMORY_USED =
      FamilySpec.gauge(
          MetricNames.CONTAINER_MEMORY_USED,
          "Device memory the container's live processes hold, summed from the shared region (used[].total).",
          DEVICE);
  private static final FamilySpec.Gauge CONTAINER_MEMORY_LIMIT =
      FamilySpec.gauge(
          MetricNames.CONTAINER_MEMORY_LIMIT,
          "Device memory limit of the container (CUDA_DEVICE_MEMORY_LIMIT).",
          DEVICE);
  private static final FamilySpec.Gauge CONTAINER_MEMORY_BREAKDOWN =
      FamilySpec.gauge(
          MetricNames.CONTAINER_MEMORY_BREAKDOWN,
          "Device memory by allocation kind: context, module, data.",
          with(DEVICE, "kind"));
  private static final FamilySpec.Gauge CONTAINER_SM_LIMIT =
      FamilySpec.gauge(
          MetricNames.CONTAINER_SM_LIMIT,
          "SM (core) limit of the container as a 0-1 ratio; 1 when unlimited.",
          DEVICE);
  private static final FamilySpec.Gauge CONTAINER_REGION_SM_UTILIZATION =
      FamilySpec.gauge(
          MetricNames.CONTAINER_REGION_SM_UTILIZATION,
          "SM utilization the region's slots claim (sum of sm_util / 100); may read 0 when the library missed its host pid.",
          DEVICE);
  private static final FamilySpec.Gauge CONTAINER_REGION_NVML_MEMORY_USED =
      FamilySpec.gauge(
          MetricNames.CONTAINER_REGION_NVML_MEMORY_USED,
          "Device memory NVML reported to the in-container library (monitorused), summed over slots.",
          DEVICE);
  private static final FamilySpec.Counter CONTAINER_OOM_REJECTIONS =
      FamilySpec.counter(
          MetricNames.CONTAINER_OOM_REJECTIONS,
          "Allocations libvgpu refused because they would exceed the memory limit.",
          DEVICE);
  private static final FamilySpec.Counter LIMITER_THROTTLED_SECONDS =
      FamilySpec.counter(
          MetricNames.LIMITER_THROTTLED_SECONDS,
          "Time libvgpu's SM limiter delayed kernel launches.",
          DEVICE);
  private static final FamilySpec.Counter LIMITER_LAUNCHES_DELAYED =
      FamilySpec.counter(
          MetricNames.LIMITER_LAUNCHES_DELAYED,
          "Kernel launches libvgpu's SM limiter delayed.",
          DEVICE);
  private static final FamilySpec.Counter LIMITER_BUSY_SECONDS =
      FamilySpec.counter(
          MetricNames.LIMITER_BUSY_SECONDS,
          "GPU busy time libvgpu's SM limiter charged to the container (its own view of GPU time, to compare with vgpu_container_sm_busy_seconds_total).",
          DEVICE);
  private static final FamilySpec.Gauge CONTAINER_DEVICE_UUID_REJECTED =
      FamilySpec.gauge(
          MetricNames.CONTAINER_DEVICE_UUID_REJECTED,
          "1 when the container's regions name a device uuid that is not used as device_uuid, by reason: not_on_node (NVML does not report it; NVML's device at that index is used), invalid_syntax or churn (NVML down: not a GPU uuid, or the container changed its uuids too often).",
          with(DEVICE, "reason"));

  private static final List<FamilySpec> FAMILIES =
      List.of(
          CONTAINER_MEMORY_USED,
          CONTAINER_MEMORY_LIMIT,
          CONTAINER_MEMORY_BREAKDOWN,
          CONTAINER_SM_LIMIT,
          CONTAINER_REGION_SM_UTILIZATION,
          CONTAINER_REGION_NVML_MEMORY_USED,
          CONTAINER_OOM_REJECTIONS,
          LIMITER_THROTTLED_SECONDS,
          LIMITER_LAUNCHES_DELAYED,
          LIMITER_BUSY_SECONDS,
          CONTAINER_DEVICE_UUID_REJECTED);

  private final HolderSource holders;

  public RegionUsageCollector() {
    this(HolderSource.NONE);
  }

  /**
   * @param holders containers without a region: their memory on each device they hold is NVML's
   *     per-process memory (0 while no process runs there), the only family of this collector they
   *     have (no limit, no region)
   */
  public RegionUsageCollector(HolderSource holders) {
    super(FAMILIES);
    this.holders = holders;
  }

  static String[] with(String[] base, String extra) {
    String[] out = java.util.Arrays.copyOf(base, base.length + 1);
    out[base.length] = extra;
    return out;
  }

  @Override
  protected void collect(NodeState state, Sink out) {
    var used = families.gauge(CONTAINER_MEMORY_USED);
    var limit = families.gauge(CONTAINER_MEMORY_LIMIT);
    var breakdown = families.gauge(CONTAINER_MEMORY_BREAKDOWN);
    var smLimit = families.gauge(CONTAINER_SM_LIMIT);
    var smUtil = families.gauge(CONTAINER_REGION_SM_UTILIZATION);
    var monitor = families.gauge(CONTAINER_REGION_NVML_MEMORY_USED);
    var oom = families.counter(CONTAINER_OOM_REJECTIONS);
    var throttled = families.counter(LIMITER_THROTTLED_SECONDS);
    var delayed = families.counter(LIMITER_LAUNCHES_DELAYED);
    var busy = families.counter(LIMITER_BUSY_SECONDS);
    var rejected = families.gauge(CONTAINER_DEVICE_UUID_REJECTED);
    boolean anyRejected = false;
    boolean wantBreakdown = out.wants(CONTAINER_MEMORY_BREAKDOWN);
    for (ContainerState c : state.containers()) {
      for (DeviceUsageSummary d : c.devices()) {
        Labels l = labels.device(state.node(), c, d);
        used.add((double) d.usedBytes(), l);
        limit.add((double) d.limitBytes(), l);
        if (wantBreakdown) {
          breakdown.add(
              (double) d.contextBytes(), labels.deviceWith(state.node(), c, d, "kind", "context"));
          breakdown.add(
              (double) d.moduleBytes(), labels.deviceWith(state.node(), c, d, "kind", "module"));
          breakdown.add(
              (double) d.dataBytes(), labels.deviceWith(state.node(), c, d, "kind", "data"));
        }
        smLimit.add(d.smLimitRatio(), l);
        smUtil.add(d.regionSmUtilPercent() / 100.0, l);
        monitor.add((double) d.monitorUsedBytes(), l);
        if (!d.uuidRejected().isEmpty()) {
          rejected.add(1, labels.deviceWith(state.node(), c, d, "reason", d.uuidRejected()));
          anyRejected = true;
        }
        if (d.hasExtension()) {
          oom.add((double) d.oomRejections(), l);
          throttled.add(d.throttledNanos() / 1e9, l);
          delayed.add((double) d.launchesDelayed(), l);
          busy.add(d.busyNanos() / 1e9, l);
        }
      }
    }
    for (var e : HolderLabels.indexed(holders.get(state).held())) {
      used.add(
          (double) e.getKey().memoryBytes(),
          HolderLabels.device(labels, state.node(), e.getKey(), e.getValue()));
    }
    addIf(out, CONTAINER_MEMORY_USED, used.build());
    addIf(out, CONTAINER_MEMORY_LIMIT, limit.build());
    addIf(out, CONTAINER_MEMORY_BREAKDOWN, breakdown.build());
    addIf(out, CONTAINER_SM_LIMIT, smLimit.build());
    addIf(out, CONTAINER_REGION_SM_UTILIZATION, smUtil.build());
    addIf(out, CONTAINER_REGION_NVML_MEMORY_USED, monitor.build());
    addIf(out, CONTAINER_OOM_REJECTIONS, oom.build());
    addIf(out, LIMITER_THROTTLED_SECONDS, throttled.build());
    addIf(out, LIMITER_LAUNCHES_DELAYED, delayed.build());
    addIf(out, LIMITER_BUSY_SECONDS, busy.build());
    if (anyRejected) {
      addIf(out, CONTAINER_DEVICE_UUID_REJECTED, rejected.build());
    }
  }

  static void addIf(Sink out, FamilySpec spec, io.vgpu.exporter.exposition.Family s) {
    if (out.wants(spec)) {
      out.add(s);
    }
  }
}

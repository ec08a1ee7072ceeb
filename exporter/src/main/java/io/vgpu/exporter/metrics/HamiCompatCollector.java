package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.*;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.attribution.AttributionService;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.DeviceUsageSummary;
import io.vgpu.exporter.node.NodeState;
import java.util.List;
import java.util.Objects;

/**
 * HAMi vGPU monitor drop-in families with HAMi's exact names, labels, units and values, each with
 * {@code zone="vGPU"}, so HAMi's Grafana dashboard and users' alerts keep working. Never the legacy
 * families (values in labels). Per-GPU {@code hami_host_gpu_*} come from the NVML collector.
 * Example:
 *
 * <pre>
 * hami_vgpu_memory_used_bytes{container="train",device_uuid="GPU-0a1b",namespace="ml",pod="train-0",vdevice_index="0",zone="vGPU"} 2.147483648E9
 * hami_container_device_utilization_ratio{...} 27.0
 * </pre>
 *
 * <p>As in HAMi, {@code hami_container_device_utilization_ratio} is a sum of per-process percents
 * (0-100 per process) and {@code hami_container_device_memory_bytes} repeats the used bytes.
 */
public final class HamiCompatCollector extends VgpuCollector {
  private static final String[] H = {
    L_NAMESPACE, L_POD, L_CONTAINER, L_HAMI_VDEVICE_INDEX, L_DEVICE_UUID, HAMI_ZONE_LABEL
  };
  private static final FamilySpec.Gauge HAMI_VGPU_MEMORY_USED =
      FamilySpec.gauge(MetricNames.HAMI_VGPU_MEMORY_USED, "vGPU device memory usage in bytes", H);
  private static final FamilySpec.Gauge HAMI_VGPU_MEMORY_LIMIT =
      FamilySpec.gauge(MetricNames.HAMI_VGPU_MEMORY_LIMIT, "vGPU device memory limit in bytes", H);
  private static final FamilySpec.Gauge HAMI_CONTAINER_DEVICE_UTILIZATION =
      FamilySpec.gauge(
          MetricNames.HAMI_CONTAINER_DEVICE_UTILIZATION,
          "Container device SM utilization ratio",
          H);
  private static final FamilySpec.Gauge HAMI_CONTAINER_DEVICE_MEMORY =
      FamilySpec.gauge(
          MetricNames.HAMI_CONTAINER_DEVICE_MEMORY, "Container device memory usage in bytes", H);
  private static final FamilySpec.Gauge HAMI_CONTAINER_LAST_KERNEL_ELAPSED =
      FamilySpec.gauge(
          MetricNames.HAMI_CONTAINER_LAST_KERNEL_ELAPSED,
          "Seconds since last kernel execution in container",
          H);
  private static final FamilySpec.Gauge HAMI_VGPU_MEMORY_CONTEXT =
      FamilySpec.gauge(
          MetricNames.HAMI_VGPU_MEMORY_CONTEXT, "vGPU device context memory in bytes", H);
  private static final FamilySpec.Gauge HAMI_VGPU_MEMORY_MODULE =
      FamilySpec.gauge(
          MetricNames.HAMI_VGPU_MEMORY_MODULE, "vGPU device module memory in bytes", H);
  private static final FamilySpec.Gauge HAMI_VGPU_MEMORY_BUFFER =
      FamilySpec.gauge(
          MetricNames.HAMI_VGPU_MEMORY_BUFFER, "vGPU device buffer memory in bytes", H);

  private static final List<FamilySpec> FAMILIES =
      List.of(
          HAMI_VGPU_MEMORY_USED,
          HAMI_VGPU_MEMORY_LIMIT,
          HAMI_CONTAINER_DEVICE_UTILIZATION,
          HAMI_CONTAINER_DEVICE_MEMORY,
          HAMI_CONTAINER_LAST_KERNEL_ELAPSED,
          HAMI_VGPU_MEMORY_CONTEXT,
          HAMI_VGPU_MEMORY_MODULE,
          HAMI_VGPU_MEMORY_BUFFER);

  /** Where the utilization family's value comes from. */
  @FunctionalInterface
  public interface UtilizationSource {
    /** What the region claims (HAMi's monitor; 0 on nodes whose limiter does not write it). */
    UtilizationSource REGION = (c, d) -> d.regionSmUtilPercent();

    /**
     * The NVML-reconciled value, so HAMi dashboards stop reading 0; NaN when it is unknown, so a
     * dashboard shows a gap instead of a false 0.
     */
    static UtilizationSource reconciled(AttributionService attribution) {
      return (c, d) ->
          attribution.smUtilization(c.key(), d.index(), d.uuid()).orElse(Double.NaN) * 100.0;
    }

    /** Percent (HAMi's 0-100-per-process scale) for this container and device. */
    double percent(ContainerState c, DeviceUsageSummary d);
  }

  private final UtilizationSource utilization;

  public HamiCompatCollector(UtilizationSource utilization) {
    super(FAMILIES);
    this.utilization = Objects.requireNonNull(utilization, "utilization");
  }

  /** Last scrape's series count, so the dedup set is sized once instead of grown. */
  private volatile int expectedSeries = 64;

  @Override
  protected void collect(NodeState state, Sink out) {
    var used = families.gauge(HAMI_VGPU_MEMORY_USED);
    var limit = families.gauge(HAMI_VGPU_MEMORY_LIMIT);
    var util = families.gauge(HAMI_CONTAINER_DEVICE_UTILIZATION);
    var mem = families.gauge(HAMI_CONTAINER_DEVICE_MEMORY);
    var elapsed = families.gauge(HAMI_CONTAINER_LAST_KERNEL_ELAPSED);
    var ctx = families.gauge(HAMI_VGPU_MEMORY_CONTEXT);
    var module = families.gauge(HAMI_VGPU_MEMORY_MODULE);
    var buffer = families.gauge(HAMI_VGPU_MEMORY_BUFFER);
    UtilizationSource u = utilization;
    long now = state.at().getEpochSecond();
    // Without pod_uid two unknown pods (API server down) can share a label set: keep the first.
    java.util.Set<Labels> seen = java.util.HashSet.newHashSet(expectedSeries);
    for (ContainerState c : state.containers()) {
      if (c.stale()) {
        continue; // HAMi's monitor drops directories of deleted pods
      }
      for (DeviceUsageSummary d : c.devices()) {
        if (d.uuid().isEmpty()) {
          continue; // HAMi skips devices whose uuid is empty
        }
        Labels l = labels.hami(c, d);
        if (!seen.add(l)) {
          continue;
        }
        used.add((double) d.usedBytes(), l);
        limit.add((double) d.limitBytes(), l);
        util.add(u.percent(c, d), l);
        mem.add((double) d.usedBytes(), l);
        if (c.lastKernelEpochSeconds() > 0) {
          elapsed.add((double) Math.max(0, now - c.lastKernelEpochSeconds()), l);
        }
        ctx.add((double) d.contextBytes(), l);
        module.add((double) d.moduleBytes(), l);
        buffer.add((double) d.dataBytes(), l);
      }
    }
    expectedSeries = seen.size();
    RegionUsageCollector.addIf(out, HAMI_VGPU_MEMORY_USED, used.build());
    RegionUsageCollector.addIf(out, HAMI_VGPU_MEMORY_LIMIT, limit.build());
    RegionUsageCollector.addIf(out, HAMI_CONTAINER_DEVICE_UTILIZATION, util.build());
    RegionUsageCollector.addIf(out, HAMI_CONTAINER_DEVICE_MEMORY, mem.build());
    RegionUsageCollector.addIf(out, HAMI_CONTAINER_LAST_KERNEL_ELAPSED, elapsed.build());
    RegionUsageCollector.addIf(out, HAMI_VGPU_MEMORY_CONTEXT, ctx.build());
    RegionUsageCollector.addIf(out, HAMI_VGPU_MEMORY_MODULE, module.build());
    RegionUsageCollector.addIf(out, HAMI_VGPU_MEMORY_BUFFER, buffer.build());
  }
}

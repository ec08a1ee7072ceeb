package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.*;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.attribution.AttributionResult;
import io.vgpu.exporter.attribution.AttributionService;
import io.vgpu.exporter.attribution.ContainerAttribution;
import io.vgpu.exporter.attribution.DeviceAttribution;
import io.vgpu.exporter.attribution.DeviceHolders.HeldDevice;
import io.vgpu.exporter.attribution.DeviceHolders.Holders;
import io.vgpu.exporter.attribution.DeviceHolders.UnattributedReason;
import io.vgpu.exporter.attribution.GpuAttribution;
import io.vgpu.exporter.attribution.MismatchReason;
import io.vgpu.exporter.attribution.UnknownReason;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.DeviceUsageSummary;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.exporter.nvml.GpuSnapshot;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Attribution families, from the latest {@link AttributionResult} joined onto the scrape's
 * containers (so labels match the region families exactly). Example:
 *
 * <pre>
 * vgpu_container_sm_utilization_ratio{container="train",device_index="0",device_uuid="GPU-0a",namespace="ml",node="n1",pod="train-0",pod_uid="..."} 0.61
 * vgpu_container_sm_utilization_unknown{...,reason="pid_unresolved"} 1.0
 * vgpu_container_hostpid_mismatch_slots{container="train",...,reason="container_pid"} 1.0
 * vgpu_gpu_unattributed_processes{device_index="0",device_uuid="GPU-0a",model="NVIDIA H100",node="n1"} 0.0
 * vgpu_exporter_region_writes_total{field="recent_kernel",node="n1"} 12.0
 * </pre>
 *
 * <p>A container the latest reconciliation has not seen yet reads {@code
 * reason="not_reconciled_yet"}.
 */
public final class AttributionCollector extends VgpuCollector {
  private static final String[] D = {
    L_NODE, L_NAMESPACE, L_POD, L_CONTAINER, L_POD_UID, L_DEVICE_INDEX, L_DEVICE_UUID
  };
  private static final String[] DR = {
    L_NODE, L_NAMESPACE, L_POD, L_CONTAINER, L_POD_UID, L_DEVICE_INDEX, L_DEVICE_UUID, "reason"
  };
  private static final String[] C = {L_NODE, L_NAMESPACE, L_POD, L_CONTAINER, L_POD_UID};
  private static final String[] CR = {L_NODE, L_NAMESPACE, L_POD, L_CONTAINER, L_POD_UID, "reason"};
  private static final String[] G = {L_NODE, L_DEVICE_INDEX, L_DEVICE_UUID, L_MODEL};
  private static final String[] GR_SORTED = {
    L_DEVICE_INDEX, L_DEVICE_UUID, L_MODEL, L_NODE, "reason"
  };

  private static final FamilySpec.Gauge CONTAINER_SM_UTILIZATION =
      FamilySpec.gauge(
          MetricNames.CONTAINER_SM_UTILIZATION,
          "SM utilization of the container's processes (0-1), NVML per-process means over host"
              + " pids",
          D);
  private static final FamilySpec.Gauge CONTAINER_SM_UTILIZATION_UNKNOWN =
      FamilySpec.gauge(
          MetricNames.CONTAINER_SM_UTILIZATION_UNKNOWN,
          "1 while the container's SM utilization cannot be attributed, by reason",
          DR);
  private static final FamilySpec.Gauge CONTAINER_NVML_MEMORY_USED =
      FamilySpec.gauge(
          MetricNames.CONTAINER_NVML_MEMORY_USED,
          "Device memory NVML attributes to the container's host pids",
          D);
  private static final FamilySpec.Gauge CONTAINER_ZOMBIE_MEMORY =
      FamilySpec.gauge(
          MetricNames.CONTAINER_ZOMBIE_MEMORY,
          "Region memory held by slots the one judgment calls GONE (their process is gone;"
              + " the same slots as vgpu_container_processes{state=\"gone\"}); left out of"
              + " used memory",
          D);
  private static final FamilySpec.Counter CONTAINER_OVER_SM_LIMIT_SECONDS =
      FamilySpec.counter(
          MetricNames.CONTAINER_OVER_SM_LIMIT_SECONDS,
          "Time the reconciled SM utilization was above the SM limit",
          D);
  private static final FamilySpec.Gauge CONTAINER_ZOMBIE_SLOTS =
      FamilySpec.gauge(
          MetricNames.CONTAINER_ZOMBIE_SLOTS,
          "Slots the one judgment calls GONE (doctor's zombie-slots finding, GONE on the"
              + " status page and in inspect; equals vgpu_container_processes{state=\"gone\"})",
          C);
  private static final FamilySpec.Gauge CONTAINER_HOSTPID_MISMATCH_SLOTS =
      FamilySpec.gauge(
          MetricNames.CONTAINER_HOSTPID_MISMATCH_SLOTS,
          "Live slots whose recorded hostpid is wrong, by reason",
          CR);
  private static final FamilySpec.Gauge CONTAINER_MEMORY_IDLE_SECONDS =
      FamilySpec.gauge(
          MetricNames.CONTAINER_MEMORY_IDLE_SECONDS,
          "How long the container has held device memory without running a kernel",
          C);
  private static final FamilySpec.Gauge CONTAINER_MEMORY_LEAK_SUSPECTED =
      FamilySpec.gauge(
          MetricNames.CONTAINER_MEMORY_LEAK_SUSPECTED,
          "1 when memory has been held without a kernel for the leak threshold",
          C);
  private static final FamilySpec.Gauge CONTAINER_PRIORITY_BLOCKED =
      FamilySpec.gauge(
          MetricNames.CONTAINER_PRIORITY_BLOCKED,
          "1 while a higher-priority task blocks the container's launches (recent_kernel < 0)",
          C);
  private static final FamilySpec.Counter CONTAINER_PRIORITY_BLOCKED_SECONDS =
      FamilySpec.counter(
          MetricNames.CONTAINER_PRIORITY_BLOCKED_SECONDS,
          "Time the container was seen blocked by priority",
          C);
  private static final FamilySpec.Gauge CONTAINER_UTILIZATION_SWITCH =
      FamilySpec.gauge(
          MetricNames.CONTAINER_UTILIZATION_SWITCH,
          "The region's utilization_switch: 1 = SM limit enforced",
          C);
  private static final FamilySpec.Gauge GPU_CONTAINERS =
      FamilySpec.gauge(MetricNames.GPU_CONTAINERS, "Containers whose regions name this GPU", G);
  private static final FamilySpec.Gauge GPU_PROCESSES =
      FamilySpec.gauge(MetricNames.GPU_PROCESSES, "Processes NVML lists or sampled on this GPU", G);
  private static final FamilySpec.Gauge GPU_UNATTRIBUTED_PROCESSES =
      FamilySpec.gauge(
          MetricNames.GPU_UNATTRIBUTED_PROCESSES,
          "GPU processes that belong to no known container",
          G);
  private static final FamilySpec.Gauge GPU_UNATTRIBUTED_MEMORY =
      FamilySpec.gauge(
          MetricNames.GPU_UNATTRIBUTED_MEMORY,
          "NVML memory of GPU processes that belong to no known container",
          G);
  private static final FamilySpec.Counter EXPORTER_REGION_WRITES =
      FamilySpec.counter(
          MetricNames.EXPORTER_REGION_WRITES,
          "Writes the exporter made into shared regions, by field",
          L_NODE,
          "field");
  private static final FamilySpec.Counter EXPORTER_REGION_WRITE_ERRORS =
      FamilySpec.counter(
          MetricNames.EXPORTER_REGION_WRITE_ERRORS,
          "Region writes that failed, by reason (fault: the store hit SIGBUS, e.g. a hole of a"
              + " sparse file on a full filesystem)",
          L_NODE,
          "reason");
  private static final FamilySpec.Gauge GPU_UNATTRIBUTED_PROCESSES_BY_REASON =
      FamilySpec.gauge(
          MetricNames.GPU_UNATTRIBUTED_PROCESSES_BY_REASON,
          "GPU processes no container holds, by reason: not_in_a_pod (a host process, or"
              + " gone), pod_unknown (a pod the metadata does not know), container_unknown,"
              + " no_claim (the kubelet answered and the container holds no claim on this"
              + " GPU); they sum to vgpu_gpu_unattributed_processes",
          L_NODE,
          L_DEVICE_INDEX,
          L_DEVICE_UUID,
          L_MODEL,
          "reason");

  private static final List<FamilySpec> FAMILIES =
      List.of(
          CONTAINER_SM_UTILIZATION,
          CONTAINER_SM_UTILIZATION_UNKNOWN,
          CONTAINER_NVML_MEMORY_USED,
          CONTAINER_ZOMBIE_MEMORY,
          CONTAINER_OVER_SM_LIMIT_SECONDS,
          CONTAINER_ZOMBIE_SLOTS,
          CONTAINER_HOSTPID_MISMATCH_SLOTS,
          CONTAINER_MEMORY_IDLE_SECONDS,
          CONTAINER_MEMORY_LEAK_SUSPECTED,
          CONTAINER_PRIORITY_BLOCKED,
          CONTAINER_PRIORITY_BLOCKED_SECONDS,
          CONTAINER_UTILIZATION_SWITCH,
          GPU_CONTAINERS,
          GPU_PROCESSES,
          GPU_UNATTRIBUTED_PROCESSES,
          GPU_UNATTRIBUTED_MEMORY,
          EXPORTER_REGION_WRITES,
          EXPORTER_REGION_WRITE_ERRORS,
          GPU_UNATTRIBUTED_PROCESSES_BY_REASON);

  private final AttributionService service;

  private final HolderSource holders;

  public AttributionCollector(AttributionService service) {
    this(service, HolderSource.NONE);
  }

  /**
   * @param holders containers without a region: their reconciled SM utilization (or why it is
   *     unknown) per device they hold; GPU processes they hold leave the unattributed counts, and
   *     those that stay are counted by reason
   */
  public AttributionCollector(AttributionService service, HolderSource holders) {
    super(FAMILIES);
    this.service = service;
    this.holders = holders;
  }

  public AttributionService service() {
    return service;
  }

  @Override
  protected void collect(NodeState state, Sink out) {
    AttributionResult result = service.latest();
    Map<io.vgpu.exporter.discovery.ContainerKey, ContainerAttribution> byKey = result.byKey();
    var util = families.gauge(CONTAINER_SM_UTILIZATION);
    var unknown = families.gauge(CONTAINER_SM_UTILIZATION_UNKNOWN);
    var nvmlMem = families.gauge(CONTAINER_NVML_MEMORY_USED);
    var zombieMem = families.gauge(CONTAINER_ZOMBIE_MEMORY);
    var overLimit = families.counter(CONTAINER_OVER_SM_LIMIT_SECONDS);
    var zombies = families.gauge(CONTAINER_ZOMBIE_SLOTS);
    var mismatch = families.gauge(CONTAINER_HOSTPID_MISMATCH_SLOTS);
    var idle = families.gauge(CONTAINER_MEMORY_IDLE_SECONDS);
    var leak = families.gauge(CONTAINER_MEMORY_LEAK_SUSPECTED);
    var blocked = families.gauge(CONTAINER_PRIORITY_BLOCKED);
    var blockedSeconds = families.counter(CONTAINER_PRIORITY_BLOCKED_SECONDS);
    var utilSwitch = families.gauge(CONTAINER_UTILIZATION_SWITCH);
    String node = state.node();
    for (ContainerState c : state.containers()) {
      if (c.finished()) {
        continue;
      }
      ContainerAttribution a = byKey.get(c.key());
      Labels cl = labels.container(node, c);
      // Liveness is the one judgment's (the evidence pass), not the reconciler's: the same GONE
      // slots the status page, /api and doctor show.
      zombies.add((double) c.gone(), cl);
      for (DeviceUsageSummary d : c.devices()) {
        Labels dl = labels.device(node, c, d);
        zombieMem.add((double) d.goneBytes(), dl);
        Optional<DeviceAttribution> da =
            a == null ? Optional.empty() : a.device(d.index(), d.uuid());
        if (da.isEmpty()) {
          unknown.add(
              1, labels.deviceWith(node, c, d, "reason", UnknownReason.NOT_RECONCILED_YET.label()));
          continue;
        }
        // Plain branches, not ifPresent lambdas: each capturing lambda is an allocation through a
        // method handle under C1, and this runs per container and device every scrape.
        DeviceAttribution x = da.get();
        if (x.smUtilization().isPresent()) {
          util.add(x.smUtilization().getAsDouble(), dl);
        }
        if (x.unknown().isPresent()) {
          unknown.add(1, labels.deviceWith(node, c, d, "reason", x.unknown().get().label()));
        }
        if (x.nvmlMemoryBytes().isPresent()) {
          nvmlMem.add((double) x.nvmlMemoryBytes().getAsLong(), dl);
        }
        overLimit.add(a.overSmLimitSeconds().getOrDefault(d.index(), 0.0), dl);
      }
      if (a == null) {
        continue;
      }
      for (Map.Entry<MismatchReason, Long> m : a.mismatches().entrySet()) {
        mismatch.add(m.getValue(), labels.containerWith(node, c, "reason", m.getKey().label()));
      }
      if (a.memoryIdleSeconds().isPresent()) {
        idle.add(a.memoryIdleSeconds().get(), cl);
      }
      leak.add(a.leakSuspected() ? 1 : 0, cl);
      blocked.add(a.priorityBlocked() ? 1 : 0, cl);
      blockedSeconds.add(a.priorityBlockedSeconds(), cl);
      utilSwitch.add(a.utilizationSwitch(), cl);
    }

    Holders held = holders.get(state);
    for (var e : HolderLabels.indexed(held.held())) {
      HeldDevice h = e.getKey();
      if (h.smUtilization().isPresent()) {
        util.add(
            h.smUtilization().getAsDouble(), HolderLabels.device(labels, node, h, e.getValue()));
      } else {
        unknown.add(
            1,
            HolderLabels.deviceWith(
                labels, node, h, e.getValue(), "reason", h.unknown().orElseThrow().label()));
      }
    }
    var byReason = families.gauge(GPU_UNATTRIBUTED_PROCESSES_BY_REASON);
    var gpuContainers = families.gauge(GPU_CONTAINERS);
    var gpuProcesses = families.gauge(GPU_PROCESSES);
    var unattributed = families.gauge(GPU_UNATTRIBUTED_PROCESSES);
    var unattributedMem = families.gauge(GPU_UNATTRIBUTED_MEMORY);
    for (GpuSnapshot g : result.nvml().gpus()) {
      Optional<GpuAttribution> ga = result.gpu(g.identity().uuid());
      if (ga.isEmpty()) {
        continue;
      }
      Labels gl = NvmlCollector.gpuLabels(labels, node, g);
      gpuContainers.add(ga.get().containers(), gl);
      gpuProcesses.add(ga.get().processes(), gl);
      if (holders == HolderSource.NONE) {
        unattributed.add(ga.get().unattributedProcesses(), gl);
        unattributedMem.add((double) ga.get().unattributedBytes(), gl);
        continue;
      }
      Map<UnattributedReason, Integer> reasons =
          held.unattributed().getOrDefault(g.identity().uuid(), Map.of());
      int sum = 0;
      for (UnattributedReason r : UnattributedReason.values()) {
        int n = reasons.getOrDefault(r, 0);
        sum += n;
        byReason.add(
            n,
            labels.of(
                GR_SORTED,
                new String[] {
                  LabelSets.index(g.identity().index()),
                  g.identity().uuid(),
                  g.identity().name(),
                  node,
                  r.label()
                }));
      }
      unattributed.add(sum, gl);
      unattributedMem.add(
          (double) held.unattributedBytes().getOrDefault(g.identity().uuid(), 0L), gl);
    }
    var writes = families.counter(EXPORTER_REGION_WRITES);
    service.regionWrites().forEach((f, n) -> writes.add(n, labels.nodeWith(node, "field", f)));
    var writeErrors = families.counter(EXPORTER_REGION_WRITE_ERRORS);
    service
        .regionWriteErrors()
        .forEach((r, n) -> writeErrors.add(n, labels.nodeWith(node, "reason", r)));

    for (var f :
        List.of(
            util,
            unknown,
            nvmlMem,
            zombieMem,
            zombies,
            mismatch,
            idle,
            leak,
            blocked,
            utilSwitch,
            gpuContainers,
            gpuProcesses,
            unattributed,
            unattributedMem)) {
      out.add(f.build());
    }
    if (holders != HolderSource.NONE) {
      out.add(byReason.build());
    }
    out.add(overLimit.build());
    out.add(blockedSeconds.build());
    out.add(writes.build());
    out.add(writeErrors.build());
  }
}

package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.*;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.attribution.DeviceHolders.HeldDevice;
import io.vgpu.exporter.attribution.DeviceHolders.Holders;
import io.vgpu.exporter.discovery.DegradedMark;
import io.vgpu.exporter.discovery.MappedRegion;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.regioncodec.RegionSnapshot;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * Per container: process counts, last kernel time, region layout, lifecycle. Example:
 *
 * <pre>
 * vgpu_container_processes{container="train",namespace="ml",node="gpu-1",pod="train-0",pod_uid="7c9e...",state="running"} 4.0
 * vgpu_container_processes{...,state="gone"} 1.0
 * vgpu_container_last_kernel_timestamp_seconds{...} 1.79e9
 * vgpu_container_region_info{...,layout="v1.2",version="1.2"} 1
 * vgpu_container_pod_info{...,container_kind="regular",qos_class="burstable",label_app="trainer"} 1
 * vgpu_container_stale{...} 0.0
 * vgpu_container_finished{...} 0.0
 * vgpu_container_cache_files{...} 1.0
 * vgpu_container_region_degraded{...,cause="symlink"} 1.0
 * vgpu_container_region_unreadable{...,reason="unknown_version"} 1.0
 * </pre>
 */
public final class ContainerCollector extends VgpuCollector {
  private static final String[] C = {L_NODE, L_NAMESPACE, L_POD, L_CONTAINER, L_POD_UID};
  private static final FamilySpec.Gauge CONTAINER_PROCESSES =
      FamilySpec.gauge(
          MetricNames.CONTAINER_PROCESSES,
          "Slots in the container's regions by the one judgment's liveness (the word doctor, inspect, the status page and /api/v1/containers print): running and suspended are ALIVE slots by status, gone GONE (its process is gone), unknown UNKNOWN (cannot be judged from here, or the background evidence pass has not seen it yet); 0 once the pod finished.",
          RegionUsageCollector.with(C, "state"));
  private static final FamilySpec.Gauge CONTAINER_LAST_KERNEL_TIMESTAMP =
      FamilySpec.gauge(
          MetricNames.CONTAINER_LAST_KERNEL_TIMESTAMP,
          "Unix time of the container's last kernel launch as the library recorded it (absent when never).",
          C);
  private static final FamilySpec.Info CONTAINER_REGION_INFO =
      FamilySpec.info(
          MetricNames.CONTAINER_REGION_INFO,
          "Layout and version of each readable region in the container (value 1).",
          with(C, "layout", "version"));
  private static final FamilySpec.Info CONTAINER_INFO =
      FamilySpec.info(
          MetricNames.CONTAINER_INFO,
          "Pod facts for the container: kind, QoS class, allow-listed pod labels (value 1).",
          with(C, "container_kind", "qos_class"));
  private static final FamilySpec.Gauge CONTAINER_STALE =
      FamilySpec.gauge(
          MetricNames.CONTAINER_STALE,
          "1 when the container's pod no longer exists (past the grace period); the directory is left behind.",
          C);
  private static final FamilySpec.Gauge CONTAINER_FINISHED =
      FamilySpec.gauge(
          MetricNames.CONTAINER_FINISHED,
          "1 when the pod Succeeded/Failed or the init container completed: usage is no longer exported.",
          C);
  private static final FamilySpec.Gauge CONTAINER_CACHE_FILES =
      FamilySpec.gauge(
          MetricNames.CONTAINER_CACHE_FILES,
          "Cache files in the container directory, by whether they could be mapped and read.",
          with(C, "result"));
  private static final FamilySpec.Gauge CONTAINER_REGION_DEGRADED =
      FamilySpec.gauge(
          MetricNames.CONTAINER_REGION_DEGRADED,
          "1 while libvgpu's side file says a process of the container could not use the shared region (cause: its token, or malformed): its limits hold for its process tree only, not container-wide.",
          with(C, "cause"));
  private static final FamilySpec.Gauge CONTAINER_REGION_UNREADABLE =
      FamilySpec.gauge(
          MetricNames.CONTAINER_REGION_UNREADABLE,
          "1 while a cache file of the container cannot be read (reason: the codec's, e.g. unknown_version, unknown_size, bad_magic); absent while every file reads. The doctor calls such a container FAIL.",
          with(C, "reason"));

  private static final List<FamilySpec> FAMILIES =
      List.of(
          CONTAINER_PROCESSES,
          CONTAINER_LAST_KERNEL_TIMESTAMP,
          CONTAINER_REGION_INFO,
          CONTAINER_INFO,
          CONTAINER_STALE,
          CONTAINER_FINISHED,
          CONTAINER_CACHE_FILES,
          CONTAINER_REGION_DEGRADED,
          CONTAINER_REGION_UNREADABLE);

  private final Map<String, String> podLabelNames;

  private final HolderSource holders;

  /**
   * @param podLabelKeys allow-listed pod label keys (exported as {@code label_<sanitized key>})
   */
  public ContainerCollector(List<String> podLabelKeys) {
    this(podLabelKeys, HolderSource.NONE);
  }

  /**
   * @param holders containers without a region: {@code vgpu_container_processes} counts their GPU
   *     processes as running (NVML lists them; the other states are a region's and read 0)
   */
  public ContainerCollector(List<String> podLabelKeys, HolderSource holders) {
    super(FAMILIES);
    this.holders = holders;
    Map<String, String> names = new java.util.LinkedHashMap<>();
    for (String k : podLabelKeys) {
      names.put(k, "label_" + k.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9_]", "_"));
    }
    this.podLabelNames = Map.copyOf(names);
  }

  private static String[] with(String[] base, String... extra) {
    String[] out = java.util.Arrays.copyOf(base, base.length + extra.length);
    System.arraycopy(extra, 0, out, base.length, extra.length);
    return out;
  }

  /**
   * The names and values {@code vgpu_container_pod_info} adds to a container's labels: its kind,
   * the pod's QoS class and the allow-listed pod labels.
   */
  private String[][] podFacts(PodMeta pod, String container) {
    List<String> names = new ArrayList<>(List.of("container_kind", "qos_class"));
    List<String> values =
        new ArrayList<>(
            List.of(
                pod.container(container).map(m -> m.kind().label()).orElse("unknown"),
                pod.qosClass().orElse("")));
    for (var e : podLabelNames.entrySet()) {
      names.add(e.getValue());
      values.add(pod.labels().getOrDefault(e.getKey(), ""));
    }
    return new String[][] {names.toArray(String[]::new), values.toArray(String[]::new)};
  }

  @Override
  protected void collect(NodeState state, Sink out) {
    var processes = families.gauge(CONTAINER_PROCESSES);
    var lastKernel = families.gauge(CONTAINER_LAST_KERNEL_TIMESTAMP);
    var regionInfo = families.info(CONTAINER_REGION_INFO);
    var info = families.info(CONTAINER_INFO);
    var stale = families.gauge(CONTAINER_STALE);
    var finished = families.gauge(CONTAINER_FINISHED);
    var files = families.gauge(CONTAINER_CACHE_FILES);
    var degraded = families.gauge(CONTAINER_REGION_DEGRADED);
    var unreadable = families.gauge(CONTAINER_REGION_UNREADABLE);
    for (ContainerState c : state.containers()) {
      Labels l = labels.container(state.node(), c);
      processes.add(
          (double) c.running(), labels.containerWith(state.node(), c, "state", "running"));
      processes.add(
          (double) c.suspended(), labels.containerWith(state.node(), c, "state", "suspended"));
      processes.add((double) c.gone(), labels.containerWith(state.node(), c, "state", "gone"));
      processes.add(
          (double) c.unknown(), labels.containerWith(state.node(), c, "state", "unknown"));
      if (c.lastKernelEpochSeconds() > 0) {
        lastKernel.add((double) c.lastKernelEpochSeconds(), l);
      }
      Set<String> seen = new HashSet<>();
      Set<String> unreadableReasons = new java.util.TreeSet<>();
      int ok = 0;
      for (ContainerState.RegionState r : c.regions()) {
        if (r.read() instanceof MappedRegion.Read.Failed(var reason)) {
          unreadableReasons.add(reason.label());
        }
        if (r.read() instanceof MappedRegion.Read.Ok(RegionSnapshot s)) {
          ok++;
          String version =
              s.layout().hasVersionFields() ? s.majorVersion() + "." + s.minorVersion() : "0";
          if (seen.add(s.layout().label() + "/" + version)) {
            regionInfo.add(
                labels.containerWithAll(
                    state.node(),
                    c,
                    new String[] {"layout", "version"},
                    new String[] {s.layout().label(), version}));
          }
        }
      }
      for (String reason : unreadableReasons) {
        // A gauge, not the one-shot parse-error counter: it stays 1 while the file stays broken,
        // so an alert on it keeps firing for as long as the problem lasts.
        unreadable.add(1, labels.containerWith(state.node(), c, "reason", reason));
      }
      files.add(ok, labels.containerWith(state.node(), c, "result", "ok"));
      files.add(c.regions().size() - ok, labels.containerWith(state.node(), c, "result", "error"));
      if (c.pod().isPresent()) {
        String[][] facts = podFacts(c.pod().get(), c.key().containerName());
        info.add(labels.containerWithAll(state.node(), c, facts[0], facts[1]));
      }
      Set<DegradedMark.Cause> causes = java.util.EnumSet.noneOf(DegradedMark.Cause.class);
      c.degraded().forEach(m -> causes.add(m.cause()));
      for (DegradedMark.Cause cause : causes) {
        degraded.add(1, labels.containerWith(state.node(), c, "cause", cause.label()));
      }
      stale.add(c.stale() ? 1 : 0, l);
      finished.add(c.finished() ? 1 : 0, l);
    }
    Holders found = holders.get(state);
    for (List<HeldDevice> held : HolderLabels.byContainer(found.held()).values()) {
      java.util.Set<Integer> pids = new java.util.HashSet<>();
      held.forEach(h -> pids.addAll(h.hostPids()));
      HeldDevice h = held.get(0);
      String node = state.node();
      // The same pod facts a region container gets, from the same pod metadata.
      Optional<PodMeta> pod = found.pod(h);
      if (pod.isPresent()) {
        String[][] facts = podFacts(pod.get(), h.container());
        info.add(HolderLabels.containerWithAll(labels, node, h, facts[0], facts[1]));
      }
      processes.add(pids.size(), HolderLabels.containerWith(labels, node, h, "state", "running"));
      processes.add(0, HolderLabels.containerWith(labels, node, h, "state", "suspended"));
      processes.add(0, HolderLabels.containerWith(labels, node, h, "state", "gone"));
      processes.add(0, HolderLabels.containerWith(labels, node, h, "state", "unknown"));
    }
    RegionUsageCollector.addIf(out, CONTAINER_PROCESSES, processes.build());
    RegionUsageCollector.addIf(out, CONTAINER_LAST_KERNEL_TIMESTAMP, lastKernel.build());
    RegionUsageCollector.addIf(out, CONTAINER_REGION_INFO, regionInfo.build());
    RegionUsageCollector.addIf(out, CONTAINER_INFO, info.build());
    RegionUsageCollector.addIf(out, CONTAINER_STALE, stale.build());
    RegionUsageCollector.addIf(out, CONTAINER_FINISHED, finished.build());
    RegionUsageCollector.addIf(out, CONTAINER_CACHE_FILES, files.build());
    RegionUsageCollector.addIf(out, CONTAINER_REGION_DEGRADED, degraded.build());
    RegionUsageCollector.addIf(out, CONTAINER_REGION_UNREADABLE, unreadable.build());
  }
}

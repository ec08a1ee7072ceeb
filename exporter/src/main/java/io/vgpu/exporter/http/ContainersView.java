package io.vgpu.exporter.http;

import io.vgpu.exporter.discovery.DegradedMark;
import io.vgpu.exporter.discovery.MappedRegion;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.DeviceUsageSummary;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.regioncodec.ProcessSlot;
import io.vgpu.regioncodec.RegionSnapshot;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import tools.jackson.databind.json.JsonMapper;

/**
 * The node as JSON for tools ({@code GET /api/v1/containers}): every container with its pod
 * identity, files, per-device usage and processes. Field names are stable (snake_case).
 */
public final class ContainersView {
  private static final JsonMapper JSON = JsonMapper.builder().build();

  private ContainersView() {}

  public static String json(NodeState state) {
    return JSON.writeValueAsString(model(state));
  }

  /** With each container's verdict and findings from the status page's model (one judgment). */
  public static String json(NodeState state, StatusModel judged) {
    return JSON.writeValueAsString(model(state, judged));
  }

  public static Map<String, Object> model(NodeState state) {
    return model(state, null);
  }

  /**
   * The document; {@code judged}, when given, adds {@code verdict}, {@code findings} (WARN and
   * FAIL, worst first) and {@code slots} (ALIVE/GONE/UNKNOWN counts) to each container, the same
   * words {@code doctor}, {@code inspect} and the page use.
   */
  public static Map<String, Object> model(NodeState state, StatusModel judged) {
    Map<io.vgpu.exporter.discovery.ContainerKey, StatusModel.Row> rows = new java.util.HashMap<>();
    if (judged != null) {
      judged.containers().forEach(r -> rows.put(r.state().key(), r));
    }
    Map<String, Object> root = new LinkedHashMap<>();
    root.put("node", state.node());
    root.put("generated_at", state.at().toString());
    root.put("cache_root_readable", state.discovery().rootReadable());
    root.put("apiserver_up", state.api().up());
    state.api().problem().ifPresent(p -> root.put("apiserver_problem", p));
    List<Object> containers = new ArrayList<>();
    for (ContainerState c : state.containers()) {
      Map<String, Object> m = container(c);
      StatusModel.Row row = rows.get(c.key());
      if (row != null) {
        m.put("verdict", row.verdict().label());
        Map<String, Object> slots = new LinkedHashMap<>();
        for (var fate : io.vgpu.exporter.node.NodeEvidence.SlotFate.values()) {
          slots.put(fate.name().toLowerCase(java.util.Locale.ROOT), row.judged().count(fate));
        }
        slots.put("wrong_host_pid", row.judged().wrongHostPids());
        m.put("slots", slots);
        m.put("findings", io.vgpu.exporter.doctor.Inspection.findings(row.findings()));
      }
      containers.add(m);
    }
    root.put("containers", containers);
    return root;
  }

  private static Map<String, Object> container(ContainerState c) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("pod_uid", c.key().podUid());
    m.put("container", c.key().containerName());
    m.put("namespace", c.namespace());
    m.put("pod", c.podName());
    m.put("pod_known", c.pod().isPresent());
    c.pod().ifPresent(p -> m.put("phase", p.phase()));
    m.put("stale", c.stale());
    m.put("finished", c.finished());
    m.put("processes_running", c.running());
    m.put("processes_suspended", c.suspended());
    m.put("last_kernel_epoch_seconds", c.lastKernelEpochSeconds());
    List<Object> devices = new ArrayList<>();
    for (DeviceUsageSummary d : c.devices()) {
      Map<String, Object> dm = new LinkedHashMap<>();
      dm.put("index", d.index());
      dm.put("uuid", d.uuid());
      dm.put("used_bytes", d.usedBytes());
      dm.put("limit_bytes", d.limitBytes());
      dm.put("sm_limit_ratio", d.smLimitRatio());
      dm.put("region_sm_utilization_ratio", d.regionSmUtilPercent() / 100.0);
      devices.add(dm);
    }
    m.put("devices", devices);
    List<Object> files = new ArrayList<>();
    for (ContainerState.RegionState r : c.regions()) {
      Map<String, Object> fm = new LinkedHashMap<>();
      fm.put("path", r.path().toString());
      switch (r.read()) {
        case MappedRegion.Read.Ok(RegionSnapshot s) -> {
          fm.put("status", "ok");
          fm.put("layout", s.layout().label());
          fm.put("version", s.majorVersion() + "." + s.minorVersion());
          fm.put("best_effort", s.bestEffort());
          List<Object> procs = new ArrayList<>();
          for (ProcessSlot p : s.processes()) {
            Map<String, Object> pm = new LinkedHashMap<>();
            pm.put("slot", p.slotIndex());
            pm.put("pid", p.pid());
            pm.put("hostpid", p.hostPid());
            pm.put("status", p.status());
            pm.put("used_bytes", p.totalBytes());
            procs.add(pm);
          }
          fm.put("processes", procs);
        }
        case MappedRegion.Read.Failed(var reason) -> {
          fm.put("status", "error");
          fm.put("error", reason.label());
          fm.put("health", "fail");
        }
      }
      files.add(fm);
    }
    m.put("files", files);
    // libvgpu's degraded-mode side files still in force (content of malformed ones never shown).
    List<Object> degraded = new ArrayList<>();
    for (DegradedMark d : c.degraded()) {
      Map<String, Object> dm = new LinkedHashMap<>();
      dm.put("path", d.path().toString());
      dm.put("cause", d.cause().label());
      if (!d.malformed()) {
        dm.put("pid", d.pid());
        dm.put("time_epoch_seconds", d.epochSeconds());
      }
      degraded.add(dm);
    }
    m.put("degraded", degraded);
    return m;
  }
}

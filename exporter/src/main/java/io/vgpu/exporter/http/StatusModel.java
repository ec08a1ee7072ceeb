package io.vgpu.exporter.http;

import io.vgpu.exporter.doctor.Checks;
import io.vgpu.exporter.doctor.DoctorReport;
import io.vgpu.exporter.doctor.Finding;
import io.vgpu.exporter.doctor.Judgment;
import io.vgpu.exporter.doctor.Severity;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.DeviceUsageSummary;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.exporter.nvml.GpuSnapshot;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;

/**
 * What the exporter's {@code /} page shows: every container with its limits, usage, SM utilization,
 * slots and the doctor's verdict about it (problems first); who shares each GPU; the node-level
 * verdicts; and what the exporter writes. Every verdict and liveness word is {@link Judgment}'s,
 * the same as {@code doctor}, {@code inspect} and {@code /api/v1/containers} print. Immutable;
 * built per page view.
 *
 * @param node node name
 * @param at when the state was read
 * @param version exporter version
 * @param ready readiness verdict
 * @param notReadyReasons why not ready
 * @param containers one row per container directory, problems first (FAIL, WARN, then the rest)
 * @param report the doctor's findings over the same containers
 * @param writes what the exporter writes into the node (empty: it only reads)
 * @param gpus one entry per GPU a container or NVML names, by index then UUID
 */
public record StatusModel(
    String node,
    Instant at,
    String version,
    boolean ready,
    List<String> notReadyReasons,
    List<Row> containers,
    DoctorReport report,
    List<String> writes,
    List<Gpu> gpus) {
  public StatusModel {
    Objects.requireNonNull(node, "node");
    Objects.requireNonNull(at, "at");
    Objects.requireNonNull(version, "version");
    notReadyReasons = List.copyOf(notReadyReasons);
    containers = List.copyOf(containers);
    Objects.requireNonNull(report, "report");
    writes = List.copyOf(writes);
    gpus = List.copyOf(gpus);
  }

  /** The same model with another readiness verdict (readiness is read per request). */
  public StatusModel withReadiness(boolean ready, List<String> reasons) {
    return new StatusModel(node, at, version, ready, reasons, containers, report, writes, gpus);
  }

  /**
   * One container.
   *
   * @param state what the exporter read (pod metadata, per-device sums)
   * @param judged the one judgment about it: regions, slots, verdict and findings
   * @param nvmlSmUtilization per GPU UUID, NVML's SM utilization (0-1) summed over the container's
   *     ALIVE processes; empty without NVML per-process utilization
   */
  public record Row(
      ContainerState state, Judgment.Container judged, Map<String, Double> nvmlSmUtilization) {
    public Row {
      Objects.requireNonNull(state, "state");
      Objects.requireNonNull(judged, "judged");
      nvmlSmUtilization = Map.copyOf(nvmlSmUtilization);
    }

    /** NVML's SM utilization of this container on one GPU, when NVML measured it. */
    public OptionalDouble nvmlSmUtilization(String uuid) {
      Double v = nvmlSmUtilization.get(uuid);
      return v == null ? OptionalDouble.empty() : OptionalDouble.of(v);
    }

    public String status() {
      ContainerState c = state;
      return c.stale()
          ? "stale"
          : c.finished() ? "finished" : c.pod().isPresent() ? "running" : "pod unknown";
    }

    public List<DeviceUsageSummary> devices() {
      return state.devices();
    }

    /** The doctor's worst verdict about this container or its pod. */
    public Severity verdict() {
      return judged.verdict();
    }

    /** Its WARN and FAIL findings, worst first. */
    public List<Finding> findings() {
      return judged.problems();
    }
  }

  /**
   * One GPU and the containers whose regions name it.
   *
   * @param index the device index as the regions or NVML give it (-1 when unknown)
   * @param uuid the GPU's UUID
   * @param name the model NVML reports, empty without NVML
   * @param utilization NVML's GPU utilization (0-1), empty without NVML
   * @param sharers the containers on it, most memory first
   */
  public record Gpu(
      int index, String uuid, String name, OptionalDouble utilization, List<Sharer> sharers) {
    public Gpu {
      Objects.requireNonNull(uuid, "uuid");
      Objects.requireNonNull(name, "name");
      Objects.requireNonNull(utilization, "utilization");
      sharers = List.copyOf(sharers);
    }
  }

  /**
   * A container's share of one GPU.
   *
   * @param row the container
   * @param device its usage of the GPU
   */
  public record Sharer(Row row, DeviceUsageSummary device) {}

  /** Joins the exporter's state with the one judgment of the same node. */
  public static StatusModel of(
      NodeState state,
      NodeEvidence evidence,
      DoctorReport report,
      boolean ready,
      List<String> reasons,
      String version,
      List<String> writes) {
    Map<io.vgpu.exporter.discovery.ContainerKey, Judgment.Container> judged =
        Judgment.containers(evidence, report.findings());
    List<Row> rows = new ArrayList<>();
    for (ContainerState c : state.containers()) {
      Judgment.Container j = judged.get(c.key());
      if (j == null) {
        // The directory vanished between the state and the evidence: judged on the report only.
        List<Finding> mine =
            report.findings().stream().filter(f -> Judgment.about(f, c.key())).toList();
        j = new Judgment.Container(c.key(), List.of(), Judgment.worst(mine), mine);
      }
      rows.add(new Row(c, j, nvmlSm(j, evidence)));
    }
    // Problems first, so an operator sees what needs them without scrolling.
    rows.sort(
        Comparator.comparingInt((Row r) -> -r.verdict().exitCode())
            .thenComparing(r -> r.state().key()));
    return new StatusModel(
        state.node(),
        state.at(),
        version,
        ready,
        reasons,
        rows,
        report,
        writes,
        gpus(rows, evidence));
  }

  /**
   * NVML's per-process SM utilization summed over the container's ALIVE slots, per GPU UUID the
   * slot's region names: the same processes the judgment calls alive, measured by the driver.
   */
  private static Map<String, Double> nvmlSm(Judgment.Container j, NodeEvidence evidence) {
    Map<String, GpuSnapshot> byUuid = new LinkedHashMap<>();
    for (GpuSnapshot g : evidence.nvml().gpus()) {
      if (g.processUtilizationAvailable()) {
        byUuid.put(g.identity().uuid(), g);
      }
    }
    Map<String, Double> out = new LinkedHashMap<>();
    if (byUuid.isEmpty()) {
      return out;
    }
    for (Judgment.Region r : j.regions()) {
      if (r.snapshot().isEmpty()) {
        continue;
      }
      var devices = r.snapshot().get().devices();
      for (Judgment.Slot s : r.slots()) {
        if (s.process().isEmpty()) {
          continue;
        }
        int hostPid = s.process().get().hostPid();
        java.util.Set<String> counted = new java.util.HashSet<>();
        for (var u : s.slot().devices()) {
          if (u.deviceIndex() < 0 || u.deviceIndex() >= devices.size()) {
            continue;
          }
          String uuid = devices.get(u.deviceIndex()).uuid();
          GpuSnapshot g = byUuid.get(uuid);
          if (g != null && counted.add(uuid)) {
            out.merge(uuid, g.smUtilizationOf(hostPid).orElse(0), Double::sum);
          }
        }
      }
    }
    return out;
  }

  private static List<Gpu> gpus(List<Row> rows, NodeEvidence evidence) {
    Map<String, List<Sharer>> byUuid = new LinkedHashMap<>();
    Map<String, Integer> indexOf = new LinkedHashMap<>();
    for (Row r : rows) {
      for (DeviceUsageSummary d : r.devices()) {
        if (d.uuid().isEmpty()) {
          continue;
        }
        byUuid.computeIfAbsent(d.uuid(), k -> new ArrayList<>()).add(new Sharer(r, d));
        indexOf.putIfAbsent(d.uuid(), -1);
      }
    }
    Map<String, GpuSnapshot> nvml = new LinkedHashMap<>();
    for (GpuSnapshot g : evidence.nvml().gpus()) {
      nvml.put(g.identity().uuid(), g);
      byUuid.computeIfAbsent(g.identity().uuid(), k -> new ArrayList<>());
    }
    List<Gpu> out = new ArrayList<>();
    for (var e : byUuid.entrySet()) {
      Optional<GpuSnapshot> g = Optional.ofNullable(nvml.get(e.getKey()));
      List<Sharer> sharers = new ArrayList<>(e.getValue());
      sharers.sort(
          Comparator.comparingLong((Sharer s) -> -s.device().usedBytes())
              .thenComparing(s -> s.row().state().key()));
      out.add(
          new Gpu(
              g.map(x -> x.identity().index()).orElse(-1),
              e.getKey(),
              g.map(x -> x.identity().name()).orElse(""),
              g.map(GpuSnapshot::utilizationRatio).orElse(OptionalDouble.empty()),
              sharers));
    }
    out.sort(
        Comparator.comparingInt((Gpu x) -> x.index() < 0 ? Integer.MAX_VALUE : x.index())
            .thenComparing(Gpu::uuid));
    return out;
  }

  /** Node-level findings (not about one container or pod). */
  public List<Finding> nodeFindings() {
    return report.findings().stream().filter(f -> f.subject().equals(Checks.NODE)).toList();
  }
}

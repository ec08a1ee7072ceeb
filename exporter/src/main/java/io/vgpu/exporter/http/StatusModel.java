package io.vgpu.exporter.http;

import io.vgpu.exporter.doctor.Checks;
import io.vgpu.exporter.doctor.DoctorReport;
import io.vgpu.exporter.doctor.Finding;
import io.vgpu.exporter.doctor.Severity;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.DeviceUsageSummary;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.regioncodec.ProcessSlot;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * What the exporter's {@code /} page shows: every container with its limits and usage, how many of
 * its slots are attributed to live processes with the right host pid, and the doctor's worst
 * verdict about it; then the node-level verdicts. Immutable; built per page view.
 *
 * @param node node name
 * @param at when the state was read
 * @param version exporter version
 * @param ready readiness verdict
 * @param notReadyReasons why not ready
 * @param containers one row per container directory
 * @param report the doctor's findings over the same containers
 */
public record StatusModel(
    String node,
    Instant at,
    String version,
    boolean ready,
    List<String> notReadyReasons,
    List<Row> containers,
    DoctorReport report) {
  public StatusModel {
    Objects.requireNonNull(node, "node");
    Objects.requireNonNull(at, "at");
    Objects.requireNonNull(version, "version");
    notReadyReasons = List.copyOf(notReadyReasons);
    containers = List.copyOf(containers);
    Objects.requireNonNull(report, "report");
  }

  /**
   * One container.
   *
   * @param state what the exporter read (pod metadata, per-device sums)
   * @param attribution slots matched to live processes, wrong host pids and gone processes
   * @param verdict the worst doctor finding about this container or its pod
   * @param findings those findings (problems only)
   */
  public record Row(
      ContainerState state, Attribution attribution, Severity verdict, List<Finding> findings) {
    public Row {
      Objects.requireNonNull(state, "state");
      Objects.requireNonNull(attribution, "attribution");
      Objects.requireNonNull(verdict, "verdict");
      findings = List.copyOf(findings);
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
  }

  /**
   * Slot attribution of one container.
   *
   * @param slots live slots in its regions
   * @param attributed slots matched to a live process
   * @param wrongHostPid matched slots whose recorded host pid is not the process's
   * @param gone slots whose process was not found
   */
  public record Attribution(int slots, int attributed, int wrongHostPid, int gone) {
    public String label() {
      if (slots == 0) {
        return "no processes";
      }
      StringBuilder b = new StringBuilder(attributed + "/" + slots + " attributed");
      if (wrongHostPid > 0) {
        b.append(", ").append(wrongHostPid).append(" wrong host pid");
      }
      if (gone > 0) {
        b.append(", ").append(gone).append(" not found");
      }
      return b.toString();
    }
  }

  /** Joins the exporter's state with the doctor's evidence and report. */
  public static StatusModel of(
      NodeState state,
      NodeEvidence evidence,
      DoctorReport report,
      boolean ready,
      List<String> reasons,
      String version) {
    List<Row> rows = new ArrayList<>();
    for (ContainerState c : state.containers()) {
      int slots = 0;
      int attributed = 0;
      int wrong = 0;
      int gone = 0;
      for (NodeEvidence.Container ec : evidence.containers()) {
        if (!ec.key().equals(c.key())) {
          continue;
        }
        for (NodeEvidence.Region r : ec.regions()) {
          for (ProcessSlot s : r.latest().map(x -> x.processes()).orElse(List.of())) {
            slots++;
            var p = evidence.processOfSlot(ec, r, s);
            if (p.isPresent()) {
              attributed++;
              if (p.get().hostPid() != s.hostPid()) {
                wrong++;
              }
            } else {
              gone++;
            }
          }
        }
      }
      String dir = c.key().dirName();
      String pod = Checks.pod(c.key().podUid());
      List<Finding> mine =
          report.findings().stream()
              .filter(
                  f ->
                      f.subject().equals(dir)
                          || f.subject().startsWith(dir + " ")
                          || f.subject().equals(pod))
              .toList();
      Severity worst = Severity.OK;
      for (Finding f : mine) {
        if (f.severity().exitCode() > worst.exitCode()) {
          worst = f.severity();
        }
      }
      List<Finding> problems =
          mine.stream()
              .filter(f -> f.severity() == Severity.WARN || f.severity() == Severity.FAIL)
              .toList();
      rows.add(new Row(c, new Attribution(slots, attributed, wrong, gone), worst, problems));
    }
    return new StatusModel(state.node(), state.at(), version, ready, reasons, rows, report);
  }

  /** Node-level findings (not about one container or pod). */
  public List<Finding> nodeFindings() {
    return report.findings().stream().filter(f -> f.subject().equals(Checks.NODE)).toList();
  }
}

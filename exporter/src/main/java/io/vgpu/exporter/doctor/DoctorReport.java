package io.vgpu.exporter.doctor;

import io.vgpu.exporter.text.TenantText;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The doctor's verdicts.
 *
 * @param at when the evidence was gathered
 * @param findings every finding, ordered by check number then subject
 */
public record DoctorReport(Instant at, List<Finding> findings) {
  public DoctorReport {
    Objects.requireNonNull(at, "at");
    findings = List.copyOf(findings);
  }

  /** The worst severity (OK when there are no findings). */
  public Severity worst() {
    Severity w = Severity.OK;
    for (Finding f : findings) {
      if (f.severity().exitCode() > w.exitCode()) {
        w = f.severity();
      }
    }
    return w;
  }

  /** 0 ok, 1 warnings, 2 failures. */
  public int exitCode() {
    return worst().exitCode();
  }

  /** Findings about one subject prefix (a pod UID matches its pod and its containers). */
  public List<Finding> about(String podUid) {
    return findings.stream().filter(f -> f.subject().contains(podUid)).toList();
  }

  /** Human-readable report: one line per finding, evidence and fix indented under problems. */
  public String toText() {
    StringBuilder sb = new StringBuilder();
    for (Finding f : findings) {
      sb.append(
          String.format(
              java.util.Locale.ROOT,
              "[%-4s] %2d %-22s %s: %s%n",
              f.severity().name(),
              f.check(),
              f.id(),
              TenantText.clean(f.subject()),
              TenantText.clean(f.summary())));
      appendEvidenceAndFix(sb, f);
    }
    appendVerdict(sb);
    return sb.toString();
  }

  /**
   * The report grouped per container: first one summary line per container (its verdict, its slots
   * as ALIVE/GONE/UNKNOWN, its first problem), then each container's findings, then the node's and
   * any pod's without a directory. {@code problemsOnly} leaves out OK and SKIP findings and
   * containers without a problem.
   */
  public String toText(List<Judgment.Container> containers, boolean problemsOnly) {
    StringBuilder sb = new StringBuilder();
    java.util.Set<Finding> placed = new java.util.HashSet<>();
    List<Judgment.Container> shown =
        containers.stream()
            .filter(c -> !problemsOnly || !c.problems().isEmpty())
            .sorted(
                java.util.Comparator.comparingInt((Judgment.Container c) -> -c.verdict().exitCode())
                    .thenComparing(Judgment.Container::key))
            .toList();
    sb.append("containers: ")
        .append(containers.size())
        .append(", with problems: ")
        .append(containers.stream().filter(c -> !c.problems().isEmpty()).count())
        .append(System.lineSeparator());
    for (Judgment.Container c : shown) {
      sb.append(
              String.format(
                  java.util.Locale.ROOT,
                  "  %-4s %s",
                  c.verdict().name(),
                  TenantText.clean(c.summary())))
          .append(System.lineSeparator());
    }
    for (Judgment.Container c : shown) {
      sb.append("== ")
          .append(TenantText.clean(c.key().dirName()))
          .append(": ")
          .append(c.verdict().name())
          .append(System.lineSeparator());
      String dir = c.key().dirName();
      for (Finding f : problemsOnly ? c.problems() : c.findings()) {
        // Per-device findings name their device ("device 0: ..."), the rest are the container's.
        appendFinding(
            sb,
            f,
            f.subject().startsWith(dir + " ")
                ? f.subject().substring(dir.length() + 1) + ": "
                : "");
      }
      placed.addAll(c.findings());
    }
    containers.forEach(c -> placed.addAll(c.findings()));
    java.util.Map<String, List<Finding>> rest = new java.util.TreeMap<>();
    for (Finding f : findings) {
      if (placed.contains(f) || (problemsOnly && !problem(f))) {
        continue;
      }
      rest.computeIfAbsent(f.subject(), k -> new ArrayList<>()).add(f);
    }
    for (var e : rest.entrySet()) {
      sb.append("== ").append(TenantText.clean(e.getKey())).append(System.lineSeparator());
      e.getValue().forEach(f -> appendFinding(sb, f, ""));
    }
    appendVerdict(sb);
    return sb.toString();
  }

  private static boolean problem(Finding f) {
    return f.severity() == Severity.WARN || f.severity() == Severity.FAIL;
  }

  private static void appendFinding(StringBuilder sb, Finding f, String where) {
    sb.append(
        String.format(
            java.util.Locale.ROOT,
            "[%-4s] %2d %-22s %s%s%n",
            f.severity().name(),
            f.check(),
            f.id(),
            TenantText.clean(where),
            TenantText.clean(f.summary())));
    appendEvidenceAndFix(sb, f);
  }

  /** Under a WARN or FAIL: its evidence and fix, indented. */
  private static void appendEvidenceAndFix(StringBuilder sb, Finding f) {
    if (!problem(f)) {
      return;
    }
    // Evidence quotes tenant names and paths: one line each, never an escape sequence.
    for (String line : f.evidence()) {
      sb.append("         evidence: ")
          .append(TenantText.clean(line))
          .append(System.lineSeparator());
    }
    sb.append("         fix: ").append(TenantText.clean(f.fix())).append(System.lineSeparator());
  }

  private void appendVerdict(StringBuilder sb) {
    long fails = findings.stream().filter(f -> f.severity() == Severity.FAIL).count();
    long warns = findings.stream().filter(f -> f.severity() == Severity.WARN).count();
    sb.append(
        String.format(
            java.util.Locale.ROOT,
            "verdict: %s (%d failure(s), %d warning(s), %d finding(s))%n",
            worst().name(),
            fails,
            warns,
            findings.size()));
  }

  /** The report as JSON: {@code {"at", "verdict", "exit_code", "findings": [...]}}. */
  public String toJson() {
    return toJson(List.of());
  }

  /**
   * The report as JSON with each container's verdict: {@code {"at", "verdict", "exit_code",
   * "containers": [{"pod_uid", "container", "verdict"}], "findings": [...]}}.
   */
  public String toJson(List<Judgment.Container> containers) {
    Map<String, Object> root = new LinkedHashMap<>();
    root.put("at", at.toString());
    root.put("verdict", worst().label());
    root.put("exit_code", exitCode());
    List<Object> cs = new ArrayList<>();
    for (Judgment.Container c : containers) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("pod_uid", c.key().podUid());
      m.put("container", c.key().containerName());
      m.put("verdict", c.verdict().label());
      m.put("processes", c.processes());
      cs.add(m);
    }
    root.put("containers", cs);
    List<Object> list = new ArrayList<>();
    for (Finding f : findings) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("check", f.check());
      m.put("id", f.id());
      m.put("severity", f.severity().label());
      m.put("subject", f.subject());
      m.put("summary", f.summary());
      m.put("evidence", f.evidence());
      m.put("fix", f.fix());
      list.add(m);
    }
    root.put("findings", list);
    return Json.write(root) + System.lineSeparator();
  }
}

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
      if (f.severity() == Severity.WARN || f.severity() == Severity.FAIL) {
        // Evidence quotes tenant names and paths: one line each, never an escape sequence.
        for (String line : f.evidence()) {
          sb.append("         evidence: ")
              .append(TenantText.clean(line))
              .append(System.lineSeparator());
        }
        sb.append("         fix: ")
            .append(TenantText.clean(f.fix()))
            .append(System.lineSeparator());
      }
    }
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
    return sb.toString();
  }

  /** The report as JSON: {@code {"at", "verdict", "exit_code", "findings": [...]}}. */
  public String toJson() {
    Map<String, Object> root = new LinkedHashMap<>();
    root.put("at", at.toString());
    root.put("verdict", worst().label());
    root.put("exit_code", exitCode());
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

package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import java.util.List;

/**
 * One leaf of the debugging guides' decision trees that can be decided from the node. A check is a
 * pure function of the evidence: it returns at least one finding (OK or SKIP when nothing is wrong)
 * so every check shows up in the report. Implementations are stateless and thread-safe.
 */
public interface DoctorCheck {
  /** The check's number, 1-17. */
  int number();

  /** Stable id, e.g. {@code lock-dead-holder}. */
  String id();

  /** What it checks, for the report. */
  String title();

  /** The findings; never empty. */
  List<Finding> evaluate(NodeEvidence evidence);

  /** A finding of this check. */
  default Finding finding(
      Severity severity, String subject, String summary, List<String> evidence, String fix) {
    return new Finding(number(), id(), severity, subject, summary, evidence, fix);
  }

  /** An OK finding. */
  default Finding ok(String subject, String summary, List<String> evidence) {
    return finding(Severity.OK, subject, summary, evidence, "");
  }

  /** A SKIP finding. */
  default Finding skip(String subject, String why) {
    return finding(Severity.SKIP, subject, why, List.of(), "");
  }
}

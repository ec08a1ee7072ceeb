package io.vgpu.exporter.doctor;

import java.util.List;
import java.util.Objects;

/**
 * One verdict of one doctor check about one subject.
 *
 * @param check the check's number (1-17: the debugging guides' leaves in order, then GPU processes
 *     without a slot)
 * @param id the check's stable id (e.g. {@code lock-dead-holder})
 * @param severity the verdict
 * @param subject what it is about: {@code node}, {@code pod <uid>} or {@code <uid>_<container>}
 * @param summary one line
 * @param evidence the facts behind the verdict
 * @param fix what to do; empty for OK/SKIP
 */
public record Finding(
    int check,
    String id,
    Severity severity,
    String subject,
    String summary,
    List<String> evidence,
    String fix) {
  public Finding {
    if (check < 1 || check > 17) {
      throw new IllegalArgumentException("check must be 1-17, was " + check);
    }
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(severity, "severity");
    Objects.requireNonNull(subject, "subject");
    Objects.requireNonNull(summary, "summary");
    evidence = List.copyOf(evidence);
    Objects.requireNonNull(fix, "fix");
  }
}

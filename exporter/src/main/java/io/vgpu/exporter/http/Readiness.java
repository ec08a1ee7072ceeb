package io.vgpu.exporter.http;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/** Aggregates {@link HealthCheck}s for /readyz. Thread-safe; checks can be added while serving. */
public final class Readiness {
  private final List<HealthCheck> checks = new CopyOnWriteArrayList<>();
  private final List<String> notes = new CopyOnWriteArrayList<>();

  /**
   * The outcome of all checks.
   *
   * @param ready no blocking problem
   * @param reasons every problem as "name: problem", blocking ones first
   * @param notes standing facts an operator must know, not problems (e.g. what the exporter writes)
   */
  public record Verdict(boolean ready, List<String> reasons, List<String> notes) {
    public Verdict {
      reasons = List.copyOf(reasons);
      notes = List.copyOf(notes);
    }

    public Verdict(boolean ready, List<String> reasons) {
      this(ready, reasons, List.of());
    }
  }

  /** Adds a standing fact shown with every verdict ({@code /readyz}, the status page). */
  public Readiness note(String note) {
    notes.add(note);
    return this;
  }

  public Readiness add(HealthCheck check) {
    checks.add(check);
    return this;
  }

  public Verdict verdict() {
    List<String> blocking = new ArrayList<>();
    List<String> warnings = new ArrayList<>();
    for (HealthCheck c : checks) {
      c.problem()
          .ifPresent(p -> (c.blocksReadiness() ? blocking : warnings).add(c.name() + ": " + p));
    }
    List<String> all = new ArrayList<>(blocking);
    all.addAll(warnings);
    return new Verdict(blocking.isEmpty(), all, notes);
  }
}

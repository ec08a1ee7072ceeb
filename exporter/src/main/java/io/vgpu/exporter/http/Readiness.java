package io.vgpu.exporter.http;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/** Aggregates {@link HealthCheck}s for /readyz. Thread-safe; checks can be added while serving. */
public final class Readiness {
  private final List<HealthCheck> checks = new CopyOnWriteArrayList<>();

  /**
   * The outcome of all checks.
   *
   * @param ready no blocking problem
   * @param reasons every problem as "name: problem", blocking ones first
   */
  public record Verdict(boolean ready, List<String> reasons) {
    public Verdict {
      reasons = List.copyOf(reasons);
    }
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
    return new Verdict(blocking.isEmpty(), all);
  }
}

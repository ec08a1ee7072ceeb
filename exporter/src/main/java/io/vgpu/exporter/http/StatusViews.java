package io.vgpu.exporter.http;

import io.javalin.http.Context;
import io.vgpu.exporter.node.NodeState;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.Semaphore;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * {@code /} and {@code /api/v1/containers}. Building the status model costs one pass over the
 * regions and the pod processes' procfs entries (maps, environ), so it is computed at most once per
 * {@code maxAge} by one thread and shared by both views and every viewer; and at most {@link
 * #MAX_CONCURRENT} requests are inside these handlers at once: the rest get 503 at once, so that
 * viewers can never occupy the threads and memory {@code /metrics}, {@code /healthz} and {@code
 * /readyz} need. Thread-safe.
 */
final class StatusViews {
  /** Requests inside the status handlers at once; more answer 503 without waiting. */
  static final int MAX_CONCURRENT = 2;

  private final Supplier<NodeState> states;
  private final StatusPage page;
  private final Readiness readiness;
  private final String version;
  private final long maxAgeNanos;
  private final LongSupplier nanoTime;
  private final Semaphore permits = new Semaphore(MAX_CONCURRENT);
  private final Object lock = new Object();
  private Computed last; // guarded by lock
  private long computations; // guarded by lock

  /** One shared computation; its JSON is made on first demand. */
  private static final class Computed {
    final long atNanos;
    final NodeState state;
    final StatusModel model;
    String json; // guarded by StatusViews.lock

    Computed(long atNanos, NodeState state, StatusModel model) {
      this.atNanos = atNanos;
      this.state = state;
      this.model = model;
    }
  }

  StatusViews(
      Supplier<NodeState> states,
      StatusPage page,
      Readiness readiness,
      String version,
      Duration maxAge,
      LongSupplier nanoTime) {
    this.states = Objects.requireNonNull(states, "states");
    this.page = Objects.requireNonNull(page, "page");
    this.readiness = Objects.requireNonNull(readiness, "readiness");
    this.version = Objects.requireNonNull(version, "version");
    this.maxAgeNanos = maxAge.toNanos();
    this.nanoTime = Objects.requireNonNull(nanoTime, "nanoTime");
  }

  void html(Context ctx) {
    if (!enter(ctx)) {
      return;
    }
    try {
      Computed c = current();
      Readiness.Verdict v = readiness.verdict();
      StatusModel m = c.model;
      StatusModel now = m.withReadiness(v.ready(), v.reasons());
      ctx.contentType("text/html; charset=utf-8")
          .header("Content-Security-Policy", StatusPage.CONTENT_SECURITY_POLICY)
          .result(StatusPage.render(now));
    } finally {
      permits.release();
    }
  }

  void json(Context ctx) {
    if (!enter(ctx)) {
      return;
    }
    try {
      String json;
      synchronized (lock) {
        Computed c = currentLocked();
        if (c.json == null) {
          c.json = ContainersView.json(c.state, c.model);
        }
        json = c.json;
      }
      ctx.contentType("application/json").result(json);
    } finally {
      permits.release();
    }
  }

  private boolean enter(Context ctx) {
    if (permits.tryAcquire()) {
      return true;
    }
    ctx.status(503)
        .header("Retry-After", "1")
        .contentType("text/plain")
        .result("busy: the status views serve " + MAX_CONCURRENT + " requests at a time\n");
    return false;
  }

  private Computed current() {
    synchronized (lock) {
      return currentLocked();
    }
  }

  /**
   * Caller holds lock: a second viewer waits for the first's computation instead of repeating it.
   */
  private Computed currentLocked() {
    long now = nanoTime.getAsLong();
    if (last == null || now - last.atNanos > maxAgeNanos) {
      NodeState state = states.get();
      Readiness.Verdict v = readiness.verdict();
      last =
          new Computed(now, state, page.model(state, v.ready(), v.reasons(), version, v.notes()));
      computations++;
    }
    return last;
  }

  /** How many times the model was computed (tests: shared, not per request). */
  long computations() {
    synchronized (lock) {
      return computations;
    }
  }
}

package io.vgpu.exporter.k8s;

import java.time.Duration;
import java.util.Objects;
import java.util.function.LongSupplier;
import org.slf4j.Logger;

/**
 * One WARN per problem, repeated with exponential back-off while it lasts: a steady failure (the
 * API server unreachable for hours) costs a few log lines an hour, not one per retry, and each line
 * says how often it happened since the last one. A different problem is reported at once; the end
 * of one is reported once at INFO. Thread-safe.
 */
public final class ProblemLog {
  static final Duration FIRST_REPEAT = Duration.ofMinutes(1);
  static final Duration MAX_REPEAT = Duration.ofHours(1);

  private final Logger log;
  private final String message;
  private final LongSupplier nanoTime;
  private String current; // guarded by this
  private long nextNanos; // guarded by this
  private long gapNanos; // guarded by this
  private long suppressed; // guarded by this

  /**
   * @param message the log line's message, e.g. "pod informer error"
   */
  public ProblemLog(Logger log, String message, LongSupplier nanoTime) {
    this.log = Objects.requireNonNull(log, "log");
    this.message = Objects.requireNonNull(message, "message");
    this.nanoTime = Objects.requireNonNull(nanoTime, "nanoTime");
  }

  /**
   * Reports {@code problem} now, or counts it until its next report is due.
   *
   * @param fix what the operator can do about it, logged with every report
   */
  public synchronized void problem(String node, String problem, String fix) {
    long now = nanoTime.getAsLong();
    if (problem.equals(current) && now - nextNanos < 0) {
      suppressed++;
      return;
    }
    if (problem.equals(current)) {
      gapNanos = Math.min(gapNanos * 2, MAX_REPEAT.toNanos());
    } else {
      gapNanos = FIRST_REPEAT.toNanos();
    }
    var line =
        log.atWarn()
            .setMessage(message + ", retrying with back-off")
            .addKeyValue("node", node)
            .addKeyValue("error", problem)
            .addKeyValue("fix", fix);
    if (problem.equals(current)) {
      line = line.addKeyValue("repeated", suppressed + 1);
    }
    line.addKeyValue("next_report_in", Duration.ofNanos(gapNanos).toSeconds() + "s").log();
    current = problem;
    suppressed = 0;
    nextNanos = now + gapNanos;
  }

  /** The problem is over: one INFO line if one was reported, and the back-off starts afresh. */
  public synchronized void recovered(String node) {
    if (current == null) {
      return;
    }
    log.atInfo()
        .setMessage(message + " cleared")
        .addKeyValue("node", node)
        .addKeyValue("after_repeats", suppressed)
        .log();
    current = null;
    suppressed = 0;
  }
}

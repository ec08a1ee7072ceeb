package io.vgpu.exporter.loops;

import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.util.Objects;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Supervises one background loop (discovery's rescan, the attribution pass): {@link #run} executes
 * a pass and catches everything it throws, {@code Error}s included, so a periodic executor keeps
 * scheduling the loop (an executor silently drops a task that throws once, which is how an {@code
 * OutOfMemoryError} used to end the attribution task and the rescan for good). While the latest
 * pass failed, or no pass finished for {@code stuckAfter}, {@link #problem} says why, and /readyz
 * turns unready with that reason until a pass succeeds again. Thread-safe.
 */
public final class LoopHealth {
  private static final Logger LOG = LoggerFactory.getLogger(LoopHealth.class);

  private final String name;
  private final Duration stuckAfter;
  private final InstantSource clock;
  private final Instant created;
  private volatile Instant lastSuccess;
  private volatile Instant failedAt;
  private volatile String failure;
  private volatile Instant passStarted;

  /**
   * @param name the loop, as readiness reasons name it
   * @param stuckAfter a pass in progress for longer than this (or no success for longer) is
   *     reported as stuck
   * @param clock time source
   */
  public LoopHealth(String name, Duration stuckAfter, InstantSource clock) {
    this.name = Objects.requireNonNull(name, "name");
    this.stuckAfter = Objects.requireNonNull(stuckAfter, "stuckAfter");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.created = clock.instant();
  }

  public String name() {
    return name;
  }

  /** Runs one pass; never throws. */
  public void run(Runnable pass) {
    passStarted = clock.instant();
    try {
      pass.run();
      lastSuccess = clock.instant();
      failure = null;
      failedAt = null;
    } catch (Throwable t) { // an Error must not end the loop (see class comment)
      if (failure == null) {
        failedAt = clock.instant();
      }
      failure = t.getClass().getSimpleName() + (t.getMessage() == null ? "" : ": " + oneLine(t));
      try {
        LOG.atError()
            .setMessage("pass failed; retrying on its schedule")
            .addKeyValue("loop", name)
            .addKeyValue("reason", failure)
            .setCause(t)
            .log();
      } catch (Throwable logging) { // logging itself may fail when memory is short
        // nothing else to do; the readiness reason carries the failure
      }
    } finally {
      passStarted = null;
    }
  }

  private static String oneLine(Throwable t) {
    String m = t.getMessage();
    m = m.length() > 200 ? m.substring(0, 200) + "..." : m;
    return m.replaceAll("[\\p{Cntrl}]", " ");
  }

  /** What is wrong with the loop now, or empty. */
  public Optional<String> problem() {
    Instant now = clock.instant();
    String f = failure;
    if (f != null) {
      return Optional.of(name + " loop failing since " + failedAt + ": " + f);
    }
    Instant started = passStarted;
    if (started != null && Duration.between(started, now).compareTo(stuckAfter) > 0) {
      return Optional.of(name + " loop stuck: pass running since " + started);
    }
    Instant ok = lastSuccess;
    Instant since = ok != null ? ok : created;
    if (Duration.between(since, now).compareTo(stuckAfter) > 0) {
      return Optional.of(
          name + " loop has not finished a pass since " + (ok != null ? ok : "start"));
    }
    return Optional.empty();
  }

  /** The latest failure's description, while the loop is failing (tests, logs). */
  public Optional<String> failure() {
    return Optional.ofNullable(failure);
  }
}

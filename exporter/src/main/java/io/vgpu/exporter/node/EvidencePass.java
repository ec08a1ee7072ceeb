package io.vgpu.exporter.node;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * Gathers the node's evidence (regions, the pods' procfs entries, NVML's latest snapshot) in the
 * background, once per {@code interval}, and keeps the latest pass with its slot liveness. Every
 * surface of the running exporter renders this one pass: the status page and {@code
 * /api/v1/containers} judge it, and {@code /metrics} reads its {@link SlotFates}. A scrape never
 * walks procfs: it reads the latest pass, computed off the scrape path.
 *
 * <p>Thread-safe: the latest pass is one volatile immutable value; passes run one at a time.
 */
public final class EvidencePass implements AutoCloseable {

  /**
   * One pass: the container directories it covered, its evidence and the slot liveness computed
   * from it.
   */
  public record Pass(List<Path> dirs, NodeEvidence evidence, SlotFates fates) {
    public Pass {
      dirs = List.copyOf(dirs);
      Objects.requireNonNull(evidence, "evidence");
      Objects.requireNonNull(fates, "fates");
    }
  }

  private final Supplier<List<Path>> dirs;
  private final Function<List<Path>, NodeEvidence> gather;
  private final Duration interval;
  private final ReentrantLock running = new ReentrantLock();
  private volatile Optional<Pass> latest = Optional.empty();
  private ScheduledExecutorService executor;
  private final io.vgpu.exporter.loops.LoopHealth health;

  /**
   * @param dirs the node's container directories now (discovery's latest pass)
   * @param gather one evidence collection over container directories (no sampling window)
   * @param interval time between passes
   */
  public EvidencePass(
      Supplier<List<Path>> dirs, Function<List<Path>, NodeEvidence> gather, Duration interval) {
    this(dirs, gather, interval, java.time.InstantSource.system());
  }

  /**
   * @param clock what the loop's health measures a pass's duration with (the exporter's clock)
   */
  public EvidencePass(
      Supplier<List<Path>> dirs,
      Function<List<Path>, NodeEvidence> gather,
      Duration interval,
      java.time.InstantSource clock) {
    this.dirs = Objects.requireNonNull(dirs, "dirs");
    this.gather = Objects.requireNonNull(gather, "gather");
    this.interval = Objects.requireNonNull(interval, "interval");
    if (interval.isNegative() || interval.isZero()) {
      throw new IllegalArgumentException("interval must be positive");
    }
    // A pass reads tenant files with per-file deadlines, so a pass that runs this long is stuck
    // somewhere no deadline reaches: readiness says so (and a metric), the old pass stays shown.
    Duration stuck = interval.multipliedBy(3);
    this.health =
        new io.vgpu.exporter.loops.LoopHealth(
            "evidence",
            stuck.compareTo(MIN_STUCK) < 0 ? MIN_STUCK : stuck,
            Objects.requireNonNull(clock, "clock"));
  }

  /** A pass or a silence shorter than this is never reported as a stuck loop. */
  static final Duration MIN_STUCK = Duration.ofMinutes(1);

  /** The background loop's health: stuck in a pass, or failing (readiness, metrics). */
  public io.vgpu.exporter.loops.LoopHealth loopHealth() {
    return health;
  }

  /** The latest pass; empty before the first one finished. */
  public Optional<Pass> latest() {
    return latest;
  }

  /** The latest pass's slot liveness; {@link SlotFates#NOT_JUDGED} before the first pass. */
  public SlotFates fates() {
    return latest.map(Pass::fates).orElse(SlotFates.NOT_JUDGED);
  }

  /**
   * The latest pass when it covered exactly {@code containerDirs}; otherwise (no pass yet, or
   * discovery found or lost a directory since) one run now over them and published, so the view
   * that asked and the metrics after it judge the same containers.
   */
  public Pass covering(List<Path> containerDirs) {
    Optional<Pass> l = latest;
    if (l.isPresent() && l.get().dirs().equals(containerDirs)) {
      return l.get();
    }
    try {
      if (!running.tryLock(COVERING_WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
        // A pass has run this long: it may be stuck where no read deadline reaches (readiness
        // says so). The viewer gets the latest pass rather than a request thread blocked with it.
        l = latest;
        if (l.isPresent()) {
          return l.get();
        }
        running.lock();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted waiting for the evidence pass", e);
    }
    try {
      return runLocked(containerDirs);
    } finally {
      running.unlock();
    }
  }

  /** How long a view waits for a running pass before it renders the latest one instead. */
  static final Duration COVERING_WAIT = Duration.ofSeconds(5);

  /** Runs one pass now over discovery's directories and publishes it. */
  public Pass runOnce() {
    return runOnce(dirs.get());
  }

  private Pass runOnce(List<Path> containerDirs) {
    running.lock();
    try {
      return runLocked(containerDirs);
    } finally {
      running.unlock();
    }
  }

  private Pass runLocked(List<Path> containerDirs) {
    NodeEvidence e = gather.apply(containerDirs);
    Pass p = new Pass(containerDirs, e, SlotFates.of(e));
    latest = Optional.of(p);
    return p;
  }

  /**
   * Starts the background passes: the first at once, then one per {@code interval}, and sooner
   * (within {@link #CHECK}) when discovery finds or loses a container directory, so a new
   * container's slots are not left UNKNOWN for a whole interval.
   */
  public synchronized EvidencePass start() {
    if (executor == null) {
      executor =
          Executors.newSingleThreadScheduledExecutor(
              r -> Thread.ofPlatform().daemon().name("evidence-pass").unstarted(r));
      long every = Math.min(CHECK.toMillis(), interval.toMillis());
      var _ = executor.scheduleWithFixedDelay(this::tick, 0, every, TimeUnit.MILLISECONDS);
    }
    return this;
  }

  /** How often the loop compares discovery's directories with the latest pass's. */
  static final Duration CHECK = Duration.ofSeconds(1);

  private long lastRunNanos;

  private void tick() {
    List<Path> now = dirs.get();
    Optional<Pass> l = latest;
    boolean due =
        l.isEmpty()
            || !l.get().dirs().equals(now)
            || System.nanoTime() - lastRunNanos >= interval.toNanos();
    if (!due) {
      return;
    }
    lastRunNanos = System.nanoTime();
    // The previous pass stays published when one fails; the next one tries again.
    health.run(() -> runOnce(now));
  }

  @Override
  public synchronized void close() {
    if (executor != null) {
      executor.shutdownNow();
      executor = null;
    }
  }
}

package io.vgpu.exporter.nvml;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Per-process SM utilization of one GPU averaged over a sliding time window, from NVML's
 * per-process samples.
 *
 * <p>Each sample reports the share of its sample period during which the process had kernels
 * running, so it covers the time back to the process's previous sample, capped at one sample period
 * (the period is the device's sampling interval, estimated from the timestamps of all its samples;
 * NVML emits one every ~200 ms on current drivers). The cap matters when processes time-slice one
 * GPU: each then gets samples only for the periods it ran in, and letting a sample cover the whole
 * gap to its predecessor would inflate a process that runs one period in four. Time no sample
 * covers counts as idle: NVML stops emitting samples for a process that launches nothing. The
 * window ends at the newest sample of the device (NVML publishes samples a little late; ending at
 * "now" would bias every value low), or at "now" once the device has been silent for longer than
 * two periods and at least 2 s.
 *
 * <p>Not thread safe: owned by the sampler thread.
 */
final class UtilizationWindow {
  private static final long DEFAULT_PERIOD_MICROS = 1_000_000;
  private static final long MIN_PERIOD_MICROS = 50_000;
  private static final long MAX_PERIOD_MICROS = 2_000_000;
  private static final long SILENT_AFTER_MICROS = 2_000_000;

  private final long windowMicros;
  private final long pollMicros;
  private final Map<Integer, Deque<ProcessSample>> byPid = new HashMap<>();
  private long lastSeenMicros;

  UtilizationWindow(Duration window) {
    this(window, Duration.ZERO);
  }

  /**
   * @param pollInterval how often the caller queries NVML. NVML answers each query with one sample
   *     per process, the one of the latest period, so a sample then stands for the whole interval
   *     since the previous query (a sampling estimate), not only for its own period.
   */
  UtilizationWindow(Duration window, Duration pollInterval) {
    if (window.isNegative() || window.isZero()) {
      throw new IllegalArgumentException("window must be positive, got " + window);
    }
    if (pollInterval.isNegative()) {
      throw new IllegalArgumentException("pollInterval must not be negative, got " + pollInterval);
    }
    this.windowMicros = window.toNanos() / 1000;
    this.pollMicros = pollInterval.toNanos() / 1000;
  }

  /** The newest sample timestamp seen: the {@code lastSeenTimeStamp} for the next query. */
  long lastSeenMicros() {
    return lastSeenMicros;
  }

  /** Adds samples; duplicates and samples older than the pid's newest are ignored. */
  void add(Collection<ProcessSample> samples) {
    List<ProcessSample> sorted = new ArrayList<>(samples);
    sorted.sort((a, b) -> Long.compare(a.timestampMicros(), b.timestampMicros()));
    for (ProcessSample s : sorted) {
      Deque<ProcessSample> q = byPid.computeIfAbsent(s.pid(), p -> new ArrayDeque<>());
      if (q.isEmpty() || q.peekLast().timestampMicros() < s.timestampMicros()) {
        q.addLast(s);
      }
      lastSeenMicros = Math.max(lastSeenMicros, s.timestampMicros());
    }
  }

  /**
   * Mean SM utilization (0-1) per pid over the window ending at {@code nowMicros}, for every pid
   * with a retained sample; forgets samples too old to matter.
   */
  Map<Integer, Double> averages(long nowMicros) {
    long period = estimatePeriod();
    long silentAfter = Math.max(2 * period, SILENT_AFTER_MICROS);
    long end =
        lastSeenMicros >= nowMicros - silentAfter ? Math.min(nowMicros, lastSeenMicros) : nowMicros;
    long start = end - windowMicros;
    long cap = Math.max(period, pollMicros);
    prune(start - 2 * cap);
    Map<Integer, Double> out = new HashMap<>();
    for (Map.Entry<Integer, Deque<ProcessSample>> e : byPid.entrySet()) {
      double weighted = 0;
      long previous = Long.MIN_VALUE;
      for (ProcessSample s : e.getValue()) {
        long t = s.timestampMicros();
        long from = Math.max(previous == Long.MIN_VALUE ? t - cap : previous, t - cap);
        long overlap = Math.min(t, end) - Math.max(from, start);
        if (overlap > 0) {
          weighted += s.smPercent() * (double) overlap;
        }
        previous = t;
      }
      out.put(e.getKey(), Math.clamp(weighted / windowMicros / 100.0, 0.0, 1.0));
    }
    return out;
  }

  private void prune(long before) {
    byPid
        .values()
        .forEach(
            q -> {
              // keep the newest sample before the cut: it bounds the next one's coverage
              while (q.size() > 1 && q.peekFirst().timestampMicros() < before) {
                q.pollFirst();
              }
            });
    byPid.values().removeIf(q -> q.peekLast().timestampMicros() < before);
  }

  /**
   * Median gap between the device's sampling ticks. Processes' samples of one tick carry slightly
   * different timestamps (tens of microseconds apart on an H200), so stamps closer than the
   * shortest plausible period are one tick.
   */
  private long estimatePeriod() {
    TreeSet<Long> stamps = new TreeSet<>();
    byPid.values().forEach(q -> q.forEach(s -> stamps.add(s.timestampMicros())));
    List<Long> gaps = new ArrayList<>(stamps.size());
    long tick = -1;
    for (long t : stamps) {
      if (tick < 0) {
        tick = t;
      } else if (t - tick >= MIN_PERIOD_MICROS) {
        gaps.add(t - tick);
        tick = t;
      }
    }
    if (gaps.size() < 3) {
      return DEFAULT_PERIOD_MICROS;
    }
    gaps.sort(null);
    return Math.clamp(gaps.get(gaps.size() / 2), MIN_PERIOD_MICROS, MAX_PERIOD_MICROS);
  }
}

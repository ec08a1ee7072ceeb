package io.vgpu.exporter.nvml;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;

/**
 * What usage accounting needs from NVML between two of its passes: every per-process SM sample
 * counted exactly once, and the energy each GPU used.
 *
 * <p>SM busy: a sample of pid {@code p} at time {@code t} with {@code sm} percent stands for {@code
 * sm/100} of the time since the pid's previous sample when that is one sampling period {@code P} of
 * the GPU (up to 1.5 P: NVML's ticks jitter), else of one period (see {@link #covered}); a pid's
 * first sample covers {@code P}. The cap is what keeps a pulsed process, or one that NVML's coarse
 * hand-overs between time-sliced contexts skip for a while, from being credited with the time it
 * did not run: NVML emits no sample for a period a process launched nothing in. The period {@code
 * P} is estimated from the GPU's own sampling ticks ({@link #addDeviceTicks}: NVML's device
 * utilization samples, one every period whether or not a process ran), else from the ticks of the
 * per-process samples, then never above the default (see {@link #period}); or fixed up front. A
 * sample is counted once: a pid's samples at or before the newest one counted are duplicates
 * (overlapping read windows return them again) and are dropped, so readers may re-read with a
 * margin to catch samples NVML published late, and nothing is counted twice.
 *
 * <p>Energy: each reading of the GPU's total energy counter adds its increase since the previous
 * reading; the first reading, and one after the counter went backwards (driver reload) or after
 * NVML was down ({@link #lost()}), only sets the baseline: energy nobody watched is not invented.
 *
 * <p>Bounds: a device keeps the cursors of pids sampled within {@link #HORIZON_MICROS} of its
 * newest sample, at most {@link #MAX_PIDS} (the stalest cursor is forgotten first; a forgotten
 * pid's next sample counts one period, as any first sample); samples older than the horizon are not
 * counted, since whether they were counted before can no longer be told ({@link #staleSamples()}).
 *
 * <p>Thread safety: all methods are synchronized; the sampler adds, the accounting pass drains.
 */
public final class UsageLedger {
  /** How far back a device's pid cursors reach, microseconds. */
  static final long HORIZON_MICROS = 120_000_000L;

  /** Pid cursors kept per device. */
  static final int MAX_PIDS = 8192;

  private static final long MIN_PERIOD_MICROS = 50_000;
  private static final long MAX_PERIOD_MICROS = 2_000_000;
  private static final int TICKS_KEPT = 33;

  /** Device ticks older than this behind the newest sample no longer speak for the period. */
  private static final long DEVICE_TICKS_FRESH_MICROS = 5_000_000;

  private final long defaultPeriodMicros;
  private final boolean estimatePeriod;
  private final Map<String, Device> devices = new HashMap<>();
  private long staleSamples;

  /** {@code defaultPeriodMicros} is clamped to [50 ms, 2 s], the periods NVML samples at. */
  private UsageLedger(long defaultPeriodMicros, boolean estimatePeriod) {
    this.defaultPeriodMicros =
        Math.clamp(defaultPeriodMicros, MIN_PERIOD_MICROS, MAX_PERIOD_MICROS);
    this.estimatePeriod = estimatePeriod;
  }

  /**
   * Estimates each GPU's sampling period from its ticks; {@code initial} until 3 gaps are seen, and
   * at most {@code initial} while the GPU gives no device ticks.
   */
  public static UsageLedger estimating(Duration initial) {
    return new UsageLedger(initial.toNanos() / 1000, true);
  }

  /** Takes {@code period} as every GPU's sampling period. */
  public static UsageLedger fixedPeriod(Duration period) {
    return new UsageLedger(period.toNanos() / 1000, false);
  }

  /**
   * What one device did since the previous drain.
   *
   * @param busyPercentMicros per pid, Σ sm percent × covered microseconds of the samples counted
   * @param energyMillijoules the energy counter's increase over readings since the last drain;
   *     empty when the device gave no two readings to compare (no support, first reading, reset)
   * @param energyMicros the time those readings span (the interval the energy belongs to)
   */
  public record Drained(
      Map<Integer, Long> busyPercentMicros, OptionalLong energyMillijoules, long energyMicros) {
    public Drained {
      busyPercentMicros = Map.copyOf(busyPercentMicros);
      Objects.requireNonNull(energyMillijoules, "energyMillijoules");
    }
  }

  private static final class Device {
    final Map<Integer, Long> lastCounted = new HashMap<>();
    final Map<Integer, Long> pending = new HashMap<>();
    final Ticks ticks = new Ticks();
    final Ticks deviceTicks = new Ticks();
    long newest;
    long energyBaseline = -1;
    long energyBaselineMicros;
    long pendingEnergy;
    long pendingEnergyMicros;
    boolean energyDelta;
  }

  /** Counts the samples of device {@code uuid} not counted before. */
  public synchronized void addSamples(String uuid, Collection<ProcessSample> samples) {
    if (samples.isEmpty()) {
      return;
    }
    Device d = devices.computeIfAbsent(uuid, u -> new Device());
    List<ProcessSample> sorted = new ArrayList<>(samples);
    sorted.sort((a, b) -> Long.compare(a.timestampMicros(), b.timestampMicros()));
    for (ProcessSample s : sorted) {
      long t = s.timestampMicros();
      if (d.newest - t > HORIZON_MICROS) {
        staleSamples++;
        continue;
      }
      Long prev = d.lastCounted.get(s.pid());
      if (prev != null && t <= prev) {
        continue; // counted before: an overlapping read
      }
      d.ticks.add(t);
      d.newest = Math.max(d.newest, t);
      long period = period(d);
      long covered = prev == null ? period : covered(t - prev, period);
      d.lastCounted.put(s.pid(), t);
      d.pending.merge(s.pid(), s.smPercent() * covered, Long::sum);
    }
    forgetOld(d);
  }

  /**
   * Timestamps of device {@code uuid}'s own sampling ticks (NVML's device utilization samples, one
   * each period whether or not a process ran): what the sampling period is estimated from. Add them
   * before the per-process samples of the same read. Repeats and late ones are ignored.
   */
  public synchronized void addDeviceTicks(String uuid, Collection<Long> timestampsMicros) {
    if (timestampsMicros.isEmpty()) {
      return;
    }
    Device d = devices.computeIfAbsent(uuid, u -> new Device());
    timestampsMicros.stream().sorted().forEach(d.deviceTicks::add);
  }

  /** One reading of device {@code uuid}'s total energy counter, taken at {@code atMicros}. */
  public synchronized void energy(String uuid, long totalMillijoules, long atMicros) {
    Device d = devices.computeIfAbsent(uuid, u -> new Device());
    if (d.energyBaseline >= 0
        && totalMillijoules >= d.energyBaseline
        && atMicros >= d.energyBaselineMicros) {
      d.pendingEnergy += totalMillijoules - d.energyBaseline;
      d.pendingEnergyMicros += atMicros - d.energyBaselineMicros;
      d.energyDelta = true;
    }
    d.energyBaseline = totalMillijoules;
    d.energyBaselineMicros = atMicros;
  }

  /**
   * NVML went down: energy baselines are dropped (the energy used while nobody watched is not given
   * to anyone); pid cursors stay, so samples read again after recovery are not doubled.
   */
  public synchronized void lost() {
    devices.values().forEach(d -> d.energyBaseline = -1);
  }

  /** Takes what was counted since the previous drain, by device uuid. */
  public synchronized Map<String, Drained> drain() {
    Map<String, Drained> out = new HashMap<>();
    devices.forEach(
        (uuid, d) -> {
          if (!d.pending.isEmpty() || d.energyDelta) {
            out.put(
                uuid,
                new Drained(
                    d.pending,
                    d.energyDelta ? OptionalLong.of(d.pendingEnergy) : OptionalLong.empty(),
                    d.pendingEnergyMicros));
          }
          d.pending.clear();
          d.pendingEnergy = 0;
          d.pendingEnergyMicros = 0;
          d.energyDelta = false;
        });
    return out;
  }

  /** Samples dropped because they were older than the horizon. */
  public synchronized long staleSamples() {
    return staleSamples;
  }

  /**
   * The device's sampling period. From its own ticks when it gives them (recent ones: within {@link
   * #DEVICE_TICKS_FRESH_MICROS} of its newest sample), as they come every period. Otherwise from
   * the per-process samples' ticks, never above the default period: a tick no process ran in leaves
   * no sample, so a sparse process alone on the GPU (never in two consecutive ticks) shows only
   * gaps of two periods or more, and a period read that long would credit each of its samples with
   * twice the time it ran. Capping means a GPU sampling slower than the default is under-credited
   * (each sample covers at most the default period) rather than over-billed.
   */
  private long period(Device d) {
    if (!estimatePeriod) {
      return defaultPeriodMicros;
    }
    if (d.deviceTicks.count >= 4 && d.deviceTicks.last() >= d.newest - DEVICE_TICKS_FRESH_MICROS) {
      return d.deviceTicks.period().orElse(defaultPeriodMicros);
    }
    return Math.min(defaultPeriodMicros, d.ticks.period().orElse(defaultPeriodMicros));
  }

  /** The newest {@link #TICKS_KEPT} sampling ticks of one device. */
  private static final class Ticks {
    final long[] ring = new long[TICKS_KEPT];
    int count;

    long last() {
      return count == 0 ? Long.MIN_VALUE : ring[(count - 1) % TICKS_KEPT];
    }

    /** Samples of one tick lie microseconds apart: one tick. A late one is ignored. */
    void add(long t) {
      if (count > 0 && (Math.abs(t - last()) < MIN_PERIOD_MICROS || t < last())) {
        return;
      }
      ring[count % TICKS_KEPT] = t;
      count++;
    }

    /**
     * The median of the recent one-period gaps; empty below 3 gaps. A tick no process ran in leaves
     * no per-process sample, so those gaps are whole multiples of the period; the ones within 1.5
     * times the shortest are one period each (NVML's ticks jitter by a few percent: 196-204 ms on
     * an H200, so the shortest alone would read the period 1.5 % short).
     */
    OptionalLong period() {
      int n = Math.min(count, TICKS_KEPT);
      if (n < 4) {
        return OptionalLong.empty();
      }
      long[] gaps = new long[n - 1];
      int start = count - n;
      long shortest = Long.MAX_VALUE;
      for (int i = 1; i < n; i++) {
        gaps[i - 1] = ring[(start + i) % TICKS_KEPT] - ring[(start + i - 1) % TICKS_KEPT];
        shortest = Math.min(shortest, gaps[i - 1]);
      }
      Arrays.sort(gaps);
      int single = 0;
      while (single < gaps.length && gaps[single] <= shortest * 3 / 2) {
        single++;
      }
      return OptionalLong.of(Math.clamp(gaps[single / 2], MIN_PERIOD_MICROS, MAX_PERIOD_MICROS));
    }
  }

  /**
   * The time a sample {@code gap} after the pid's previous one stands for: the gap itself when it
   * is one period (within 1.5 periods, NVML's ticks jitter), one period when periods were skipped
   * (the process ran in none of them).
   */
  static long covered(long gap, long period) {
    return gap <= period * 3 / 2 ? gap : period;
  }

  private static void forgetOld(Device d) {
    d.lastCounted.values().removeIf(t -> d.newest - t > HORIZON_MICROS);
    if (d.lastCounted.size() > MAX_PIDS) {
      List<Map.Entry<Integer, Long>> byAge = new ArrayList<>(d.lastCounted.entrySet());
      byAge.sort(Map.Entry.comparingByValue());
      Iterator<Map.Entry<Integer, Long>> it = byAge.iterator();
      for (int excess = d.lastCounted.size() - MAX_PIDS; excess > 0 && it.hasNext(); excess--) {
        d.lastCounted.remove(it.next().getKey());
      }
    }
  }
}

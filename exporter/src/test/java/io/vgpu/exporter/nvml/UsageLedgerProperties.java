package io.vgpu.exporter.nvml;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;

/**
 * The ledger counts every NVML per-process sample exactly once, whatever read windows deliver them:
 * random workloads on one GPU (pids time-slicing, handing the GPU over, pulsing, idling), read in
 * random windows that overlap by a random margin and repeat samples, drained at random moments. The
 * sum of what was drained per pid must equal an independent integral over the unique samples.
 */
class UsageLedgerProperties {
  private static final long P = 200_000; // the GPU's sampling period, µs
  private static final long T0 = 1_700_000_000_000_000L; // the workload's first tick, on P's grid

  /** A random workload: per tick, which pids ran and how busy; each sample stamped by its pid. */
  static List<ProcessSample> workload(Random r, int ticks, int pids) {
    List<ProcessSample> out = new ArrayList<>();
    long t0 = T0;
    int owner = 1;
    for (int i = 0; i < ticks; i++) {
      if (r.nextInt(8) == 0) {
        owner = 1 + r.nextInt(pids); // a coarse hand-over: another context gets the GPU
      }
      for (int pid = 1; pid <= pids; pid++) {
        boolean runs =
            switch (pid % 3) {
              case 0 -> pid == owner || r.nextInt(4) == 0; // saturating, time-sliced
              case 1 -> r.nextInt(5) < 2; // pulsed
              default -> r.nextInt(20) == 0; // mostly idle
            };
        if (runs) {
          long jitter = r.nextInt(100); // one tick's samples lie microseconds apart
          out.add(new ProcessSample(pid, t0 + i * P + jitter, r.nextInt(101), r.nextInt(101)));
        }
      }
    }
    return out;
  }

  /**
   * The GPU's own sampling ticks over the workload (NVML's device utilization samples): one every
   * period, whether or not a process ran, on the grid the per-process samples lie on.
   */
  static List<Long> deviceTicks(List<ProcessSample> samples) {
    long last = samples.stream().mapToLong(ProcessSample::timestampMicros).max().orElse(T0);
    List<Long> out = new ArrayList<>();
    for (long t = T0; t <= last; t += P) {
      out.add(t);
    }
    return out;
  }

  /**
   * The integral the ledger must reproduce: Σ sm × (one-period gap to the pid's previous sample,
   * else P).
   */
  static Map<Integer, Long> reference(List<ProcessSample> samples) {
    Map<Integer, List<ProcessSample>> byPid = new TreeMap<>();
    samples.forEach(s -> byPid.computeIfAbsent(s.pid(), p -> new ArrayList<>()).add(s));
    Map<Integer, Long> out = new TreeMap<>();
    byPid.forEach(
        (pid, list) -> {
          list.sort((a, b) -> Long.compare(a.timestampMicros(), b.timestampMicros()));
          long sum = 0;
          long prev = Long.MIN_VALUE;
          for (ProcessSample s : list) {
            long covered = prev == Long.MIN_VALUE ? P : oneSample(s.timestampMicros() - prev);
            sum += s.smPercent() * covered;
            prev = s.timestampMicros();
          }
          out.put(pid, sum);
        });
    return out;
  }

  /**
   * Reads the workload as a sampler would: at random times, each read returns every sample
   * published by then and newer than the cursor minus a random overlap, in random order, sometimes
   * twice; drains at random moments. Each read first gives the ledger the device ticks of its
   * window (none when {@code ticks} is empty: a driver without device samples), as the sampler
   * does. Returns the per-pid totals of all drains.
   */
  static Map<Integer, Long> readAndDrain(
      UsageLedger ledger, List<ProcessSample> samples, List<Long> ticks, Random r) {
    Map<Integer, Long> drained = new TreeMap<>();
    long end = samples.stream().mapToLong(ProcessSample::timestampMicros).max().orElse(0);
    long start = samples.stream().mapToLong(ProcessSample::timestampMicros).min().orElse(0);
    long now = start - 1;
    long cursor = 0;
    while (now < end) {
      now = Math.min(end, now + 1 + r.nextLong(3 * P));
      long overlap = r.nextInt(3) == 0 ? 0 : r.nextLong(2 * P);
      long from = Math.max(0, cursor - overlap);
      long until = now;
      List<ProcessSample> read = new ArrayList<>();
      for (ProcessSample s : samples) {
        if (s.timestampMicros() > from && s.timestampMicros() <= until) {
          read.add(s);
          if (r.nextInt(10) == 0) {
            read.add(s); // NVML repeating an entry
          }
        }
      }
      Collections.shuffle(read, r);
      List<Long> readTicks = new ArrayList<>();
      for (long t : ticks) {
        if (t > from && t <= until) {
          readTicks.add(t);
        }
      }
      Collections.shuffle(readTicks, r);
      ledger.addDeviceTicks("GPU-0", readTicks);
      ledger.addSamples("GPU-0", read);
      for (ProcessSample s : read) {
        cursor = Math.max(cursor, s.timestampMicros());
      }
      if (r.nextInt(3) == 0) {
        merge(drained, ledger.drain());
      }
    }
    merge(drained, ledger.drain());
    return drained;
  }

  private static void merge(Map<Integer, Long> into, Map<String, UsageLedger.Drained> drain) {
    UsageLedger.Drained d = drain.get("GPU-0");
    if (d != null) {
      d.busyPercentMicros().forEach((pid, v) -> into.merge(pid, v, Long::sum));
    }
  }

  @Property(tries = 300)
  void everySampleCountedExactlyOnce(@ForAll long seed) {
    Random r = new Random(seed);
    List<ProcessSample> samples = workload(r, 1 + r.nextInt(300), 1 + r.nextInt(6));
    UsageLedger ledger = UsageLedger.fixedPeriod(Duration.ofNanos(P * 1000));
    assertThat(readAndDrain(ledger, samples, List.of(), r)).isEqualTo(reference(samples));
  }

  /**
   * With the period estimated from the GPU's own ticks, each sample is off by at most its jitter.
   */
  @Property(tries = 100)
  void estimatedPeriodAgreesWithinTheTicksJitter(@ForAll long seed) {
    Random r = new Random(seed);
    List<ProcessSample> samples = workload(r, 20 + r.nextInt(300), 1 + r.nextInt(6));
    UsageLedger ledger = UsageLedger.estimating(Duration.ofNanos(P * 1000));
    Map<Integer, Long> got = readAndDrain(ledger, samples, deviceTicks(samples), r);
    Map<Integer, Long> want = reference(samples);
    assertThat(got.keySet()).isEqualTo(want.keySet());
    Map<Integer, Long> samplesPerPid = new HashMap<>();
    samples.forEach(s -> samplesPerPid.merge(s.pid(), 1L, Long::sum));
    want.forEach(
        (pid, v) ->
            assertThat(Math.abs(got.get(pid) - v))
                .as("pid %d", pid)
                .isLessThanOrEqualTo(samplesPerPid.get(pid) * 100 * 200));
  }

  /**
   * The seed that over-billed when the period came from per-process samples only: pid 1, pulsed and
   * alone on the GPU, never sampled in two consecutive ticks, read as a period of 400 ms.
   */
  @Example
  void aSparseProcessAloneIsNotCreditedTwice() {
    estimatedPeriodAgreesWithinTheTicksJitter(-4886284L);
    noDeviceTicksNeverOverCredits(-4886284L);
  }

  /**
   * Without device ticks (a driver or GPU without device samples) the period comes from the
   * per-process samples and is never believed longer than the default: each pid is credited at most
   * what the samples show, never more (a sparse process alone on the GPU is under-credited).
   */
  @Property(tries = 100)
  void noDeviceTicksNeverOverCredits(@ForAll long seed) {
    Random r = new Random(seed);
    List<ProcessSample> samples = workload(r, 20 + r.nextInt(300), 1 + r.nextInt(6));
    UsageLedger ledger = UsageLedger.estimating(Duration.ofNanos(P * 1000));
    Map<Integer, Long> got = readAndDrain(ledger, samples, List.of(), r);
    Map<Integer, Long> want = reference(samples);
    assertThat(got.keySet()).isEqualTo(want.keySet());
    want.forEach((pid, v) -> assertThat(got.get(pid)).as("pid %d", pid).isLessThanOrEqualTo(v));
  }

  /**
   * A pid in every other tick, alone: each sample is one period with device ticks, at most without.
   */
  @Example
  void aProcessInEveryOtherTickIsCreditedOnePeriodPerSample() {
    List<ProcessSample> samples = new ArrayList<>();
    for (int i = 0; i < 200; i += 2) {
      samples.add(new ProcessSample(7, T0 + i * P + 30, 80, 0));
    }
    long want = 100L * 80 * P;
    UsageLedger ticked = UsageLedger.estimating(Duration.ofNanos(P * 1000));
    assertThat(readAndDrain(ticked, samples, deviceTicks(samples), new Random(1)))
        .isEqualTo(Map.of(7, want));
    UsageLedger blind = UsageLedger.estimating(Duration.ofNanos(P * 1000));
    assertThat(readAndDrain(blind, samples, List.of(), new Random(1)).get(7))
        .isLessThanOrEqualTo(want);
  }

  @Example
  void aSampleOlderThanTheHorizonIsNotCountedAndSaysSo() {
    UsageLedger ledger = UsageLedger.fixedPeriod(Duration.ofMillis(200));
    long t = 1_000_000_000_000L;
    ledger.addSamples("GPU-0", List.of(new ProcessSample(7, t, 50, 0)));
    ledger.addSamples(
        "GPU-0", List.of(new ProcessSample(8, t - UsageLedger.HORIZON_MICROS - 1, 50, 0)));
    assertThat(ledger.drain().get("GPU-0").busyPercentMicros()).isEqualTo(Map.of(7, 50L * 200_000));
    assertThat(ledger.staleSamples()).isEqualTo(1);
  }

  @Example
  void energyCountsIncreasesOnlyBetweenWatchedReadings() {
    UsageLedger ledger = UsageLedger.fixedPeriod(Duration.ofMillis(200));
    ledger.energy("GPU-0", 1_000, 0);
    assertThat(ledger.drain()).isEmpty(); // a first reading is only a baseline
    ledger.energy("GPU-0", 1_700, 1_000_000);
    ledger.energy("GPU-0", 2_000, 2_000_000);
    UsageLedger.Drained d = ledger.drain().get("GPU-0");
    assertThat(d.energyMillijoules()).hasValue(1_000);
    assertThat(d.energyMicros()).isEqualTo(2_000_000);
    ledger.energy("GPU-0", 500, 3_000_000); // the counter went back (driver reload): a new baseline
    ledger.lost(); // NVML down: what it used meanwhile is given to nobody
    ledger.energy("GPU-0", 9_000, 9_000_000);
    assertThat(ledger.drain()).isEmpty();
    ledger.energy("GPU-0", 9_400, 10_000_000);
    assertThat(ledger.drain().get("GPU-0").energyMillijoules()).hasValue(400);
  }

  @Example
  void pidCursorsAreBoundedAndAForgottenPidCountsOnePeriod() {
    UsageLedger ledger = UsageLedger.fixedPeriod(Duration.ofMillis(200));
    long t = 1_000_000_000_000L;
    List<ProcessSample> many = new ArrayList<>();
    for (int pid = 1; pid <= UsageLedger.MAX_PIDS + 1; pid++) {
      many.add(new ProcessSample(pid, t + pid, 100, 0));
    }
    ledger.addSamples("GPU-0", many);
    ledger.drain();
    // pid 1 was forgotten (the stalest cursor): its next sample counts one period, never the gap
    ledger.addSamples("GPU-0", List.of(new ProcessSample(1, t + 10_000_000, 100, 0)));
    assertThat(ledger.drain().get("GPU-0").busyPercentMicros())
        .isEqualTo(Map.of(1, 100L * 200_000));
  }

  /**
   * A sample's time: its gap to the pid's previous one if that is one period (NVML's ticks jitter
   * up to 1.5 periods), else one period (the process ran in none of the periods between).
   */
  private static long oneSample(long gap) {
    return gap <= P * 3 / 2 ? gap : P;
  }
}

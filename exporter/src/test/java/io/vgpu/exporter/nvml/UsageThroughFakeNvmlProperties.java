package io.vgpu.exporter.nvml;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;

/**
 * The same random workloads as {@link UsageLedgerProperties}, this time through the fake NVML
 * library (JNA, the sampler's polls and between-poll collections, its cursor): the fake publishes
 * the samples as the workload's time passes and the GPU's energy counter as it grows; at the end,
 * what the sampler's ledger drained per pid equals the integral of the samples (within the ticks'
 * jitter, the period being estimated), and the energy equals the counter's rise between the first
 * and last poll.
 */
class UsageThroughFakeNvmlProperties {
  private static final long P = 200_000;

  @Property(tries = 25)
  void samplesAndEnergyReachTheLedgerOnceThroughTheFake(@ForAll long seed) throws IOException {
    Random r = new Random(seed);
    Path dir = Files.createTempDirectory("usage-fake-nvml");
    FakeNvml fake = FakeNvml.in(dir);
    List<ProcessSample> samples =
        UsageLedgerProperties.workload(r, 20 + r.nextInt(150), 1 + r.nextInt(5));
    long first = samples.stream().mapToLong(ProcessSample::timestampMicros).min().orElseThrow();
    long last = samples.stream().mapToLong(ProcessSample::timestampMicros).max().orElseThrow();
    MutableClock clock = new MutableClock(Instant.ofEpochSecond(0, first * 1000));
    long energy = r.nextLong(1L << 40);
    long firstPolled = -1;
    long lastPolled = -1;
    Map<Integer, Long> drained = new TreeMap<>();
    long[] energyDrained = {0};
    long clockAt = first;
    try (NvmlSampler sampler =
        new NvmlSampler(
            () -> JnaNvmlClient.load(FakeNvml.library().toString()),
            new NvmlSampler.Settings(
                Duration.ofSeconds(1), Duration.ofSeconds(3), Duration.ofSeconds(1)),
            clock)) {
      for (long now = first; now <= last + 3 * P; now += 1 + r.nextLong(3 * P)) {
        clock.advance(Duration.ofNanos((now - clockAt) * 1000));
        clockAt = now;
        energy += r.nextLong(700_000L * 3 * P / 1_000_000 + 1); // up to 700 W
        List<String> script = new ArrayList<>();
        script.add(
            "device 0 uuid=GPU-0 name=H100 total=1000000 used=0 util=50 memutil=1 period=%d energy=%d"
                .formatted(P, energy));
        for (ProcessSample s : samples) {
          if (s.timestampMicros() <= now) { // published once its time has passed
            script.add(
                "sample 0 pid=%d sm=%d mem=%d ts=%d"
                    .formatted(s.pid(), s.smPercent(), s.memoryPercent(), s.timestampMicros()));
          }
        }
        fake.write(script.toArray(String[]::new));
        if (r.nextBoolean()) {
          sampler.sampleOnce(); // polls read the energy counter too
          firstPolled = firstPolled < 0 ? energy : firstPolled;
          lastPolled = energy;
        } else {
          sampler.collectProcessSamples();
        }
        if (r.nextInt(4) == 0) {
          add(drained, energyDrained, sampler.ledger().drain());
        }
      }
      sampler.sampleOnce();
      lastPolled = energy;
      firstPolled = firstPolled < 0 ? energy : firstPolled;
      add(drained, energyDrained, sampler.ledger().drain());
      assertThat(energyDrained[0]).isEqualTo(lastPolled - firstPolled);
    }
    Map<Integer, Long> want = UsageLedgerProperties.reference(samples);
    assertThat(drained.keySet()).isEqualTo(want.keySet());
    Map<Integer, Long> perPid = new HashMap<>();
    samples.forEach(s -> perPid.merge(s.pid(), 1L, Long::sum));
    want.forEach(
        (pid, v) ->
            assertThat(Math.abs(drained.get(pid) - v))
                .as("pid %d", pid)
                .isLessThanOrEqualTo(perPid.get(pid) * 100 * 200));
  }

  /**
   * A process in every other tick, alone on the GPU: with the GPU's own ticks (period=) each sample
   * is credited one period; without them (a driver without device samples) never more.
   */
  @Example
  void aSparseProcessAloneIsCreditedOnePeriodPerSampleThroughTheFake() throws IOException {
    long t0 = 1_700_000_000_000_000L;
    List<String> samples = new ArrayList<>();
    for (int i = 0; i < 100; i += 2) {
      samples.add("sample 0 pid=7 sm=80 mem=1 ts=%d".formatted(t0 + i * P + 30));
    }
    long want = 50L * 80 * P;
    assertThat(creditThroughTheFake(samples, " period=" + P, t0)).isEqualTo(want);
    assertThat(creditThroughTheFake(samples, "", t0)).isBetween(1L, want);
  }

  /** Publishes the samples tick by tick, collecting after each; what pid 7 was credited. */
  private static long creditThroughTheFake(List<String> samples, String period, long t0)
      throws IOException {
    FakeNvml fake = FakeNvml.in(Files.createTempDirectory("usage-sparse"));
    MutableClock clock = new MutableClock(Instant.ofEpochSecond(0, t0 * 1000));
    long credit = 0;
    try (NvmlSampler sampler =
        new NvmlSampler(
            () -> JnaNvmlClient.load(FakeNvml.library().toString()),
            new NvmlSampler.Settings(
                Duration.ofSeconds(1), Duration.ofSeconds(3), Duration.ofSeconds(1)),
            clock)) {
      for (int published = 1; published <= samples.size(); published++) {
        List<String> script = new ArrayList<>();
        script.add("device 0 uuid=GPU-0 name=H100 total=1000000 used=0 util=40 memutil=1" + period);
        script.addAll(samples.subList(0, published));
        fake.write(script.toArray(String[]::new));
        clock.advance(Duration.ofNanos(2 * P * 1000));
        if (published % 5 == 1) {
          sampler.sampleOnce();
        } else {
          sampler.collectProcessSamples();
        }
      }
      UsageLedger.Drained d = sampler.ledger().drain().get("GPU-0");
      credit = d == null ? 0 : d.busyPercentMicros().getOrDefault(7, 0L);
    }
    return credit;
  }

  private static void add(
      Map<Integer, Long> into, long[] energy, Map<String, UsageLedger.Drained> drain) {
    UsageLedger.Drained d = drain.get("GPU-0");
    if (d != null) {
      d.busyPercentMicros().forEach((pid, v) -> into.merge(pid, v, Long::sum));
      energy[0] += d.energyMillijoules().orElse(0);
    }
  }
}

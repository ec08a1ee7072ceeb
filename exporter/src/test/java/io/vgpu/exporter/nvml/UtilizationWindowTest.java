package io.vgpu.exporter.nvml;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

class UtilizationWindowTest {
  private static final long T0 = 1_700_000_000_000_000L;
  private static final long PERIOD = 200_000;

  private static List<ProcessSample> steady(int pid, int percent, long from, long to) {
    List<ProcessSample> out = new ArrayList<>();
    for (long t = from; t <= to; t += PERIOD) {
      out.add(new ProcessSample(pid, t, percent, 0));
    }
    return out;
  }

  @Test
  void averages_steadyLoad_equalsTheSampledPercent() {
    UtilizationWindow w = new UtilizationWindow(Duration.ofSeconds(5));
    w.add(steady(10, 60, T0, T0 + 10_000_000));
    w.add(steady(11, 20, T0, T0 + 10_000_000));
    Map<Integer, Double> avg = w.averages(T0 + 10_000_000);
    assertThat(avg.get(10)).isCloseTo(0.60, within(1e-9));
    assertThat(avg.get(11)).isCloseTo(0.20, within(1e-9));
  }

  /**
   * Time-sliced processes (seen on an H200, driver 580): NVML gives each ~200 ms period to the
   * process that ran in it, so a process running one period in four has samples 800 ms apart. Each
   * sample covers one period, not the gap to the previous one, so the shares add up to the device's
   * busy time instead of overshooting it.
   */
  @Test
  void averages_timeSlicedProcesses_shareAddsUpToTheDevice() {
    UtilizationWindow w = new UtilizationWindow(Duration.ofSeconds(10));
    List<ProcessSample> samples = new ArrayList<>();
    for (int i = 0; i <= 100; i++) {
      long t = T0 + i * PERIOD;
      // the slice owner's sample, plus a near-simultaneous 0 % sample of the other process, as
      // NVML reports for a process resident but not running in that period
      boolean bRuns = i % 4 == 3;
      samples.add(new ProcessSample(bRuns ? 31 : 30, t, 99, 0));
      if (i % 2 == 0) {
        samples.add(new ProcessSample(bRuns ? 30 : 31, t + 37, 0, 0));
      }
    }
    w.add(samples);
    Map<Integer, Double> avg = w.averages(T0 + 100 * PERIOD);
    assertThat(avg.get(30)).isCloseTo(0.99 * 0.75, within(0.02));
    assertThat(avg.get(31)).isCloseTo(0.99 * 0.25, within(0.02));
    assertThat(avg.get(30) + avg.get(31)).isLessThanOrEqualTo(1.0);
  }

  /**
   * NVML answers each query with one sample per process (its latest period). Polled once a second,
   * a sample stands for the whole second: a process seen at every poll reads its value, one seen at
   * one poll in four reads a quarter of it.
   */
  @Test
  void averages_polledSlowerThanNvmlPeriod_eachSampleStandsForThePollInterval() {
    UtilizationWindow w = new UtilizationWindow(Duration.ofSeconds(20), Duration.ofSeconds(1));
    List<ProcessSample> samples = new ArrayList<>();
    for (int i = 0; i <= 80; i++) {
      long t = T0 + i * 1_000_000L + 137;
      samples.add(new ProcessSample(40, t, 99, 0));
      if (i % 4 == 0) {
        samples.add(new ProcessSample(41, t + 52, 99, 0));
      }
    }
    w.add(samples);
    Map<Integer, Double> avg = w.averages(T0 + 80_000_200L);
    assertThat(avg.get(40)).isCloseTo(0.99, within(0.02));
    assertThat(avg.get(41)).isCloseTo(0.99 * 0.25, within(0.03));
  }

  @Test
  void averages_processBusyForHalfTheWindow_readsHalf() {
    UtilizationWindow w = new UtilizationWindow(Duration.ofSeconds(4));
    w.add(steady(10, 100, T0, T0 + 10_000_000)); // keeps the device's clock going
    w.add(steady(20, 80, T0 + 8_000_000, T0 + 10_000_000));
    assertThat(w.averages(T0 + 10_000_000).get(20)).isCloseTo(0.40, within(0.06));
  }

  @Test
  void averages_samplesPublishedLate_windowEndsAtNewestSample() {
    UtilizationWindow w = new UtilizationWindow(Duration.ofSeconds(3));
    w.add(steady(10, 90, T0, T0 + 6_000_000));
    // "now" is 600 ms after the newest sample: ending the window at now would read ~72 %.
    assertThat(w.averages(T0 + 6_600_000).get(10)).isCloseTo(0.90, within(1e-9));
  }

  @Test
  void averages_deviceSilentLongerThanTwoPeriods_decaysToZero() {
    UtilizationWindow w = new UtilizationWindow(Duration.ofSeconds(2));
    w.add(steady(10, 90, T0, T0 + 2_000_000));
    assertThat(w.averages(T0 + 2_000_000).get(10)).isCloseTo(0.9, within(1e-9));
    assertThat(w.averages(T0 + 60_000_000)).doesNotContainKey(10);
  }

  @Test
  void lastSeen_tracksNewestSampleAndIgnoresDuplicates() {
    UtilizationWindow w = new UtilizationWindow(Duration.ofSeconds(2));
    w.add(List.of(new ProcessSample(10, T0, 50, 0), new ProcessSample(10, T0, 99, 0)));
    w.add(List.of(new ProcessSample(10, T0 - 5, 99, 0)));
    assertThat(w.lastSeenMicros()).isEqualTo(T0);
  }

  @Property(tries = 300)
  void averages_anySamples_stayWithinZeroAndOne(
      @ForAll @Size(max = 60) List<@IntRange(min = 0, max = 100) Integer> percents,
      @ForAll @IntRange(min = 1, max = 400_000) int gapMicros,
      @ForAll @IntRange(min = 1, max = 5) int pids) {
    UtilizationWindow w = new UtilizationWindow(Duration.ofSeconds(1));
    List<ProcessSample> samples = new ArrayList<>();
    for (int i = 0; i < percents.size(); i++) {
      samples.add(new ProcessSample(1 + i % pids, T0 + (long) i * gapMicros, percents.get(i), 0));
    }
    w.add(samples);
    Map<Integer, Double> avg = w.averages(T0 + (long) percents.size() * gapMicros);
    assertThat(avg.values()).allSatisfy(v -> assertThat(v).isBetween(0.0, 1.0));
  }

  @Property(tries = 200)
  void averages_constantPercent_readsThatPercent(
      @ForAll @IntRange(min = 0, max = 100) int percent,
      @ForAll @IntRange(min = 50_000, max = 1_000_000) int gapMicros) {
    UtilizationWindow w = new UtilizationWindow(Duration.ofSeconds(3));
    List<ProcessSample> samples = new ArrayList<>();
    for (long t = T0; t <= T0 + 12_000_000; t += gapMicros) {
      samples.add(new ProcessSample(7, t, percent, 0));
    }
    w.add(samples);
    long newest = samples.getLast().timestampMicros();
    assertThat(w.averages(newest).get(7)).isCloseTo(percent / 100.0, within(1e-9));
  }
}

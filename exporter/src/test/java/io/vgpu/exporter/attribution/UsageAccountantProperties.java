package io.vgpu.exporter.attribution;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.nvml.GpuIdentity;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.exporter.nvml.NvmlStatus;
import io.vgpu.exporter.nvml.ProcessSample;
import io.vgpu.exporter.nvml.UsageLedger;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.Random;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;

/**
 * Usage accounting over random workloads: containers come and go on two GPUs, their processes
 * sample busy or idle, processes of no container run too, the GPUs' energy counters rise at random
 * power, NVML goes down now and then. After every pass, per GPU, the containers' energy plus the
 * unattributed and expired energy equals the GPU's energy exactly (millijoules); each container's
 * SM busy equals the integral of its processes' samples; its byte-seconds equal the integral of the
 * sampled used and limit series; counters never go back while a container lives, and one that comes
 * back after its grace period starts from 0.
 */
class UsageAccountantProperties {
  private static final long P = 200_000;
  private static final String[] GPUS = {"GPU-a", "GPU-b"};
  private static final Duration GRACE = Duration.ofSeconds(6);

  private record Key(ContainerKey key, int index, String uuid) {}

  @Property(tries = 200)
  void conservationBusyAndByteSecondsHoldAtEveryPass(@ForAll long seed) {
    Random r = new Random(seed);
    UsageLedger ledger = UsageLedger.fixedPeriod(Duration.ofNanos(P * 1000));
    Instant t = Instant.parse("2026-11-27T12:00:00Z");
    UsageAccountant acc = new UsageAccountant(ledger, GRACE, t);
    int containers = 1 + r.nextInt(4);
    long[] energyCounter = {r.nextLong(1L << 40), r.nextLong(1L << 40)};
    long sampleClock = t.toEpochMilli() * 1000;
    Map<Integer, Long> lastSampleOfPid = new HashMap<>();
    Map<Key, Long> wantBusy = new HashMap<>();
    Map<Key, double[]> wantBytes = new HashMap<>();
    Map<Key, long[]> lastSeries = new HashMap<>(); // used, limit at the previous pass that saw it
    Map<Key, Instant> lastSeen = new HashMap<>();
    Map<Key, UsageSnapshot.ContainerUsage> previous = new HashMap<>();
    Instant previousPass = null;
    boolean nvmlUp = true;
    for (int pass = 0; pass < 40; pass++) {
      Instant now = t.plusMillis(500 + r.nextInt(3000));
      if (r.nextInt(15) == 0) {
        nvmlUp = !nvmlUp;
        if (!nvmlUp) {
          ledger.lost();
        }
      }
      // which containers exist this pass, their pids (pid = 100 * container + gpu + 1)
      List<UsageAccountant.Seen> seen = new ArrayList<>();
      Map<Integer, ContainerKey> owners = new HashMap<>();
      for (int c = 0; c < containers; c++) {
        if (r.nextInt(6) == 0) {
          continue; // gone this pass
        }
        ContainerKey key = new ContainerKey("uid-" + c, "ctr");
        for (int g = 0; g < GPUS.length; g++) {
          if ((c + g) % 2 == 1 && c != 0) {
            continue; // not every container uses both GPUs
          }
          long used = r.nextLong(1L << 36);
          long limit = used + r.nextLong(1L << 36);
          seen.add(
              new UsageAccountant.Seen(
                  key, "ns", "pod-" + c, g, GPUS[g], used, limit, Optional.empty()));
          owners.put(100 * c + g + 1, key);
        }
      }
      // NVML: samples of every pid (containers' and strangers') and energy, over the pass
      long until = now.toEpochMilli() * 1000;
      if (nvmlUp) {
        for (int g = 0; g < GPUS.length; g++) {
          List<ProcessSample> read = new ArrayList<>();
          for (long ts = sampleClock + P; ts <= until; ts += P) {
            for (int c = 0; c <= containers; c++) { // c == containers: a process of no container
              int pid = 100 * c + g + 1;
              if (r.nextInt(3) == 0) {
                read.add(new ProcessSample(pid, ts, r.nextInt(101), 0));
              }
            }
          }
          ledger.addSamples(GPUS[g], read);
          for (ProcessSample s : read) {
            Long prev = lastSampleOfPid.put(s.pid(), s.timestampMicros());
            long covered = prev == null ? P : oneSample(s.timestampMicros() - prev);
            ContainerKey owner = owners.get(s.pid());
            if (owner != null) {
              wantBusy.merge(new Key(owner, g, GPUS[g]), s.smPercent() * covered, Long::sum);
            }
          }
          energyCounter[g] += r.nextLong(700 * (until - sampleClock) / 1000 + 1);
          ledger.energy(GPUS[g], energyCounter[g], until);
        }
      }
      sampleClock = Math.max(sampleClock, until - until % P);
      // the test's own integral of the sampled memory series
      for (UsageAccountant.Seen s : seen) {
        Key k = new Key(s.key(), s.index(), s.uuid());
        double[] b = wantBytes.computeIfAbsent(k, x -> new double[2]);
        if (previousPass != null && previousPass.equals(lastSeen.get(k))) {
          double dt = Duration.between(previousPass, now).toNanos() / 1e9;
          b[0] += lastSeries.get(k)[0] * dt;
          b[1] += lastSeries.get(k)[1] * dt;
        }
        lastSeries.put(k, new long[] {s.usedBytes(), s.limitBytes()});
        lastSeen.put(k, now);
      }
      NvmlSnapshot nvml =
          nvmlUp
              ? new NvmlSnapshot(now, NvmlStatus.up(Optional.empty()), gpus())
              : NvmlSnapshot.unavailable(now, "nvml: down");
      UsageSnapshot snap = acc.account(seen, owners, nvml, now);

      // conservation, exact, per GPU
      for (UsageSnapshot.GpuUsage g : snap.gpus()) {
        long containersEnergy =
            snap.containers().stream()
                .filter(c -> c.deviceUuid().equals(g.uuid()))
                .mapToLong(UsageSnapshot.ContainerUsage::energyMillijoules)
                .sum();
        assertThat(containersEnergy + g.unattributedMillijoules() + g.expiredMillijoules())
            .as("pass %d %s", pass, g.uuid())
            .isEqualTo(g.deviceMillijoules());
        assertThat(g.unattributedMillijoules()).isNotNegative();
      }
      for (UsageSnapshot.ContainerUsage c : snap.containers()) {
        Key k = new Key(c.key(), c.deviceIndex(), c.deviceUuid());
        assertThat(c.smBusyPercentMicros())
            .as("busy %s", k)
            .isEqualTo(wantBusy.getOrDefault(k, 0L));
        double[] b = wantBytes.get(k);
        assertThat(c.usedByteSeconds()).isCloseTo(b[0], within(1e-6 * Math.max(1, b[0])));
        assertThat(c.limitByteSeconds()).isCloseTo(b[1], within(1e-6 * Math.max(1, b[1])));
        UsageSnapshot.ContainerUsage before = previous.get(k);
        if (before != null) {
          assertThat(c.smBusyPercentMicros()).isGreaterThanOrEqualTo(before.smBusyPercentMicros());
          assertThat(c.energyMillijoules()).isGreaterThanOrEqualTo(before.energyMillijoules());
          assertThat(c.usedByteSeconds()).isGreaterThanOrEqualTo(before.usedByteSeconds());
        }
      }
      // expiry: a series whose grace is over is gone, and its next life starts from 0
      previous.clear();
      for (UsageSnapshot.ContainerUsage c : snap.containers()) {
        previous.put(new Key(c.key(), c.deviceIndex(), c.deviceUuid()), c);
      }
      for (Key k : new ArrayList<>(lastSeen.keySet())) {
        if (lastSeen.get(k).plus(GRACE).isBefore(now)) {
          assertThat(previous).doesNotContainKey(k);
          lastSeen.remove(k);
          wantBusy.remove(k);
          wantBytes.remove(k);
          lastSeries.remove(k);
        } else {
          assertThat(previous).containsKey(k);
        }
      }
      previousPass = now;
      t = now;
    }
  }

  private static List<GpuSnapshot> gpus() {
    List<GpuSnapshot> out = new ArrayList<>();
    for (int g = 0; g < GPUS.length; g++) {
      out.add(
          new GpuSnapshot(
              new GpuIdentity(g, -1, GPUS[g], "Fake"),
              Optional.empty(),
              OptionalDouble.empty(),
              OptionalDouble.empty(),
              Optional.of(List.of()),
              Optional.of(Map.of())));
    }
    return out;
  }

  @Example
  void energyFollowsBusyShareAndIdleTimeStaysUnattributed() {
    UsageLedger ledger = UsageLedger.fixedPeriod(Duration.ofMillis(200));
    Instant t = Instant.parse("2026-11-27T12:00:00Z");
    UsageAccountant acc = new UsageAccountant(ledger, GRACE, t);
    ContainerKey a = new ContainerKey("uid-a", "a");
    ContainerKey b = new ContainerKey("uid-b", "b");
    List<UsageAccountant.Seen> seen =
        List.of(
            new UsageAccountant.Seen(a, "ns", "pa", 0, "GPU-a", 0, 0, Optional.empty()),
            new UsageAccountant.Seen(b, "ns", "pb", 0, "GPU-a", 0, 0, Optional.empty()));
    long ts = t.toEpochMilli() * 1000;
    // over 1 s: a busy 100 % for 5 periods (1 s), b 50 % for 2 (0.2 s); energy 1000 mJ
    List<ProcessSample> samples = new ArrayList<>();
    for (int i = 1; i <= 5; i++) {
      samples.add(new ProcessSample(11, ts + i * 200_000L, 100, 0));
    }
    samples.add(new ProcessSample(22, ts + 200_000L, 50, 0));
    samples.add(new ProcessSample(22, ts + 400_000L, 50, 0));
    ledger.addSamples("GPU-a", samples);
    ledger.energy("GPU-a", 5_000, ts);
    ledger.energy("GPU-a", 6_000, ts + 1_000_000);
    UsageSnapshot s =
        acc.account(
            seen,
            Map.of(11, a, 22, b),
            new NvmlSnapshot(t, NvmlStatus.up(Optional.empty()), gpus()),
            t.plusSeconds(1));
    // busy: a 1.0 s, b 0.2 s; Σ = 1.2 s > T = 1 s, so the shares are 1/1.2 and 0.2/1.2
    assertThat(s.containers().get(0).smBusySeconds()).isEqualTo(1.0);
    assertThat(s.containers().get(0).energyMillijoules()).isEqualTo(833);
    assertThat(s.containers().get(1).energyMillijoules()).isEqualTo(166);
    assertThat(s.gpus().get(0).unattributedMillijoules()).isEqualTo(1);
  }

  @Example
  void nvmlDownStopsTheNvmlCountersAndSaysWhy_memoryGoesOn() {
    UsageLedger ledger = UsageLedger.fixedPeriod(Duration.ofMillis(200));
    Instant t = Instant.parse("2026-11-27T12:00:00Z");
    UsageAccountant acc = new UsageAccountant(ledger, GRACE, t);
    ContainerKey a = new ContainerKey("uid-a", "a");
    List<UsageAccountant.Seen> seen =
        List.of(new UsageAccountant.Seen(a, "ns", "pa", 0, "GPU-a", 1000, 2000, Optional.empty()));
    long ts = t.toEpochMilli() * 1000;
    ledger.addSamples("GPU-a", List.of(new ProcessSample(11, ts + 200_000, 100, 0)));
    ledger.energy("GPU-a", 1_000, ts);
    ledger.energy("GPU-a", 2_000, ts + 1_000_000);
    NvmlSnapshot up = new NvmlSnapshot(t, NvmlStatus.up(Optional.empty()), gpus());
    UsageSnapshot first = acc.account(seen, Map.of(11, a), up, t.plusSeconds(1));
    assertThat(first.containers().getFirst().smBusySeconds()).isEqualTo(0.2);

    ledger.lost(); // the sampler went down: nothing more is read
    UsageSnapshot down =
        acc.account(
            seen,
            Map.of(11, a),
            NvmlSnapshot.unavailable(t.plusSeconds(3), "nvml: down"),
            t.plusSeconds(3));
    UsageSnapshot.ContainerUsage c = down.containers().getFirst();
    assertThat(c.smBusyPercentMicros())
        .isEqualTo(first.containers().getFirst().smBusyPercentMicros());
    assertThat(c.energyMillijoules()).isEqualTo(first.containers().getFirst().energyMillijoules());
    assertThat(c.usedByteSeconds()).isEqualTo(1000 * 2.0); // memory comes from the regions
    assertThat(down.gpus().get(0).unknown()).hasValue("nvml_unavailable");
    assertThat(down.gpus().get(0).deviceMillijoules()).isEqualTo(1_000);

    // back up: the first reading is a new baseline, the energy used meanwhile is nobody's
    ledger.energy("GPU-a", 9_000, ts + 5_000_000);
    UsageSnapshot back = acc.account(seen, Map.of(11, a), up, t.plusSeconds(5));
    assertThat(back.gpus().get(0).deviceMillijoules()).isEqualTo(1_000);
    assertThat(back.gpus().get(0).unknown()).isEmpty();
  }

  /**
   * A sample's time: its gap to the pid's previous one if that is one period (NVML's ticks jitter
   * up to 1.5 periods), else one period (the process ran in none of the periods between).
   */
  private static long oneSample(long gap) {
    return gap <= P * 3 / 2 ? gap : P;
  }
}

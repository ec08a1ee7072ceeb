package io.vgpu.regioncodec;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What this proves: a reader snapshotting a region while another thread rewrites slots under the
 * v1.2 seqlock protocol never reports a torn value as consistent. Every usage the writer stores
 * satisfies {@code context == module == data} and {@code total == 3 * context}; any snapshot not
 * marked best effort must show exactly such values. A second test moves slots around the way HAMi's
 * swap-remove compaction does (no seqlock, {@code proc_num} changing) and checks the structural
 * invariants: no duplicate pids, indexes below {@code proc_num}, no exception.
 *
 * <p>Both run about one second each; run alone with {@code ./mvnw -o -pl region-codec test
 * -Dtest=SeqlockConcurrencyTest}. On two shared cores tearing is rare but the check holds for every
 * snapshot taken; the count of detected tears is printed.
 */
class SeqlockConcurrencyTest {
  private static final long RUN_NANOS = 1_000_000_000L;

  @TempDir Path dir;

  @Test
  void snapshot_whileWriterUpdatesUnderSeqlock_neverReportsTornValueAsConsistent()
      throws Exception {
    Path path = dir.resolve("race.cache");
    RegionWriter.create(path, Fixtures.busy(Layout.V1_2, 4, 8));
    AtomicBoolean stop = new AtomicBoolean();
    AtomicReference<Throwable> writerFailure = new AtomicReference<>();
    try (RegionFile rw = RegionFile.openReadWrite(path);
        RegionFile ro = RegionFile.openReadOnly(path)) {
      RegionWriter writer = rw.writer();
      for (int slot = 0; slot < 8; slot++) {
        for (int d = 0; d < 4; d++) {
          writer.updateUsage(slot, DeviceUsage.zero(d)); // k = 0 satisfies the invariant too
        }
      }
      Thread writerThread =
          Thread.ofPlatform()
              .start(
                  () -> {
                    try {
                      long k = 1;
                      while (!stop.get()) {
                        for (int slot = 0; slot < 8; slot++) {
                          for (int d = 0; d < 4; d++) {
                            writer.updateUsage(
                                slot, new DeviceUsage(d, k, k, k, 3 * k, k, k % 101));
                          }
                        }
                        k++;
                      }
                    } catch (Throwable t) {
                      writerFailure.set(t);
                    }
                  });
      long snapshots = 0;
      long consistent = 0;
      long torn = 0;
      long deadline = System.nanoTime() + RUN_NANOS;
      while (System.nanoTime() < deadline) {
        RegionSnapshot snapshot = ro.snapshot();
        snapshots++;
        torn += snapshot.tornRetries();
        assertThat(snapshot.processes()).hasSize(8);
        if (snapshot.bestEffort()) {
          continue;
        }
        consistent++;
        for (ProcessSlot process : snapshot.processes()) {
          for (DeviceUsage u : process.devices()) {
            long k = u.contextBytes();
            assertThat(u.moduleBytes()).as("module of %s", process).isEqualTo(k);
            assertThat(u.dataBytes()).as("data of %s", process).isEqualTo(k);
            assertThat(u.totalBytes()).as("total of %s", process).isEqualTo(3 * k);
          }
        }
      }
      stop.set(true);
      writerThread.join();
      assertThat(writerFailure.get()).isNull();
      System.out.printf(
          "seqlock race: %d snapshots, %d consistent, %d torn retries%n",
          snapshots, consistent, torn);
      assertThat(consistent).isPositive();
    }
  }

  @Test
  void snapshot_whileSlotsAreCompactedAndReadded_keepsStructuralInvariants() throws Exception {
    Path path = dir.resolve("compaction.cache");
    RegionWriter.create(path, Fixtures.busy(Layout.V1_2, 2, 32));
    AtomicBoolean stop = new AtomicBoolean();
    AtomicReference<Throwable> writerFailure = new AtomicReference<>();
    Set<Integer> knownPids = new java.util.HashSet<>();
    for (int p = 0; p < 32; p++) {
      knownPids.add(1000 + p);
    }
    try (RegionFile rw = RegionFile.openReadWrite(path);
        RegionFile ro = RegionFile.openReadOnly(path)) {
      RegionWriter writer = rw.writer();
      Thread compactor =
          Thread.ofPlatform()
              .start(
                  () -> {
                    try {
                      // Live table mirrors what the writer stored, as the library's slot table.
                      List<RegionSpec.SlotSpec> table =
                          new ArrayList<>(Fixtures.busy(Layout.V1_2, 2, 32).slots());
                      java.util.SplittableRandom random = new java.util.SplittableRandom(7);
                      while (!stop.get()) {
                        int victim = random.nextInt(table.size());
                        RegionSpec.SlotSpec last = table.removeLast();
                        if (victim < table.size()) {
                          RegionSpec.SlotSpec removed = table.set(victim, last);
                          writer.putSlot(victim, last); // swap-remove: copy the last over it
                          writer.setProcNum(table.size());
                          table.add(removed); // and register it again at the end
                        } else {
                          writer.setProcNum(table.size());
                          table.add(last);
                        }
                        writer.putSlot(table.size() - 1, table.getLast());
                        writer.setProcNum(table.size());
                      }
                    } catch (Throwable t) {
                      writerFailure.set(t);
                    }
                  });
      long snapshots = 0;
      long deadline = System.nanoTime() + RUN_NANOS;
      while (System.nanoTime() < deadline) {
        RegionSnapshot snapshot = ro.snapshot();
        snapshots++;
        RegionCodecProperties.checkInvariants(snapshot);
        assertThat(snapshot.processes()).allSatisfy(p -> assertThat(knownPids).contains(p.pid()));
      }
      stop.set(true);
      compactor.join();
      assertThat(writerFailure.get()).isNull();
      assertThat(snapshots).isPositive();
    }
  }
}

package io.vgpu.exporter.node;

import static io.vgpu.exporter.testing.OperatorFixture.usage;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.doctor.RepairPlan;
import io.vgpu.exporter.testing.OperatorFixture;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 31 item 9: a read of a tenant file that never returns (a filesystem the tenant serves and
 * freezes, a memory-map lock it keeps taken) must not stall the judgment. Reads run on reader
 * threads with a per-file deadline; a given-up read leaves its pod not fully seen (UNKNOWN, never
 * GONE), and blocked readers are bounded per pod. The stall is a read blocked on a latch (this
 * machine has no FUSE daemon to freeze): the same blocking, from the reader thread's view. Before,
 * the single evidence-pass thread blocked in read(2) for as long as the tenant wanted.
 */
class TenantReadDeadlineTest {
  private static final long GIB = 1L << 30;

  @TempDir Path tmp;

  private final CountDownLatch released = new CountDownLatch(1);

  @AfterEach
  void release() {
    released.countDown();
  }

  @Test
  @Timeout(value = 30, unit = TimeUnit.SECONDS)
  void readThatNeverReturns_isGivenUpAtItsDeadline_andBlockedReadersAreBoundedPerPod()
      throws Exception {
    DeadlineReads reads = new DeadlineReads(Duration.ofMillis(200));
    Path file = tmp.resolve("stalled");
    long t0 = System.nanoTime();
    Optional<String> first = reads.read("pod-a", file, () -> stall());
    long millis = (System.nanoTime() - t0) / 1_000_000;
    assertThat(first).isEmpty();
    assertThat(millis).isBetween(150L, 5_000L);
    assertThat(reads.read("pod-a", file, () -> stall())).isEmpty();
    // Two of pod-a's readers are blocked: its next read is given up at once, without a thread.
    long t1 = System.nanoTime();
    assertThat(reads.read("pod-a", file, () -> "never run")).isEmpty();
    assertThat((System.nanoTime() - t1) / 1_000_000).isLessThan(150L);
    assertThat(reads.givenUp()).isEqualTo(3);
    // Another pod is not affected.
    assertThat(reads.read("pod-b", file, () -> "read")).contains("read");
    // Once the blocked reads return, pod-a is read again.
    released.countDown();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    Optional<String> again = Optional.empty();
    while (again.isEmpty() && System.nanoTime() < deadline) {
      again = reads.read("pod-a", file, () -> "read");
      Thread.sleep(20);
    }
    assertThat(again).contains("read");
    // No bookkeeping outlives its reads (pods come and go for months).
    while (reads.podsWithReadsInFlight() > 0 && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertThat(reads.podsWithReadsInFlight()).isZero();
  }

  @Test
  @Timeout(value = 30, unit = TimeUnit.SECONDS)
  void stalledMapsRead_leavesThePodUnknownAndCleanupFreesNothing() {
    OperatorFixture fx = new OperatorFixture(tmp);
    Path region =
        fx.region(
            OperatorFixture.UID_A,
            "main",
            OperatorFixture.v12(4 * GIB, 50)
                .slot(7, 1007, 1, usage(GIB, 30))
                // host pid 1008; the slot recorded 5555 (wrong): only its maps tie them
                .slot(8, 5555, 1, usage(GIB, 30))
                .build());
    fx.process(1007, 7).gpu(region).write();
    fx.process(1008, 8).gpu(region).write();
    Path stalled = fx.proc.resolve("1008/maps");
    DeadlineReads reads =
        new DeadlineReads(
            Duration.ofMillis(200),
            p -> {
              if (p.equals(stalled)) {
                stall();
              }
            });

    long t0 = System.nanoTime();
    NodeEvidence e =
        fx.collector(EvidenceCollector.DEFAULT_MAPS_BYTES_PER_PASS)
            .readingThrough(reads)
            .collect(List.of(fx.cacheRoot()));
    assertThat((System.nanoTime() - t0) / 1_000_000).isLessThan(10_000L);

    NodeEvidence.Container c = e.containers().getFirst();
    NodeEvidence.Region r = c.regions().getFirst();
    var fates =
        r.latest().orElseThrow().processes().stream()
            .map(s -> s.pid() + "=" + e.fateOf(c, r, s))
            .sorted()
            .toList();
    assertThat(fates).containsExactly("7=ALIVE", "8=UNKNOWN");
    assertThat(e.unseenProcesses()).containsEntry("deadline", 1);
    assertThat(e.podsNotFullySeen()).containsExactly(OperatorFixture.UID_A);
    assertThat(RepairPlan.cleanup(e).actions()).isEmpty();
    assertThat(reads.givenUp()).isEqualTo(1);
  }

  private String stall() {
    try {
      released.await();
    } catch (InterruptedException e) {
      // a reader blocked in the kernel does not see interrupts either: keep blocking
      try {
        released.await();
      } catch (InterruptedException again) {
        Thread.currentThread().interrupt();
      }
    }
    return "late";
  }
}

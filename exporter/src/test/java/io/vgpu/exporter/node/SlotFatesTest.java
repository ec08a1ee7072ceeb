package io.vgpu.exporter.node;

import static io.vgpu.exporter.testing.OperatorFixture.usage;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.discovery.CacheDiscovery;
import io.vgpu.exporter.discovery.ParseErrors;
import io.vgpu.exporter.k8s.StaticMetadataSource;
import io.vgpu.exporter.testing.OperatorFixture;
import java.nio.file.Path;
import java.time.Duration;
import java.time.InstantSource;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The node view a scrape reads counts slots by the one judgment's liveness ({@link
 * NodeEvidence#fateOf}, computed once per evidence pass): ALIVE slots run, a GONE slot's memory
 * leaves "used" and is counted apart, and a slot the pass has not judged is UNKNOWN, its memory
 * still used.
 */
class SlotFatesTest {
  static final String UID = "a5555555-0000-4000-8000-000000000555";
  static final long QUARTER_GIB = 1L << 28;

  @TempDir Path tmp;

  @Test
  void nodeView_slotsByTheOneJudgment_goneLeavesUsedAndUnjudgedIsUnknown() throws Exception {
    OperatorFixture fx = new OperatorFixture(tmp);
    Path region =
        fx.region(
            UID,
            "main",
            OperatorFixture.v12(1L << 30, 0)
                .slot(7, 3007, 1, usage(QUARTER_GIB, 0))
                .slot(8, 3008, 1, usage(QUARTER_GIB, 0))
                .build());
    fx.process(3007, 7).pod(UID).gpu(region).write(); // 8's process is gone
    AtomicReference<SlotFates> fates = new AtomicReference<>(SlotFates.NOT_JUDGED);
    try (CacheDiscovery discovery =
        new CacheDiscovery(
            fx.cacheRoot, Duration.ofHours(1), InstantSource.system(), false, new ParseErrors())) {
      discovery.rescan();
      NodeStateProvider states =
          new NodeStateProvider(
              "node-a",
              discovery::current,
              StaticMetadataSource.disabled(),
              InstantSource.system(),
              Duration.ofMinutes(5),
              fates::get);

      ContainerState before = states.build().containers().getFirst();
      assertThat(before.unknown()).as("no pass yet: nothing judged").isEqualTo(2);
      assertThat(before.running()).isZero();
      assertThat(before.devices().getFirst().usedBytes()).isEqualTo(2 * QUARTER_GIB);

      NodeEvidence evidence = fx.evidence();
      fates.set(SlotFates.of(evidence));
      assertThat(fates.get().size()).isEqualTo(2);
      ContainerState judged = states.build().containers().getFirst();
      assertThat(judged.running()).isEqualTo(1);
      assertThat(judged.gone()).isEqualTo(1);
      assertThat(judged.unknown()).isZero();
      assertThat(judged.devices().getFirst().usedBytes()).isEqualTo(QUARTER_GIB);
      assertThat(judged.devices().getFirst().goneBytes()).isEqualTo(QUARTER_GIB);

      // Slot 8 reused by a new process after the pass: not judged yet, never taken for the old
      // verdict.
      fx.region(
          UID,
          "main",
          OperatorFixture.v12(1L << 30, 0)
              .slot(7, 3007, 1, usage(QUARTER_GIB, 0))
              .slot(9, 3009, 1, usage(QUARTER_GIB, 0))
              .build());
      discovery.rescan();
      ContainerState after = states.build().containers().getFirst();
      assertThat(after.running()).isEqualTo(1);
      assertThat(after.gone()).isZero();
      assertThat(after.unknown()).isEqualTo(1);
      assertThat(after.devices().getFirst().usedBytes()).isEqualTo(2 * QUARTER_GIB);
    }
  }
}

package io.vgpu.exporter.node;

import static io.vgpu.exporter.testing.OperatorFixture.usage;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.doctor.RepairPlan;
import io.vgpu.exporter.testing.OperatorFixture;
import io.vgpu.hostpid.testing.ProcEntry;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 31 item 1: the evidence pass's {@code maps} read budget. A read that stops at its bound is
 * never complete (the mapping of the slot's region may be on the next line), and one tenant cannot
 * spend the pass so that its neighbours are not judged. Before, a truncated read counted as
 * complete: a live neighbour's slot was judged GONE and {@code cleanup --apply} freed it.
 */
class MapsBudgetAttackTest {
  private static final long GIB = 1L << 30;

  /** One maps line that matches nothing the judgment looks for (~100 bytes). */
  private static final String PADDING =
      "7f3000000000-7f3000001000 r-xp 00000000 08:01 4242                 /usr/lib/libpadding.so.1";

  @TempDir Path tmp;

  private static void pad(ProcEntry p, int lines) {
    for (int i = 0; i < lines; i++) {
      p.maps.add(PADDING);
    }
  }

  @Test
  void budgetSpentInsideALiveProcessesMaps_itsSlotIsUnknownAndCleanupFreesNothing() {
    OperatorFixture fx = new OperatorFixture(tmp);
    Path region =
        fx.region(
            OperatorFixture.UID_A,
            "main",
            // container pid 8 runs as host pid 1008; the slot recorded 5555 (HAMi's wrong host
            // pid), so only its maps tie the slot to the live process
            OperatorFixture.v12(4 * GIB, 50).slot(8, 5555, 1, usage(3 * GIB, 30)).build());
    // A live CUDA process: libcuda first, then many libraries, its region's mapping last.
    ProcEntry live = fx.process(1008, 8).mapsLibcuda();
    pad(live, 200);
    live.mapsRegion(region).write();

    // The budget ends in the middle of its ~20 KB of maps.
    NodeEvidence e = fx.collector(10_000).collect(List.of(fx.cacheRoot()));

    NodeEvidence.Container c = e.containers().getFirst();
    NodeEvidence.Region r = c.regions().getFirst();
    var slot = r.latest().orElseThrow().processes().getFirst();
    assertThat(e.fateOf(c, r, slot)).isEqualTo(NodeEvidence.SlotFate.UNKNOWN);
    assertThat(e.podsNotFullySeen()).containsExactly(OperatorFixture.UID_A);
    assertThat(e.unseenProcesses()).containsEntry("pod_budget", 1);
    assertThat(RepairPlan.cleanup(e).actions()).isEmpty();
  }

  @Test
  void mapsLargerThanTheRead_areNotSeenWhole_evenWithBudgetLeft() {
    OperatorFixture fx = new OperatorFixture(tmp);
    Path region =
        fx.region(
            OperatorFixture.UID_A,
            "main",
            OperatorFixture.v12(4 * GIB, 50).slot(8, 5555, 1, usage(GIB, 30)).build());
    ProcEntry live = fx.process(1008, 8).mapsLibcuda();
    pad(live, 50_000); // ~4.6 MB: more than one process's 4 MiB bound
    live.mapsRegion(region).write();

    NodeEvidence e =
        fx.collector(EvidenceCollector.DEFAULT_MAPS_BYTES_PER_PASS, 64L << 20)
            .collect(List.of(fx.cacheRoot()));

    NodeEvidence.Container c = e.containers().getFirst();
    NodeEvidence.Region r = c.regions().getFirst();
    var slot = r.latest().orElseThrow().processes().getFirst();
    assertThat(e.fateOf(c, r, slot)).isEqualTo(NodeEvidence.SlotFate.UNKNOWN);
    assertThat(e.unseenProcesses()).containsEntry("maps_too_large", 1);
  }

  @Test
  void oneTenantsHugeMaps_cannotLeaveItsNeighbourUnjudged() {
    OperatorFixture fx = new OperatorFixture(tmp);
    // The attacker: 20 processes of ~100 KB of maps each, pids before the neighbour's.
    for (int i = 0; i < 20; i++) {
      ProcEntry p = fx.process(1001 + i, 1 + i).pod(OperatorFixture.UID_B).mapsLibcuda();
      pad(p, 1000);
      p.write();
    }
    // The neighbour: one live process (slot 8) and one slot whose process is gone (slot 9).
    Path region =
        fx.region(
            OperatorFixture.UID_A,
            "main",
            OperatorFixture.v12(4 * GIB, 50)
                .slot(8, 2008, 1, usage(GIB, 30))
                .slot(9, 2009, 1, usage(GIB, 30))
                .build());
    fx.process(2008, 8).gpu(region).write();

    // 1 MiB per pass: the attacker alone would spend it (20 x 100 KB) before pid 2008 is read.
    NodeEvidence e = fx.collector(1 << 20).collect(List.of(fx.cacheRoot()));

    NodeEvidence.Container c = e.containers().getFirst();
    NodeEvidence.Region r = c.regions().getFirst();
    var fates =
        r.latest().orElseThrow().processes().stream()
            .map(s -> s.pid() + "=" + e.fateOf(c, r, s))
            .sorted()
            .toList();
    assertThat(fates).containsExactly("8=ALIVE", "9=GONE");
    assertThat(e.podsNotFullySeen()).containsExactly(OperatorFixture.UID_B);
    assertThat(e.unseenProcesses().get("pod_budget")).isPositive();
  }
}

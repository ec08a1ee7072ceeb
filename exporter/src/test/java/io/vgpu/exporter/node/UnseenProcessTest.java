package io.vgpu.exporter.node;

import static io.vgpu.exporter.testing.OperatorFixture.usage;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.doctor.RepairPlan;
import io.vgpu.exporter.testing.OperatorFixture;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A slot whose process cannot be seen is not a dead slot. Without CAP_SYS_PTRACE (the chart's write
 * modes run as uid 0 with DAC_OVERRIDE only) the exporter cannot read the {@code maps} of a tenant
 * process of another uid; when that slot also recorded a wrong host pid, nothing ties it to its
 * live process, and judging it GONE let {@code cleanup --apply} free a live process's slot (its
 * memory then escapes the container's limit).
 */
class UnseenProcessTest {
  private static final long GIB = 1L << 30;

  @TempDir Path tmp;

  @Test
  void slotOfAProcessWhoseMapsCannotBeRead_isUnknownAndNeverCleanedUp() throws Exception {
    OperatorFixture fx = new OperatorFixture(tmp);
    Path region =
        fx.region(
            OperatorFixture.UID_A,
            "main",
            OperatorFixture.v12(4 * GIB, 50)
                .slot(7, 1007, 1, usage(GIB, 30))
                // container pid 8 runs as host pid 1008; the slot recorded 5555 (wrong)
                .slot(8, 5555, 1, usage(GIB, 30))
                .build());
    fx.process(1007, 7).gpu(region).write();
    fx.process(1008, 8).gpu(region).write();
    // The maps of 1008 cannot be read (EACCES for real; a directory here, which no read opens).
    Path maps = fx.proc.resolve("1008/maps");
    Files.delete(maps);
    Files.createDirectory(maps);

    NodeEvidence e =
        fx.collector(EvidenceCollector.DEFAULT_MAPS_BYTES_PER_PASS)
            .collect(List.of(fx.cacheRoot()));

    NodeEvidence.Container c = e.containers().getFirst();
    NodeEvidence.Region r = c.regions().getFirst();
    var slots = r.latest().orElseThrow().processes();
    var fates = slots.stream().map(s -> s.pid() + "=" + e.fateOf(c, r, s)).sorted().toList();
    assertThat(fates).containsExactly("7=ALIVE", "8=UNKNOWN");
    assertThat(e.podsNotFullySeen()).containsExactly(OperatorFixture.UID_A);
    assertThat(RepairPlan.cleanup(e).actions()).isEmpty();
  }

  @Test
  void everyProcessSeen_aSlotNoProcessHoldsIsGone() {
    OperatorFixture fx = new OperatorFixture(tmp);
    Path region =
        fx.region(
            OperatorFixture.UID_A,
            "main",
            OperatorFixture.v12(4 * GIB, 50)
                .slot(7, 1007, 1, usage(GIB, 30))
                .slot(8, 5555, 1, usage(GIB, 30))
                .build());
    fx.process(1007, 7).gpu(region).write();

    NodeEvidence e =
        fx.collector(EvidenceCollector.DEFAULT_MAPS_BYTES_PER_PASS)
            .collect(List.of(fx.cacheRoot()));

    NodeEvidence.Container c = e.containers().getFirst();
    NodeEvidence.Region r = c.regions().getFirst();
    var fates =
        r.latest().orElseThrow().processes().stream()
            .map(s -> s.pid() + "=" + e.fateOf(c, r, s))
            .sorted()
            .toList();
    assertThat(fates).containsExactly("7=ALIVE", "8=GONE");
    assertThat(e.podsNotFullySeen()).isEmpty();
    assertThat(RepairPlan.cleanup(e).actions()).hasSize(1);
  }
}

package io.vgpu.exporter.node;

import static io.vgpu.exporter.testing.OperatorFixture.usage;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.testing.OperatorFixture;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * One evidence pass reads a bounded number of {@code maps} bytes over all pod processes (tenants
 * control how large their maps are): past the budget, processes are left out and counted, not read.
 */
class EvidenceBudgetTest {
  private static final long GIB = 1L << 30;

  @TempDir Path tmp;

  @Test
  void mapsBudgetSpent_laterProcessesAreCountedNotRead() {
    OperatorFixture fx = new OperatorFixture(tmp);
    Path region =
        fx.region(
            OperatorFixture.UID_A,
            "main",
            OperatorFixture.v12(4 * GIB, 50)
                .slot(7, 1007, 1, usage(GIB, 30))
                .slot(8, 1008, 1, usage(GIB, 30))
                .slot(9, 1009, 1, usage(GIB, 30))
                .build());
    for (int i = 0; i < 3; i++) {
      fx.process(1007 + i, 7 + i).gpu(region).write();
    }
    EvidenceCollector unbounded = fx.collector(EvidenceCollector.DEFAULT_MAPS_BYTES_PER_PASS);
    NodeEvidence all = unbounded.collect(List.of(fx.cacheRoot()));
    assertThat(all.processes()).hasSize(3).allMatch(NodeEvidence.PodProcess::usesGpu);
    assertThat(unbounded.lastUninspectedProcesses()).isZero();

    // Each fake process's maps is ~300 bytes, its libcuda line first: a 100-byte budget is spent
    // inside the first file. The slots' recorded host pids still name the processes (that path
    // reads no maps), but no maps beyond the budget was read: nobody is seen using the GPU. The
    // first process was read in part (the pod's share is a quarter of the pass's), which is not
    // seen whole either: all three are counted.
    EvidenceCollector bounded = fx.collector(100);
    NodeEvidence evidence = bounded.collect(List.of(fx.cacheRoot()));
    assertThat(bounded.lastUninspectedProcesses()).isEqualTo(3);
    assertThat(evidence.unseenProcesses()).containsEntry("pod_budget", 3);
    assertThat(evidence.podsNotFullySeen()).containsExactly(OperatorFixture.UID_A);
    assertThat(evidence.processes()).noneMatch(NodeEvidence.PodProcess::usesGpu);
  }
}

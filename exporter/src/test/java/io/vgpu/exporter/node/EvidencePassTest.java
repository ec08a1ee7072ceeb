package io.vgpu.exporter.node;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vgpu.exporter.nvml.NvmlSnapshot;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * The pass every surface renders: a view reuses the latest pass while it covered the same
 * directories and runs a new one (published for the metrics too) when discovery's directories
 * differ, so a view and the scrapes after it judge the same containers.
 */
class EvidencePassTest {
  static NodeEvidence empty() {
    return new NodeEvidence(
        Instant.EPOCH,
        Duration.ZERO,
        List.of(),
        List.of(),
        NvmlSnapshot.unavailable(Instant.EPOCH, NodeEvidence.NVML_NOT_QUERIED),
        Optional.empty(),
        NodeEvidence.Thresholds.defaults());
  }

  @Test
  void covering_sameDirectoriesReused_otherDirectoriesGatheredAndPublished() {
    List<List<Path>> gathered = new ArrayList<>();
    AtomicReference<List<Path>> discovered = new AtomicReference<>(List.of(Path.of("/c/a_x")));
    EvidencePass pass =
        new EvidencePass(
            discovered::get,
            dirs -> {
              gathered.add(dirs);
              return empty();
            },
            Duration.ofSeconds(5));
    assertThat(pass.latest()).isEmpty();
    assertThat(pass.fates()).isSameAs(SlotFates.NOT_JUDGED);

    EvidencePass.Pass first = pass.runOnce();
    assertThat(pass.covering(List.of(Path.of("/c/a_x")))).isSameAs(first);
    assertThat(gathered).hasSize(1);

    EvidencePass.Pass second = pass.covering(List.of(Path.of("/c/a_x"), Path.of("/c/b_y")));
    assertThat(second).isNotSameAs(first);
    assertThat(second.dirs()).containsExactly(Path.of("/c/a_x"), Path.of("/c/b_y"));
    assertThat(pass.latest()).contains(second);
    assertThat(gathered).hasSize(2);
  }

  @Test
  void interval_mustBePositive() {
    assertThatThrownBy(() -> new EvidencePass(List::of, d -> empty(), Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class);
  }
}

package io.vgpu.exporter.doctor;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What each of shrreg-tool's refusals means in cleanup's and unlock's report. */
class RepairOutcomeTest {
  private static final RepairPlan.Action ACTION =
      new RepairPlan.Action(
          RepairPlan.Kind.CLEANUP,
          Path.of("/x/a.cache"),
          "ns/pod main",
          List.of(7),
          List.of("0:7:0"),
          List.of(),
          "1:2");

  @Test
  void meaning_namesEveryRefusalThatChangedNothing() {
    assertThat(new RepairPlan.Outcome(ACTION, RepairPlan.WRONG_FILE_EXIT, "").meaning())
        .startsWith("nothing changed")
        .contains("no longer names the file");
    assertThat(new RepairPlan.Outcome(ACTION, RepairPlan.BAD_SEMAPHORE_EXIT, "").meaning())
        .startsWith("nothing changed")
        .contains("semaphore")
        .contains("recreate the pod");
    assertThat(new RepairPlan.Outcome(ACTION, 0, "").meaning()).isEmpty();
  }
}

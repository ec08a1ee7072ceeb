package io.vgpu.exporter.cli;

import io.vgpu.exporter.doctor.RepairPlan;
import io.vgpu.exporter.node.NodeEvidence;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;

/** {@code cleanup [--uid UID] [--apply]}: free slots of dead processes across the node. */
@Command(
    name = "cleanup",
    mixinStandardHelpOptions = true,
    description = {
      "Free region slots of processes that are gone (their memory stops counting against the",
      "limit). Dry run unless --apply. A slot is dead when no process of its pod that maps the",
      "region has its pid; changes go through shrreg-tool under the region lock.",
      "Exit: 0 nothing to do / applied, 1 dry run found work, 2 an action failed, 3 could not run."
    })
public final class CleanupCommand extends RepairCommand implements Callable<Integer> {
  @Override
  RepairPlan plan(NodeEvidence e) {
    return RepairPlan.cleanup(e);
  }

  @Override
  public Integer call() {
    return run();
  }
}

package io.vgpu.exporter.cli;

import io.vgpu.exporter.doctor.RepairPlan;
import io.vgpu.exporter.node.NodeEvidence;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;

/**
 * {@code unlock [--uid UID] [--apply]}: release slot-table locks of dead holders across the node.
 */
@Command(
    name = "unlock",
    mixinStandardHelpOptions = true,
    description = {
      "Release region slot-table locks whose holder is gone. Never touches a live holder's lock.",
      "Dry run unless --apply; changes go through shrreg-tool --force-unlock --holder PID.",
      "Exit: 0 nothing to do / applied, 1 dry run found work, 2 an action failed, 3 could not run."
    })
public final class UnlockCommand extends RepairCommand implements Callable<Integer> {
  @Override
  RepairPlan plan(NodeEvidence e) {
    return RepairPlan.unlock(e);
  }

  @Override
  public Integer call() {
    return run();
  }
}

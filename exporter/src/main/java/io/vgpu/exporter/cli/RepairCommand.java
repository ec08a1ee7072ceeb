package io.vgpu.exporter.cli;

import io.vgpu.exporter.doctor.Json;
import io.vgpu.exporter.doctor.RepairPlan;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.text.TenantText;
import java.nio.file.Path;
import java.util.List;
import picocli.CommandLine;

/** The shared body of {@code cleanup} and {@code unlock}: plan, print, apply only with --apply. */
abstract class RepairCommand implements FlagOptions.Host {
  @CommandLine.Spec CommandLine.Model.CommandSpec spec;
  @CommandLine.Mixin NodeOptions node = new NodeOptions();

  @CommandLine.Option(
      names = "--apply",
      description = "Make the changes (default: dry run, print what would change).")
  boolean apply;

  @CommandLine.Option(
      names = "--shrreg-tool",
      defaultValue = "${env:VGPU_SHRREG_TOOL:-shrreg-tool}",
      description =
          "The shrreg-tool binary that applies changes under the region lock (default ${DEFAULT-VALUE}).")
  Path tool;

  @Override
  public List<io.vgpu.exporter.config.Flag<?>> flags() {
    return NodeOptions.PATHS;
  }

  abstract RepairPlan plan(NodeEvidence e);

  /**
   * 0: nothing to do or all applied; 1: dry run found work; 2: an action failed; 3: could not run
   * (the cache root does not exist).
   */
  int run() {
    if (!NodeOptions.targetsExist(List.of(node.cacheRoot()), true, spec.commandLine().getErr())) {
      return 3;
    }
    NodeEvidence e = node.filesOnly().collect(List.of(node.cacheRoot()));
    if (node.uid != null) {
      e = e.forPod(node.uid);
    }
    RepairPlan plan = plan(e);
    List<RepairPlan.Outcome> outcomes = apply ? plan.apply(tool) : List.of();
    var out = spec.commandLine().getOut();
    if (node.json) {
      out.println(Json.write(plan.model(apply, outcomes)));
    } else {
      if (plan.actions().isEmpty()) {
        out.println("nothing to do");
      }
      for (RepairPlan.Action a : plan.actions()) {
        out.println(
            (apply ? "" : "would ")
                + (a.kind() == RepairPlan.Kind.CLEANUP
                    ? "free dead slots in "
                    : "release the lock of ")
                + TenantText.clean(a.file()));
        a.details().forEach(d -> out.println("  " + TenantText.clean(d)));
        out.println("  shrreg-tool " + TenantText.clean(String.join(" ", a.toolArgs())));
        outcomes.stream()
            .filter(o -> o.action().equals(a))
            .findFirst()
            .ifPresent(o -> RepairOutput.lines(o).forEach(l -> out.println("  -> " + l)));
      }
      plan.skipped().forEach(s -> out.println("skipped " + TenantText.clean(s)));
      if (!apply && !plan.actions().isEmpty()) {
        out.println("dry run: add --apply to make these changes");
      }
    }
    out.flush();
    if (outcomes.stream().anyMatch(o -> o.exitCode() != 0)) {
      return 2;
    }
    return !apply && !plan.actions().isEmpty() ? 1 : 0;
  }
}

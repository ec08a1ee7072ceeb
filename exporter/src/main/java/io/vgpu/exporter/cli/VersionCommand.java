package io.vgpu.exporter.cli;

import io.vgpu.exporter.metrics.BuildInfo;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/** {@code version}: print version and revision. */
@Command(
    name = "version",
    description = "Print the version and exit.",
    mixinStandardHelpOptions = true)
final class VersionCommand implements Callable<Integer> {
  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Override
  public Integer call() {
    BuildInfo b = BuildInfo.load();
    spec.commandLine()
        .getOut()
        .printf(
            "vgpu-exporter %s (revision %s, java %s)%n",
            b.version(), b.revision(), Runtime.version());
    spec.commandLine().getOut().flush();
    return 0;
  }
}

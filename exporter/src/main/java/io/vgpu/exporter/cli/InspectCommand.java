package io.vgpu.exporter.cli;

import io.vgpu.exporter.doctor.Inspection;
import io.vgpu.exporter.doctor.Json;
import io.vgpu.exporter.node.NodeEvidence;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Parameters;

/** {@code inspect [PATH...] [--json]}: regions, processes and host pids, from the node. */
@Command(
    name = "inspect",
    mixinStandardHelpOptions = true,
    description = {
      "Show shared regions as the node sees them: header, devices, limits, usage and processes with",
      "the recorded host pid, the real one and liveness. PATH: a cache file, a <podUID>_<ctr>",
      "directory or a cache root (default: --cache-root). Reads HAMi-core and libvgpu files alike.",
      "Exit: 0 ok, 3 nothing readable found."
    })
public final class InspectCommand implements Callable<Integer>, FlagOptions.Host {
  @CommandLine.Spec CommandLine.Model.CommandSpec spec;
  @Mixin NodeOptions node = new NodeOptions();

  @Override
  public List<io.vgpu.exporter.config.Flag<?>> flags() {
    return NodeOptions.PATHS;
  }

  @Parameters(arity = "0..*", paramLabel = "PATH", description = "Files or directories to inspect.")
  List<Path> paths = List.of();

  @Override
  public Integer call() {
    NodeEvidence e = node.filesOnly().collect(paths.isEmpty() ? List.of(node.cacheRoot()) : paths);
    if (node.uid != null) {
      e = e.forPod(node.uid);
    }
    var out = spec.commandLine().getOut();
    out.print(
        node.json ? Json.write(Inspection.model(e)) + System.lineSeparator() : Inspection.text(e));
    out.flush();
    boolean anyReadable =
        e.containers().stream()
            .flatMap(c -> c.regions().stream())
            .anyMatch(r -> r.latest().isPresent());
    return anyReadable ? 0 : 3;
  }
}

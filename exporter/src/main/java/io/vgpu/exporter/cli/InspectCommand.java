package io.vgpu.exporter.cli;

import io.vgpu.exporter.doctor.Doctor;
import io.vgpu.exporter.doctor.DoctorReport;
import io.vgpu.exporter.doctor.Inspection;
import io.vgpu.exporter.doctor.Json;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.text.TenantText;
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
      "the recorded host pid, the real one and liveness (ALIVE, GONE, UNKNOWN), each container's",
      "verdict (the doctor's, same words). PATH: a cache file, a <podUID>_<ctr> directory or a",
      "cache root (default: --path.cache-root). Reads HAMi-core and libvgpu files alike.",
      "Exit: 0 ok, 3 nothing readable found or a PATH does not exist."
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
    List<Path> targets = paths.isEmpty() ? List.of(node.cacheRoot()) : paths;
    if (!NodeOptions.targetsExist(targets, paths.isEmpty(), spec.commandLine().getErr())) {
      return 3;
    }
    NodeEvidence e = node.filesOnly().collect(targets);
    if (node.uid != null) {
      e = e.forPod(node.uid);
    }
    DoctorReport report = Doctor.standard().run(e);
    var out = spec.commandLine().getOut();
    if (node.json) {
      out.print(Json.write(Inspection.model(e, report)) + System.lineSeparator());
    } else {
      if (e.containers().isEmpty()) {
        out.println(
            "no container directories (<podUID>_<container>) or cache files found in "
                + TenantText.clean(targets));
      }
      out.print(Inspection.text(e, report));
    }
    out.flush();
    boolean anyReadable =
        e.containers().stream()
            .flatMap(c -> c.regions().stream())
            .anyMatch(r -> r.latest().isPresent());
    return anyReadable ? 0 : 3;
  }
}

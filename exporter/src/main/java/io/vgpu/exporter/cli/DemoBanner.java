package io.vgpu.exporter.cli;

import io.vgpu.exporter.demo.DemoProblem;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * What {@code demo} prints once it serves: where to look, the deliberate problems (one pod each),
 * and the operator commands against the demo's own cache root and procfs, ready to paste, so the
 * tools can be tried on the demo the way they are used on a node.
 */
final class DemoBanner {
  private DemoBanner() {}

  static String text(
      String bind,
      int port,
      Path cacheRoot,
      Path procfs,
      boolean problems,
      Optional<Path> fakeNvml,
      Optional<Path> fakeNvmlConfig) {
    StringBuilder b = new StringBuilder();
    b.append(
        "vgpu-exporter demo: http://%s:%d/  (metrics: /metrics, JSON: /api/v1/containers); cache root %s%n"
            .formatted(bind, port, cacheRoot));
    b.append("  procfs %s (the demo's processes only)%n".formatted(procfs));
    String tool =
        Files.isExecutable(Path.of("bin", "vgpu-exporter")) ? "bin/vgpu-exporter" : "vgpu-exporter";
    String paths = " --path.cache-root=" + cacheRoot + " --path.procfs=" + procfs;
    String nvml =
        fakeNvml.isPresent() && fakeNvmlConfig.isPresent()
            ? "FAKE_NVML_CONFIG=" + fakeNvmlConfig.get() + " "
            : "";
    String nvmlFlags =
        fakeNvml.isPresent() && fakeNvmlConfig.isPresent()
            ? " --nvml.library=" + fakeNvml.get()
            : " --no-nvml";
    if (problems) {
      b.append(
          "%nA healthy node but for one pod per deliberate problem (pod label %s):%n"
              .formatted(DemoProblem.LABEL));
      for (DemoProblem p : DemoProblem.values()) {
        b.append(
            "  %-38s %-17s %s%n"
                .formatted(p.namespace() + "/" + p.pod() + " " + p.container(), p.id(), p.what()));
      }
    }
    b.append(
        "%nThe operator tools on this node (in a cluster: kubectl -n NS exec POD -- vgpu-exporter ...):%n"
            .formatted());
    b.append("  %s%s doctor --problems%s%s%n".formatted(nvml, tool, paths, nvmlFlags));
    if (problems) {
      String shrreg =
          Files.isExecutable(Path.of("libvgpu", "build", "shrreg-tool"))
              ? " --shrreg-tool=libvgpu/build/shrreg-tool"
              : "";
      b.append(
          "  %s inspect --uid %s%s%n".formatted(tool, DemoProblem.HOSTPID_WRONG.podUid(), paths));
      b.append(
          "  %s cleanup --uid %s --apply%s%s%n"
              .formatted(tool, DemoProblem.ZOMBIE_SLOT.podUid(), shrreg, paths));
      b.append(
          "  %s unlock --uid %s --apply%s%s%n"
              .formatted(tool, DemoProblem.STUCK_LOCK.podUid(), shrreg, paths));
    } else {
      b.append("  %s inspect%s%n".formatted(tool, paths));
    }
    return b.toString();
  }
}

package io.vgpu.exporter.testing;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/** shrreg-tool for tests (built by libvgpu's Makefile, else compiled here). */
public final class ShrregTool {
  private ShrregTool() {}

  /** shrreg-tool as built by libvgpu's Makefile, else compiled here. */
  public static Path path() throws IOException, InterruptedException {
    Path built = Path.of("../libvgpu/build/shrreg-tool");
    Path src = Path.of("../libvgpu/tools/shrreg_tool.c");
    if (Files.isExecutable(built)
        && Files.exists(src)
        && Files.getLastModifiedTime(built).compareTo(Files.getLastModifiedTime(src)) >= 0) {
      return built.toAbsolutePath();
    }
    assumeTrue(Files.exists(src), "libvgpu/tools/shrreg_tool.c not found");
    Path out = Path.of("target/shrreg-tool-test").toAbsolutePath();
    Process p =
        new ProcessBuilder(
                "gcc",
                "-std=gnu11",
                "-O1",
                "-D_GNU_SOURCE",
                "-I../libvgpu/include",
                "-I../libvgpu/src",
                "-o",
                out.toString(),
                src.toString(),
                // the tool links the region unit (as libvgpu's Makefile does)
                "../libvgpu/src/region.c",
                "../libvgpu/src/region_liveness.c",
                "../libvgpu/src/region_lock.c",
                "../libvgpu/src/region_sem.c",
                "../libvgpu/src/region_view.c",
                "../libvgpu/src/log.c",
                "../libvgpu/src/config.c",
                "-ldl",
                "-lpthread",
                "-lm")
            .redirectErrorStream(true)
            .start();
    String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assumeTrue(p.waitFor() == 0, "gcc could not build shrreg-tool: " + log);
    return out;
  }
}

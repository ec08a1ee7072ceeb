package io.vgpu.exporter.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/** shrreg-tool for tests, built by libvgpu's Makefile (the one recipe for it). */
public final class ShrregTool {
  private ShrregTool() {}

  /**
   * libvgpu's build/shrreg-tool, brought up to date first: make rebuilds it when any of its sources
   * changed. A build that fails fails the test (a hand-written compile line here once went stale
   * when the tool was split into several files, and every test using it was skipped).
   */
  public static synchronized Path path() throws IOException, InterruptedException {
    if (built != null) {
      return built; // made once per test JVM: the sources do not change during a run
    }
    Process p =
        new ProcessBuilder("make", "-s", "-C", "../libvgpu", "build/shrreg-tool")
            .redirectErrorStream(true)
            .start();
    String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (p.waitFor() != 0) {
      throw new IllegalStateException("make -C libvgpu build/shrreg-tool failed:\n" + log);
    }
    built = Path.of("../libvgpu/build/shrreg-tool").toAbsolutePath();
    return built;
  }

  private static Path built;
}

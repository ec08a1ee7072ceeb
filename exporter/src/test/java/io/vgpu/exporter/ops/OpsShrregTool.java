package io.vgpu.exporter.ops;

import java.nio.file.Path;

/** shrreg-tool for tests outside this package (built by libvgpu's Makefile, else here). */
public final class OpsShrregTool {
  private OpsShrregTool() {}

  public static Path path() throws Exception {
    return OpsCommandsTest.shrregTool();
  }
}

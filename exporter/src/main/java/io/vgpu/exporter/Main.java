package io.vgpu.exporter;

import io.vgpu.exporter.cli.Cli;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;

/** Entry point of {@code bin/vgpu-exporter}: the only place that calls System.exit. */
public final class Main {
  private Main() {}

  public static void main(String[] args) {
    PrintWriter out = new PrintWriter(System.out, true, StandardCharsets.UTF_8);
    PrintWriter err = new PrintWriter(System.err, true, StandardCharsets.UTF_8);
    int code = Cli.run(args, out, err);
    out.flush();
    err.flush();
    System.exit(code);
  }
}

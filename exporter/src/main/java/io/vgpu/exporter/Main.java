package io.vgpu.exporter;

import io.vgpu.exporter.cli.Cli;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;

/** Entry point of {@code bin/vgpu-exporter}: the only place that calls System.exit. */
public final class Main {
  /**
   * Jetty sizes its pools' padding by how many references fit a cache line; unless this property
   * says so, it asks the JVM whether oops are compressed through the platform MBean server, which
   * loads and registers all of JMX (~340 classes, a few MiB of metaspace and heap) in an exporter
   * that never serves JMX. The answer is known: heaps under 32 GiB compress oops (4-byte
   * references), so a 64-byte line holds 16.
   */
  static final String JETTY_REFERENCES_PER_CACHE_LINE =
      "org.eclipse.jetty.util.referencesPerCacheLine";

  private Main() {}

  public static void main(String[] args) {
    if (System.getProperty(JETTY_REFERENCES_PER_CACHE_LINE) == null) {
      System.setProperty(JETTY_REFERENCES_PER_CACHE_LINE, "16");
    }
    PrintWriter out = new PrintWriter(System.out, true, StandardCharsets.UTF_8);
    PrintWriter err = new PrintWriter(System.err, true, StandardCharsets.UTF_8);
    int code = Cli.run(args, out, err);
    out.flush();
    err.flush();
    System.exit(code);
  }
}

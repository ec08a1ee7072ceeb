package io.vgpu.exporter.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

/** The real Prometheus parser (promtool from Debian's prometheus package) as the judge. */
final class PromtoolLint {
  private PromtoolLint() {}

  static void assertValid(String exposition) throws IOException, InterruptedException {
    Process p =
        new ProcessBuilder("promtool", "check", "metrics").redirectErrorStream(true).start();
    try (OutputStream in = p.getOutputStream()) {
      in.write(exposition.getBytes(StandardCharsets.UTF_8));
    }
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as("promtool check metrics: %s", out).isZero();
  }
}

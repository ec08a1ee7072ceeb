package io.vgpu.exporter.metrics;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.vgpu.exporter.testing.TestNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code promtool check metrics} (Debian's prometheus package) lints the text exposition. */
class PromtoolCheckTest {
  @TempDir Path root;

  static boolean hasPromtool() {
    for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin").split(":", -1)) {
      if (Files.isExecutable(Path.of(dir, "promtool"))) {
        return true;
      }
    }
    return false;
  }

  @Test
  void promtoolCheckMetrics_standardNodeScrape_reportsNoProblems() throws Exception {
    assumeTrue(hasPromtool(), "promtool not installed (apt-get install prometheus); skipping lint");
    try (TestNode node = new TestNode(root)) {
      String text = TestNode.text(node.registry());
      Process p =
          new ProcessBuilder("promtool", "check", "metrics").redirectErrorStream(true).start();
      p.getOutputStream().write(text.getBytes(StandardCharsets.UTF_8));
      p.getOutputStream().close();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
      assertThat(out).as("promtool output").isEmpty();
      assertThat(p.exitValue()).isZero();
    }
  }

  @Test
  void promtoolCheckMetrics_brokenInput_isRejected() throws IOException, InterruptedException {
    assumeTrue(hasPromtool(), "promtool not installed; skipping");
    // Proves the check above can fail: a counter without _total is a lint problem.
    Process p =
        new ProcessBuilder("promtool", "check", "metrics").redirectErrorStream(true).start();
    p.getOutputStream()
        .write(
            "# HELP x_bytes y\n# TYPE x_bytes counter\nx_bytes 1\n"
                .getBytes(StandardCharsets.UTF_8));
    p.getOutputStream().close();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    p.waitFor(30, TimeUnit.SECONDS);
    assertThat(out).contains("counter metrics should have \"_total\" suffix");
  }
}

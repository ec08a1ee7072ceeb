package io.vgpu.exporter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code serve} on a port something else holds: one clear error line, no library ERROR before. */
class PortInUseTest {
  @Test
  void serve_onAPortInUse_printsOneErrorLineAndExitsTwo(@TempDir Path dir) throws Exception {
    Path root = Files.createDirectories(dir.resolve("containers"));
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      int port = taken.getLocalPort();
      Process p =
          new ProcessBuilder(
                  List.of(
                      Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                      "-cp",
                      System.getProperty("java.class.path"),
                      "io.vgpu.exporter.Main",
                      "serve",
                      "--path.cache-root=" + root,
                      "--kubernetes=false",
                      "--nvml=false",
                      "--web.listen-address=127.0.0.1",
                      "--web.listen-port=" + port))
              .redirectErrorStream(true)
              .start();
      assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("serve exits").isTrue();
      String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertThat(p.exitValue()).as(output).isEqualTo(2);
      assertThat(output)
          .contains("error: cannot serve on 127.0.0.1:" + port + ": Address already in use");
      assertThat(output).as(output).doesNotContain("level=ERROR").doesNotContain("\tat ");
    }
  }
}

package io.vgpu.exporter.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.testing.Await;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * {@code serve} in a child JVM under bin/vgpu-exporter's own JVM flags (its {@code -Xmx48m} and
 * {@code -XX:+ExitOnOutOfMemoryError} included), on a loopback port, with its output in a log: what
 * an attack that exhausts the heap ends shows up as a dead process and an OutOfMemoryError line.
 */
final class ForkedServe implements AutoCloseable {
  final int port;
  final Path log;
  private final Process process;

  private ForkedServe(int port, Path log, Process process) {
    this.port = port;
    this.log = log;
    this.process = process;
  }

  /** Starts {@code serve} over an empty cache root in {@code dir} and waits for its port. */
  static ForkedServe start(Path dir, List<String> extraFlags) throws IOException {
    Path root = Files.createDirectories(dir.resolve("containers"));
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(launcherJvmFlags());
    cmd.addAll(
        List.of(
            "-cp",
            System.getProperty("java.class.path"),
            "io.vgpu.exporter.Main",
            "serve",
            "--path.cache-root=" + root,
            "--kubernetes=false",
            "--nvml=false",
            "--node-name=flood-node",
            "--web.listen-address=127.0.0.1",
            "--web.listen-port=" + port,
            "--log.level=warn"));
    cmd.addAll(extraFlags);
    Path log = dir.resolve("exporter.log");
    Process p =
        new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    ForkedServe s = new ForkedServe(port, log, p);
    Await.until(
        Duration.ofSeconds(60),
        () -> {
          assertThat(p.isAlive()).as("exporter alive; log: %s", s.logText()).isTrue();
          try (Socket probe = new Socket()) {
            probe.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 1000);
            return true;
          } catch (IOException e) {
            return false;
          }
        });
    return s;
  }

  boolean alive() {
    return process.isAlive();
  }

  String logText() {
    try {
      return Files.readString(log);
    } catch (IOException e) {
      return "(log unreadable: " + e + ")";
    }
  }

  @Override
  public void close() {
    process.destroy();
    try {
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while closing", e);
    }
  }

  /** bin/vgpu-exporter's default JVM flags, read from the launcher so the test follows it. */
  static List<String> launcherJvmFlags() throws IOException {
    Path launcher = null;
    for (Path d = Path.of("").toAbsolutePath(); d != null; d = d.getParent()) {
      if (Files.isRegularFile(d.resolve("bin/vgpu-exporter"))) {
        launcher = d.resolve("bin/vgpu-exporter");
        break;
      }
    }
    assertThat(launcher).as("bin/vgpu-exporter above the working directory").isNotNull();
    Matcher m = Pattern.compile("default_opts=\\(([^)]*)\\)").matcher(Files.readString(launcher));
    assertThat(m.find()).as("default_opts in the launcher").isTrue();
    List<String> flags = List.of(m.group(1).trim().split("\\s+"));
    assertThat(flags).contains("-Xmx48m", "-XX:+ExitOnOutOfMemoryError");
    return flags;
  }
}

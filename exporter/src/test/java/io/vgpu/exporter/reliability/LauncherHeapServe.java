package io.vgpu.exporter.reliability;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * {@code serve} through {@code Main} in its own JVM with the launcher's JVM flags ({@code
 * bin/vgpu-exporter}'s {@code default_opts}: {@code -Xmx48m}, {@code -XX:+ExitOnOutOfMemoryError}),
 * as a node runs it: an attack that exhausts the heap ends this process, which a test sees.
 *
 * <p>{@code -Dattack.prepend-classpath=<jars>} puts other builds first on the class path (the
 * pre-fix jars, to check an attack test fails on the old code).
 */
final class LauncherHeapServe implements AutoCloseable {
  private static final Pattern LAUNCHER = Pattern.compile("(?s)default_opts=\\((.*?)\\)");

  final Process process;
  final Path log;
  final int port;
  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  private LauncherHeapServe(Process process, Path log, int port) {
    this.process = process;
    this.log = log;
    this.port = port;
  }

  /** The launcher's default JVM flags. */
  static List<String> launcherFlags() throws IOException {
    Path here = Path.of("").toAbsolutePath();
    for (Path p = here; p != null; p = p.getParent()) {
      Path launcher = p.resolve("bin/vgpu-exporter");
      if (Files.isRegularFile(launcher)) {
        Matcher m = LAUNCHER.matcher(Files.readString(launcher));
        if (!m.find()) {
          throw new IllegalStateException("no default_opts in " + launcher);
        }
        List<String> flags = new ArrayList<>();
        for (String f : m.group(1).trim().split("\\s+", -1)) {
          flags.add(f);
        }
        return flags;
      }
    }
    throw new IllegalStateException("bin/vgpu-exporter not found above " + here);
  }

  static LauncherHeapServe start(Path cacheRoot, Path work, String... extraArgs)
      throws IOException {
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    String prepend = System.getProperty("attack.prepend-classpath", "");
    String cp =
        (prepend.isEmpty() ? "" : prepend + java.io.File.pathSeparator)
            + System.getProperty("java.class.path");
    List<String> cmd = new ArrayList<>();
    cmd.add(javaBin);
    cmd.addAll(launcherFlags());
    cmd.addAll(
        List.of(
            "-cp",
            cp,
            "io.vgpu.exporter.Main",
            "serve",
            "--path.cache-root=" + cacheRoot,
            "--kubernetes=false",
            "--nvml=false",
            "--node-name=attack-node",
            "--web.listen-address=127.0.0.1",
            "--web.listen-port=" + port));
    cmd.addAll(List.of(extraArgs));
    Path log = work.resolve("exporter-" + port + ".log");
    ProcessBuilder pb =
        new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
    pb.environment().remove("JDK_JAVA_OPTIONS");
    pb.environment().remove("JAVA_TOOL_OPTIONS");
    return new LauncherHeapServe(pb.start(), log, port);
  }

  /** The status of one GET; -1 when no answer came (the process died or did not listen). */
  int status(String path, Duration timeout) {
    try {
      return http.send(
              HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
                  .timeout(timeout)
                  .build(),
              HttpResponse.BodyHandlers.discarding())
          .statusCode();
    } catch (IOException e) {
      return -1;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return -1;
    }
  }

  /** The body of one GET (the caller checked it answers). */
  String body(String path) throws IOException, InterruptedException {
    return http.send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
                .timeout(Duration.ofSeconds(30))
                .build(),
            HttpResponse.BodyHandlers.ofString())
        .body();
  }

  /** Waits for /metrics to answer 200 (false: the process died or the time ran out). */
  boolean awaitListening(Duration max) throws InterruptedException {
    long deadline = System.nanoTime() + max.toNanos();
    while (System.nanoTime() < deadline && process.isAlive()) {
      if (status("/metrics", Duration.ofSeconds(10)) == 200) {
        return true;
      }
      Thread.sleep(200);
    }
    return false;
  }

  String output() {
    try {
      String s = Files.readString(log);
      return s.length() > 4000 ? s.substring(s.length() - 4000) : s;
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  @Override
  public void close() {
    if (process.isAlive()) {
      process.destroy();
      try {
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
          process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while closing", e);
      }
    }
  }
}

package io.vgpu.exporter;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code serve} through {@link Main} in its own JVM, as the launcher runs it: a node that serves
 * /metrics and the status page loads nothing of JMX (Jetty would load and register the whole
 * platform MBean server just to learn whether references are compressed; README: Footprint).
 */
class MainProcessTest {
  @TempDir Path tmp;
  private Process exporter;

  @AfterEach
  void stop() throws InterruptedException {
    if (exporter != null && exporter.isAlive()) {
      exporter.destroy();
      if (!exporter.waitFor(10, TimeUnit.SECONDS)) {
        exporter.destroyForcibly();
      }
    }
  }

  @Test
  void serve_scrapedAndViewed_loadsNoJmx() throws Exception {
    Path cacheRoot = Files.createDirectory(tmp.resolve("containers"));
    Path classLog = tmp.resolve("classes.log");
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    ProcessBuilder pb =
        new ProcessBuilder(
                java,
                "-Xlog:class+load=info:file=" + classLog,
                "-cp",
                System.getProperty("java.class.path"),
                "io.vgpu.exporter.Main",
                "serve",
                "--path.cache-root=" + cacheRoot,
                "--kubernetes=false",
                "--nvml=false",
                "--node-name=main-process-test",
                "--web.listen-address=127.0.0.1",
                "--web.listen-port=" + port)
            .redirectErrorStream(true)
            .redirectOutput(tmp.resolve("exporter.log").toFile());
    pb.environment().remove("JDK_JAVA_OPTIONS");
    exporter = pb.start();

    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    String base = "http://127.0.0.1:" + port;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    int metrics = 0;
    while (System.nanoTime() < deadline && exporter.isAlive()) {
      try {
        metrics = status(http, base + "/metrics");
        if (metrics == 200) {
          break;
        }
      } catch (IOException e) {
        // not listening yet
      }
      Thread.sleep(100);
    }
    String output = Files.readString(tmp.resolve("exporter.log"));
    assertThat(metrics).as("/metrics; exporter output:\n" + output).isEqualTo(200);
    assertThat(status(http, base + "/")).isEqualTo(200);
    assertThat(status(http, base + "/readyz")).isEqualTo(200);

    String classes = Files.readString(classLog);
    assertThat(classes)
        .as("the server's pools are set up (Jetty's MemoryUtils loaded)")
        .contains("org.eclipse.jetty.util.MemoryUtils ");
    assertThat(classes.lines().filter(line -> line.contains(" javax.management.")).limit(5))
        .as("JMX classes loaded")
        .isEmpty();
  }

  private static int status(HttpClient http, String url) throws IOException, InterruptedException {
    return http.send(
            HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).build(),
            HttpResponse.BodyHandlers.discarding())
        .statusCode();
  }
}

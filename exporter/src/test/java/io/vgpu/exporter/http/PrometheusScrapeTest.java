package io.vgpu.exporter.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.vgpu.exporter.ExporterApp;
import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.TestNode;
import java.net.ServerSocket;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * A real Prometheus (Debian's package) started on 127.0.0.1 scrapes the exporter; a PromQL query
 * for a pod's memory returns what its region holds.
 */
class PrometheusScrapeTest {
  @TempDir Path tmp;

  static boolean hasPrometheus() {
    for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin").split(":", -1)) {
      if (Files.isExecutable(Path.of(dir, "prometheus"))) {
        return true;
      }
    }
    return false;
  }

  static int freePort() throws Exception {
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }

  @Test
  void prometheus_scrapesExporter_queryReturnsPodMemory() throws Exception {
    assumeTrue(hasPrometheus(), "prometheus not installed (apt-get install prometheus); skipping");
    Path root = Files.createDirectories(tmp.resolve("containers"));
    try (TestNode node = new TestNode(root);
        ExporterApp app =
            ExporterApp.builder(
                    HttpServerTest.config(root)
                        .with(io.vgpu.exporter.config.Flags.PROCFS, node.writeProcfs()))
                .metadata(node.metadata)
                .regionsOnly()
                .build()
                .start()) {
      int promPort = freePort();
      Path config = tmp.resolve("prometheus.yml");
      Files.writeString(
          config,
          """
          global:
            scrape_interval: 1s
          scrape_configs:
            - job_name: vgpu
              static_configs:
                - targets: ['127.0.0.1:%d']
          """
              .formatted(app.port()));
      Process prom =
          new ProcessBuilder(
                  "prometheus",
                  "--config.file=" + config,
                  "--storage.tsdb.path=" + tmp.resolve("data"),
                  "--web.listen-address=127.0.0.1:" + promPort)
              .redirectErrorStream(true)
              .redirectOutput(tmp.resolve("prometheus.log").toFile())
              .start();
      try {
        HttpClient http = HttpClient.newHttpClient();
        String q =
            "vgpu_container_memory_used_bytes{namespace=\"ml\",pod=\"train-0\",device_index=\"0\"}";
        URI uri =
            URI.create(
                "http://127.0.0.1:"
                    + promPort
                    + "/api/v1/query?query="
                    + URLEncoder.encode(q, StandardCharsets.UTF_8));
        double[] value = {Double.NaN};
        Await.until(
            Duration.ofSeconds(60),
            () -> {
              HttpResponse<String> r =
                  http.send(
                      HttpRequest.newBuilder(uri).build(), HttpResponse.BodyHandlers.ofString());
              JsonNode result =
                  JsonMapper.builder().build().readTree(r.body()).path("data").path("result");
              if (result.size() != 1) {
                return false;
              }
              value[0] = Double.parseDouble(result.get(0).path("value").get(1).asString());
              return true;
            });
        assertThat(value[0]).isEqualTo(1024.0 * 1024 * 1024);
        // The scrape itself was healthy.
        URI up = URI.create("http://127.0.0.1:" + promPort + "/api/v1/query?query=up");
        String upBody =
            http.send(HttpRequest.newBuilder(up).build(), HttpResponse.BodyHandlers.ofString())
                .body();
        assertThat(upBody).contains("\"value\":[").contains(",\"1\"]");
      } finally {
        prom.destroy();
        if (!prom.waitFor(10, TimeUnit.SECONDS)) {
          prom.destroyForcibly();
        }
      }
    }
  }
}

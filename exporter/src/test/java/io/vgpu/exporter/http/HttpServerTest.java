package io.vgpu.exporter.http;

import static io.vgpu.exporter.testing.TestNode.UID_TRAIN;
import static org.assertj.core.api.Assertions.assertThat;

import io.prometheus.metrics.expositionformats.generated.com_google_protobuf_4_36_2.Metrics;
import io.vgpu.exporter.ExporterApp;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.config.Flags;
import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestNode;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.GZIPInputStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/** The HTTP surface over real sockets: content negotiation, health, JSON, landing page. */
class HttpServerTest {
  @TempDir static Path root;
  static TestNode node;
  static ExporterApp app;
  static final HttpClient CLIENT = HttpClient.newHttpClient();

  static ExporterConfig config(Path cacheRoot) {
    return ExporterConfig.defaults()
        .with(Flags.CACHE_ROOT, cacheRoot)
        .with(Flags.WEB_LISTEN_PORT, 0)
        .with(Flags.WEB_LISTEN_ADDRESS, "127.0.0.1")
        .with(Flags.NODE_NAME, "node-a")
        .with(Flags.KUBERNETES, false)
        .with(Flags.NVML, false);
  }

  @BeforeAll
  static void start() throws IOException {
    node = new TestNode(root);
    // The slots' processes live in a procfs fixture: the one judgment calls them ALIVE.
    app =
        ExporterApp.builder(config(root).with(Flags.PROCFS, node.writeProcfs()))
            .metadata(node.metadata)
            .regionsOnly()
            .build()
            .start();
    Await.until(Duration.ofSeconds(10), () -> app.discovery().current().generation() > 0);
  }

  @AfterAll
  static void stop() {
    app.close();
    node.close();
  }

  static HttpResponse<byte[]> get(String pathAndQuery, String... headers) throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + app.port() + pathAndQuery));
    for (int i = 0; i < headers.length; i += 2) {
      b.header(headers[i], headers[i + 1]);
    }
    return CLIENT.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
  }

  static String body(HttpResponse<byte[]> r) {
    return new String(r.body(), StandardCharsets.UTF_8);
  }

  @Test
  void metrics_noAcceptHeader_servesPrometheusText() throws Exception {
    var r = get("/metrics");
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(r.headers().firstValue("Content-Type"))
        .hasValueSatisfying(v -> assertThat(v).startsWith("text/plain; version=0.0.4"));
    Samples s = Samples.parse(body(r));
    assertThat(s.find("vgpu_container_memory_used_bytes", "pod_uid", UID_TRAIN)).hasSize(2);
  }

  @Test
  void metrics_acceptOpenMetrics_servesOpenMetricsWithEof() throws Exception {
    var r = get("/metrics", "Accept", "application/openmetrics-text; version=1.0.0; charset=utf-8");
    assertThat(r.headers().firstValue("Content-Type"))
        .hasValueSatisfying(v -> assertThat(v).startsWith("application/openmetrics-text"));
    assertThat(body(r))
        .contains("# TYPE vgpu_container_oom_rejections counter")
        .endsWith("# EOF\n");
    assertThat(body(r)).contains("# UNIT vgpu_container_memory_used_bytes bytes");
  }

  @Test
  void metrics_acceptProtobuf_servesDelimitedMetricFamilies() throws Exception {
    var r =
        get(
            "/metrics",
            "Accept",
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited");
    assertThat(r.headers().firstValue("Content-Type"))
        .hasValueSatisfying(v -> assertThat(v).contains("application/vnd.google.protobuf"));
    List<String> names = new ArrayList<>();
    try (InputStream in = new ByteArrayInputStream(r.body())) {
      Metrics.MetricFamily f;
      while ((f = Metrics.MetricFamily.parseDelimitedFrom(in)) != null) {
        names.add(f.getName());
      }
    }
    assertThat(names).contains("vgpu_container_memory_used_bytes", "hami_vgpu_memory_used_bytes");
  }

  @Test
  void metrics_acceptGzip_compressesBody() throws Exception {
    var r = get("/metrics", "Accept-Encoding", "gzip");
    assertThat(r.headers().firstValue("Content-Encoding")).contains("gzip");
    String text;
    try (InputStream in = new GZIPInputStream(new ByteArrayInputStream(r.body()))) {
      text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
    assertThat(text).contains("vgpu_container_memory_limit_bytes{");
  }

  @Test
  void metrics_nameFilter_returnsOnlyRequestedFamilies() throws Exception {
    var r =
        get("/metrics?name[]=vgpu_container_memory_used_bytes&name[]=vgpu_exporter_apiserver_up");
    assertThat(Samples.parse(body(r)).all())
        .extracting(Samples.Sample::name)
        .containsOnly("vgpu_container_memory_used_bytes", "vgpu_exporter_apiserver_up")
        .contains("vgpu_container_memory_used_bytes", "vgpu_exporter_apiserver_up");
  }

  @Test
  void healthz_always_ok() throws Exception {
    var r = get("/healthz");
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(body(r)).isEqualTo("ok\n");
  }

  @Test
  void readyz_afterFirstDiscovery_isReady() throws Exception {
    var r = get("/readyz");
    assertThat(r.statusCode()).isEqualTo(200);
    assertThat(body(r)).startsWith("ready");
  }

  @Test
  void readyz_cacheRootMissing_isNotReadyWithReason() throws Exception {
    try (ExporterApp other =
        ExporterApp.builder(config(root.resolve("absent")))
            .metadata(node.metadata)
            .regionsOnly()
            .build()
            .start()) {
      Await.until(Duration.ofSeconds(10), () -> other.discovery().current().generation() > 0);
      var r =
          CLIENT.send(
              HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + other.port() + "/readyz"))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(r.statusCode()).isEqualTo(503);
      assertThat(r.body())
          .startsWith("not ready")
          .contains("cache-root:")
          .contains("does not exist");
    }
  }

  @Test
  void readyz_apiServerDown_staysReadyAndSaysWhy() throws Exception {
    try (ExporterApp other =
        ExporterApp.builder(config(root))
            .metadata(new io.vgpu.exporter.metrics.CollectorsTestSupport.Down())
            .regionsOnly()
            .build()
            .start()) {
      Await.until(Duration.ofSeconds(10), () -> other.discovery().current().generation() > 0);
      var r =
          CLIENT.send(
              HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + other.port() + "/readyz"))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(r.statusCode()).isEqualTo(200);
      assertThat(r.body()).startsWith("ready").contains("kubernetes: API server unreachable");
    }
  }

  @Test
  void containersApi_listsEveryContainerWithDevicesAndFiles() throws Exception {
    var r = get("/api/v1/containers");
    assertThat(r.headers().firstValue("Content-Type"))
        .hasValueSatisfying(v -> assertThat(v).startsWith("application/json"));
    JsonNode json = JsonMapper.builder().build().readTree(r.body());
    assertThat(json.get("node").asString()).isEqualTo("node-a");
    assertThat(json.get("containers")).hasSize(4);
    JsonNode train = null;
    for (JsonNode c : json.get("containers")) {
      if (c.get("pod_uid").asString().equals(UID_TRAIN)) {
        train = c;
      }
    }
    assertThat(train).isNotNull();
    assertThat(train.get("pod").asString()).isEqualTo("train-0");
    assertThat(train.get("devices")).hasSize(2);
    assertThat(train.get("devices").get(0).get("used_bytes").asLong()).isEqualTo(1024L << 20);
    assertThat(train.get("files").get(0).get("layout").asString()).isEqualTo("v1.2");
    assertThat(train.get("files").get(0).get("processes")).hasSize(2);
  }

  @Test
  void landingPage_listsContainersAndLinks() throws Exception {
    var r = get("/");
    String html = body(r);
    assertThat(r.headers().firstValue("Content-Type"))
        .hasValueSatisfying(v -> assertThat(v).startsWith("text/html"));
    assertThat(html)
        .contains(
            "href=\"/metrics\"", "href=\"/api/v1/containers\"", "train-0", "serve-1", "prep-done");
  }
}

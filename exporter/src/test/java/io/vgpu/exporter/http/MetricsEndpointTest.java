package io.vgpu.exporter.http;

import static org.assertj.core.api.Assertions.assertThat;

import io.javalin.Javalin;
import io.javalin.compression.CompressionStrategy;
import io.prometheus.metrics.exporter.common.PrometheusScrapeHandler;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.vgpu.exporter.metrics.CollectorStats;
import io.vgpu.exporter.metrics.MetricNames;
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
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.stream.Collectors;
import java.util.zip.GZIPInputStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The cached /metrics path against client_java's own scrape handler, over real sockets and the same
 * registry: for every Accept and Accept-Encoding a scraper sends, the status, Content-Type,
 * Content-Encoding and decoded body must be the same.
 */
class MetricsEndpointTest {
  @TempDir static Path root;
  static TestNode node;
  static Javalin server;
  static final HttpClient CLIENT = HttpClient.newHttpClient();

  /** Timing families differ scrape to scrape. */
  static final List<String> VOLATILE =
      List.of(MetricNames.EXPORTER_COLLECTOR_DURATION, MetricNames.EXPORTER_SCRAPE_DURATION);

  @BeforeAll
  static void start() throws IOException {
    node = new TestNode(root);
    PrometheusRegistry registry = node.registry();
    // The exporter collector reports the previous scrape's collector outcomes: warm it up so the
    // first compared pair does not differ by that.
    registry.scrape();
    MetricsEndpoint ours = new MetricsEndpoint(registry, Duration.ZERO, new CollectorStats());
    PrometheusScrapeHandler theirs = new PrometheusScrapeHandler(registry);
    server =
        Javalin.create(
                cfg -> {
                  cfg.startup.showJavalinBanner = false;
                  cfg.http.compressionStrategy = CompressionStrategy.NONE;
                  cfg.routes.get("/ours", ours::handle);
                  cfg.routes.get("/theirs", ctx -> theirs.handleRequest(new JavalinExchange(ctx)));
                })
            .start("127.0.0.1", 0);
  }

  @AfterAll
  static void stop() {
    server.stop();
    node.close();
  }

  static final String PROTOBUF =
      "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited";

  static List<String[]> requests() {
    List<String> accepts =
        Arrays.asList(
            null,
            "*/*",
            "text/plain",
            "text/plain; version=0.0.4; charset=utf-8",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            "application/openmetrics-text; version=0.0.1",
            // Prometheus 2.x's default scrape Accept header.
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
            // Prometheus 3.x's default (escaping parameters included).
            "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
            "text/plain;version=0.0.4;escaping=underscores",
            PROTOBUF);
    List<String> encodings = Arrays.asList(null, "gzip", "gzip, deflate, br", "identity", "GZIP");
    List<String> queries = List.of("", "?name[]=vgpu_container_memory_used_bytes");
    return accepts.stream()
        .flatMap(
            a -> encodings.stream().flatMap(e -> queries.stream().map(q -> new String[] {a, e, q})))
        .filter(r -> r[2].isEmpty() || r[1] == null)
        .toList();
  }

  static HttpResponse<byte[]> get(String path, String accept, String encoding) throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + path));
    if (accept != null) {
      b.header("Accept", accept);
    }
    if (encoding != null) {
      b.header("Accept-Encoding", encoding);
    }
    return CLIENT.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
  }

  static String decoded(HttpResponse<byte[]> r, boolean protobuf) throws IOException {
    byte[] body = r.body();
    if (r.headers().firstValue("Content-Encoding").orElse("").equals("gzip")) {
      try (InputStream in = new GZIPInputStream(new ByteArrayInputStream(body))) {
        body = in.readAllBytes();
      }
    }
    if (protobuf) {
      return Integer.toString(body.length > 0 ? 1 : 0);
    }
    return new String(body, StandardCharsets.UTF_8)
        .lines()
        .filter(l -> VOLATILE.stream().noneMatch(l::contains))
        .collect(Collectors.joining("\n"));
  }

  @ParameterizedTest
  @MethodSource("requests")
  void sameResponseAsClientJava(String accept, String encoding, String query) throws Exception {
    HttpResponse<byte[]> ours = get("/ours" + query, accept, encoding);
    HttpResponse<byte[]> theirs = get("/theirs" + query, accept, encoding);
    assertThat(ours.statusCode()).isEqualTo(theirs.statusCode()).isEqualTo(200);
    for (String h : List.of("Content-Type", "Content-Encoding")) {
      Optional<String> expected = theirs.headers().firstValue(h);
      assertThat(ours.headers().firstValue(h)).as(h).isEqualTo(expected);
    }
    boolean protobuf = PROTOBUF.equals(accept);
    String body = decoded(ours, protobuf);
    assertThat(body).isEqualTo(decoded(theirs, protobuf));
    if (!protobuf) {
      assertThat(body).contains("vgpu_container_memory_used_bytes{");
    }
  }

  /**
   * client_java scrapes (protobuf, name[]) each buffer a whole exposition: a small heap allows
   * fewer of them at once, so a few protobuf scrapers cannot exhaust the launcher's -Xmx48m (the
   * JVM exits on OutOfMemoryError).
   */
  @Test
  void fallbackScrapes_areBoundedByTheHeap_andByCpus() {
    long mib = 1L << 20;
    assertThat(MetricsEndpoint.fallbackPermits(48 * mib, 64)).isEqualTo(1);
    assertThat(MetricsEndpoint.fallbackPermits(16 * mib, 64)).isEqualTo(1);
    assertThat(MetricsEndpoint.fallbackPermits(96 * mib, 64)).isEqualTo(3);
    assertThat(MetricsEndpoint.fallbackPermits(1024 * mib, 2)).isEqualTo(2);
    assertThat(MetricsEndpoint.fallbackPermits(1024 * mib, 64))
        .isEqualTo(MetricsEndpoint.MAX_CONCURRENT_FALLBACK_SCRAPES);
  }
}

package io.vgpu.exporter.http;

import static org.assertj.core.api.Assertions.assertThat;

import io.javalin.Javalin;
import io.javalin.compression.CompressionStrategy;
import io.prometheus.metrics.model.registry.Collector;
import io.prometheus.metrics.model.registry.MetricType;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.MetricFamilyDescriptor;
import io.prometheus.metrics.model.snapshots.MetricMetadata;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.vgpu.exporter.exposition.ExpositionCacheProbe;
import io.vgpu.exporter.exposition.FamilySource;
import io.vgpu.exporter.metrics.CollectorStats;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.zip.GZIPInputStream;
import org.eclipse.jetty.util.thread.QueuedThreadPool;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Scrapes that arrive while a render is in flight wait for it without holding a server thread: over
 * real HTTP, on a server pool of {@link HttpServer#MAX_THREADS}, against a registry whose
 * collection is slow and counts its calls.
 */
class WaitingScrapesTest {
  static final String PROMETHEUS_ACCEPT =
      "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

  final AtomicInteger collections = new AtomicInteger();
  final CountDownLatch collecting = new CountDownLatch(1);
  final CountDownLatch finishCollecting = new CountDownLatch(1);
  volatile boolean firstCollectionFails;
  final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  Javalin server;

  /** A registry whose first collection waits for {@link #finishCollecting}; later ones do not. */
  PrometheusRegistry slowRegistry() {
    PrometheusRegistry registry = new PrometheusRegistry();
    registry.register(
        new Collector() {
          @Override
          public MetricSnapshot collect() {
            int n = collections.incrementAndGet();
            if (n == 1) {
              collecting.countDown();
              try {
                finishCollecting.await(30, TimeUnit.SECONDS);
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              }
              if (firstCollectionFails) {
                throw new IllegalStateException("collection failed");
              }
            }
            return GaugeSnapshot.builder()
                .name("slow_collections")
                .help("collections so far")
                .dataPoint(GaugeSnapshot.GaugeDataPointSnapshot.builder().value(n).build())
                .build();
          }

          @Override
          public MetricFamilyDescriptor getMetricFamilyDescriptor() {
            return MetricFamilyDescriptor.of(
                MetricType.GAUGE, new MetricMetadata("slow_collections"), Set.of());
          }
        });
    return registry;
  }

  /** The server as {@link HttpServer} builds it: a bounded pool of MAX_THREADS. */
  MetricsEndpoint serve(int maxWaiting) {
    PrometheusRegistry registry = slowRegistry();
    MetricsEndpoint metrics =
        new MetricsEndpoint(
            registry,
            FamilySource.of(registry::scrape),
            Duration.ZERO,
            new CollectorStats(),
            maxWaiting);
    server =
        Javalin.create(
                cfg -> {
                  cfg.startup.showJavalinBanner = false;
                  cfg.http.compressionStrategy = CompressionStrategy.NONE;
                  cfg.jetty.threadPool = new QueuedThreadPool(HttpServer.MAX_THREADS, 2);
                  cfg.routes.get("/metrics", metrics::handle);
                })
            .start("127.0.0.1", 0);
    return metrics;
  }

  @AfterEach
  void stop() {
    finishCollecting.countDown();
    if (server != null) {
      server.stop();
    }
  }

  CompletableFuture<HttpResponse<byte[]>> scrape() {
    return scrape("gzip");
  }

  CompletableFuture<HttpResponse<byte[]>> scrape(String encoding) {
    HttpRequest request =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/metrics"))
            .header("Accept", PROMETHEUS_ACCEPT)
            .header("Accept-Encoding", encoding)
            .timeout(Duration.ofSeconds(30))
            .build();
    return client.sendAsync(request, HttpResponse.BodyHandlers.ofByteArray());
  }

  /** The response's headers but the date, which differs second to second. */
  static Map<String, List<String>> headers(HttpResponse<?> r) {
    Map<String, List<String>> h = new TreeMap<>(r.headers().map());
    h.remove("date");
    return h;
  }

  static byte[] gunzip(byte[] gz) throws IOException {
    try (InputStream in = new GZIPInputStream(new ByteArrayInputStream(gz))) {
      return in.readAllBytes();
    }
  }

  static void awaitTrue(BooleanSupplier condition, String what) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!condition.getAsBoolean()) {
      assertThat(System.nanoTime()).as("waited 20 s for: " + what).isLessThan(deadline);
      Thread.sleep(5);
    }
  }

  /**
   * Four times as many concurrent scrapes as the pool has threads all get the page of the one
   * render in flight, answered as the scrape that rendered was (headers, gzip or identity bytes).
   * With a thread held per waiting scrape, only ~12 could wait on it; the rest queued in the server
   * and needed further renders.
   */
  @Test
  void manyConcurrentScrapes_shareOneRender_onABoundedPool() throws Exception {
    MetricsEndpoint metrics = serve(MetricsEndpoint.MAX_WAITING_SCRAPES);
    int scrapers = 4 * HttpServer.MAX_THREADS;
    CompletableFuture<HttpResponse<byte[]>> rendering = scrape();
    assertThat(collecting.await(20, TimeUnit.SECONDS)).isTrue();
    String[] encodings = {"gzip", "identity", "gzip, deflate, br"};
    List<CompletableFuture<HttpResponse<byte[]>>> waiting = new ArrayList<>();
    for (int i = 1; i < scrapers; i++) {
      waiting.add(scrape(encodings[i % encodings.length]));
    }
    awaitTrue(() -> metrics.waitingScrapes() == scrapers - 1, "all but one scrape waiting");
    finishCollecting.countDown();
    HttpResponse<byte[]> rendered = rendering.get(30, TimeUnit.SECONDS);
    assertThat(rendered.statusCode()).isEqualTo(200);
    assertThat(rendered.headers().firstValue("Content-Encoding")).hasValue("gzip");
    byte[] page = gunzip(rendered.body());
    for (int i = 1; i < scrapers; i++) {
      HttpResponse<byte[]> r = waiting.get(i - 1).get(30, TimeUnit.SECONDS);
      boolean gzip = !encodings[i % encodings.length].equals("identity");
      assertThat(r.statusCode()).isEqualTo(200);
      Map<String, List<String>> expected = headers(rendered);
      if (!gzip) {
        expected.remove("content-encoding");
        expected.put("content-length", List.of(Integer.toString(page.length)));
      }
      assertThat(headers(r))
          .as("headers for Accept-Encoding: %s", encodings[i % encodings.length])
          .isEqualTo(expected);
      assertThat(r.body()).isEqualTo(gzip ? rendered.body() : page);
    }
    assertThat(collections).as("one render for all of them").hasValue(1);
    assertThat(metrics.waitingScrapes()).isZero();
    assertThat(ExpositionCacheProbe.livePages(metrics.cache())).isEqualTo(1);
  }

  /** Past the bound on waiting scrapes, a scrape is answered 503 at once, not queued. */
  @Test
  void scrapesPastTheWaitingBound_areAnswered503AtOnce() throws Exception {
    MetricsEndpoint metrics = serve(2);
    CompletableFuture<HttpResponse<byte[]>> rendering = scrape();
    assertThat(collecting.await(20, TimeUnit.SECONDS)).isTrue();
    CompletableFuture<HttpResponse<byte[]>> waiter1 = scrape();
    CompletableFuture<HttpResponse<byte[]>> waiter2 = scrape();
    awaitTrue(() -> metrics.waitingScrapes() == 2, "two scrapes waiting");
    HttpResponse<byte[]> refused = scrape().get(20, TimeUnit.SECONDS);
    assertThat(refused.statusCode()).isEqualTo(503);
    assertThat(refused.headers().firstValue("Retry-After")).hasValue("1");
    assertThat(new String(refused.body(), StandardCharsets.UTF_8))
        .isEqualTo("busy: 2 scrapes are waiting for the exposition already\n");
    assertThat(rendering).as("answered while the render is still in flight").isNotDone();
    finishCollecting.countDown();
    for (var f : List.of(rendering, waiter1, waiter2)) {
      assertThat(f.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
    }
    assertThat(metrics.waitingScrapes()).isZero();
    assertThat(scrape().get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
  }

  /**
   * A scraper that goes away while waiting (Prometheus' scrape timeout) leaves no reader on the
   * page: once sent, it is given back like any other, and later renders recycle it.
   */
  @Test
  void aScraperThatLeavesWhileWaiting_holdsNoPage() throws Exception {
    MetricsEndpoint metrics = serve(MetricsEndpoint.MAX_WAITING_SCRAPES);
    CompletableFuture<HttpResponse<byte[]>> rendering = scrape();
    assertThat(collecting.await(20, TimeUnit.SECONDS)).isTrue();
    List<Socket> leaving = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      Socket s = new Socket(InetAddress.getByAddress(new byte[] {127, 0, 0, 1}), server.port());
      OutputStream out = s.getOutputStream();
      out.write(
          ("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip\r\n"
                  + "Accept: "
                  + PROMETHEUS_ACCEPT
                  + "\r\n\r\n")
              .getBytes(StandardCharsets.US_ASCII));
      out.flush();
      leaving.add(s);
    }
    awaitTrue(() -> metrics.waitingScrapes() == 3, "three scrapes waiting");
    for (Socket s : leaving) {
      s.setSoLinger(true, 0); // reset, as a client that gave up
      s.close();
    }
    finishCollecting.countDown();
    assertThat(rendering.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
    awaitTrue(() -> metrics.waitingScrapes() == 0, "the waiters answered or dropped");
    // The page of that render is released by every scrape that held it: only the current page is
    // alive, through later renders too (a leaked reader would keep the old one alive).
    awaitTrue(
        () -> ExpositionCacheProbe.livePages(metrics.cache()) == 1, "only the current page alive");
    for (int i = 0; i < 3; i++) {
      HttpResponse<byte[]> r = scrape().get(30, TimeUnit.SECONDS);
      assertThat(r.statusCode()).isEqualTo(200);
    }
    assertThat(ExpositionCacheProbe.livePages(metrics.cache())).isEqualTo(1);
    assertThat(collections).hasValue(4);
  }

  /**
   * A collection that fails reaches every scrape that waited for it as the one that rendered (500,
   * as any handler failure), and the next scrape renders again.
   */
  @Test
  void aFailedRender_failsItsWaiters_andTheNextScrapeRendersAgain() throws Exception {
    firstCollectionFails = true;
    MetricsEndpoint metrics = serve(MetricsEndpoint.MAX_WAITING_SCRAPES);
    CompletableFuture<HttpResponse<byte[]>> rendering = scrape();
    assertThat(collecting.await(20, TimeUnit.SECONDS)).isTrue();
    CompletableFuture<HttpResponse<byte[]>> waiter = scrape("identity");
    awaitTrue(() -> metrics.waitingScrapes() == 1, "one scrape waiting");
    finishCollecting.countDown();
    assertThat(rendering.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(500);
    assertThat(waiter.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(500);
    assertThat(metrics.waitingScrapes()).isZero();
    HttpResponse<byte[]> next = scrape().get(30, TimeUnit.SECONDS);
    assertThat(next.statusCode()).isEqualTo(200);
    assertThat(new String(gunzip(next.body()), StandardCharsets.UTF_8))
        .contains("slow_collections 2.0");
    assertThat(ExpositionCacheProbe.livePages(metrics.cache())).isEqualTo(1);
  }
}

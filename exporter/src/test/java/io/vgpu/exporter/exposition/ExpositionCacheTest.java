package io.vgpu.exporter.exposition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot.GaugeDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.HistogramSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricMetadata;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import java.util.zip.GZIPInputStream;
import org.junit.jupiter.api.Test;

class ExpositionCacheTest {
  /** A cache over client_java snapshots, as the registry gives them. */
  private static ExpositionCache cacheOf(
      Supplier<MetricSnapshots> source, Duration maxAge, LongSupplier clock) {
    return new ExpositionCache(FamilySource.of(source), maxAge, clock);
  }

  private static ExpositionCache cacheOf(
      Supplier<MetricSnapshots> source, Duration maxAge, LongSupplier clock, long pageLimit) {
    return new ExpositionCache(FamilySource.of(source), maxAge, clock, pageLimit);
  }

  final AtomicLong now = new AtomicLong();
  final AtomicInteger collects = new AtomicInteger();

  /** A source whose page says how many times it was collected. */
  Supplier<MetricSnapshots> counting() {
    return () -> {
      int n = collects.incrementAndGet();
      return page(n);
    };
  }

  static MetricSnapshots page(double value) {
    List<GaugeDataPointSnapshot> ps = new ArrayList<>();
    for (int i = 0; i < 200; i++) {
      ps.add(new GaugeDataPointSnapshot(value, Labels.of("i", Integer.toString(i)), null));
    }
    return new MetricSnapshots(new GaugeSnapshot(new MetricMetadata("g", "help"), ps));
  }

  static String text(Rendition r) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    r.writeTo(out);
    return out.toString(StandardCharsets.UTF_8);
  }

  Rendition acquire(ExpositionCache c, ExpositionFormat f) {
    return (Rendition) c.acquire(f);
  }

  @Test
  void maxAgeZero_everySequentialScrapeRendersFresh() throws IOException {
    ExpositionCache c = cacheOf(counting(), Duration.ZERO, now::get);
    Rendition a = acquire(c, ExpositionFormat.PROMETHEUS_TEXT);
    String first = text(a);
    a.release();
    now.addAndGet(1);
    Rendition b = acquire(c, ExpositionFormat.PROMETHEUS_TEXT);
    assertThat(collects.get()).isEqualTo(2);
    assertThat(first).contains("g{i=\"0\"} 1.0");
    assertThat(text(b)).contains("g{i=\"0\"} 2.0");
    b.release();
  }

  @Test
  void withinMaxAge_servesTheSamePage_thenRendersAgain() throws IOException {
    ExpositionCache c = cacheOf(counting(), Duration.ofSeconds(1), now::get);
    acquire(c, ExpositionFormat.PROMETHEUS_TEXT).release();
    now.addAndGet(Duration.ofMillis(999).toNanos());
    Rendition same = acquire(c, ExpositionFormat.PROMETHEUS_TEXT);
    assertThat(collects.get()).isEqualTo(1);
    same.release();
    now.addAndGet(Duration.ofMillis(2).toNanos());
    Rendition next = acquire(c, ExpositionFormat.PROMETHEUS_TEXT);
    assertThat(collects.get()).isEqualTo(2);
    assertThat(text(next)).contains("} 2.0");
    next.release();
  }

  @Test
  void formats_areRenderedSeparately() throws IOException {
    ExpositionCache c = cacheOf(counting(), Duration.ofHours(1), now::get);
    Rendition t = acquire(c, ExpositionFormat.PROMETHEUS_TEXT);
    Rendition om = acquire(c, ExpositionFormat.OPENMETRICS);
    assertThat(text(t)).doesNotContain("# EOF");
    assertThat(text(om)).endsWith("# EOF\n");
    t.release();
    om.release();
  }

  @Test
  void concurrentScrapes_shareOneRender() throws Exception {
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch proceed = new CountDownLatch(1);
    Supplier<MetricSnapshots> slow =
        () -> {
          int n = collects.incrementAndGet();
          entered.countDown();
          try {
            proceed.await(10, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          return page(n);
        };
    // Each scrape reads the clock once, under the cache's lock, right before it either joins the
    // render in flight or starts its own; the render publishes under the same lock. So once all 19
    // late scrapes have read the clock, each has already made its choice.
    CountDownLatch lateArrivals = new CountDownLatch(19);
    LongSupplier clock =
        () -> {
          if (entered.getCount() == 0) {
            lateArrivals.countDown();
          }
          return now.get();
        };
    ExpositionCache c = cacheOf(slow, Duration.ZERO, clock);
    ExecutorService pool = Executors.newFixedThreadPool(20);
    try {
      List<Future<String>> results = new ArrayList<>();
      results.add(pool.submit(() -> readAndRelease(c)));
      assertThat(entered.await(10, TimeUnit.SECONDS)).isTrue();
      for (int i = 0; i < 19; i++) {
        results.add(pool.submit(() -> readAndRelease(c)));
      }
      assertThat(lateArrivals.await(10, TimeUnit.SECONDS)).isTrue();
      proceed.countDown();
      for (Future<String> f : results) {
        assertThat(f.get(10, TimeUnit.SECONDS)).contains("} 1.0");
      }
      assertThat(collects.get()).isEqualTo(1);
    } finally {
      pool.shutdownNow();
    }
  }

  String readAndRelease(ExpositionCache c) throws IOException {
    Rendition r = acquire(c, ExpositionFormat.PROMETHEUS_TEXT);
    try {
      return text(r);
    } finally {
      r.release();
    }
  }

  @Test
  void pageHeldByASlowReader_isNeverOverwrittenByLaterRenders() throws IOException {
    ExpositionCache c = cacheOf(counting(), Duration.ZERO, now::get);
    Rendition held = acquire(c, ExpositionFormat.PROMETHEUS_TEXT);
    String before = text(held);
    for (int i = 0; i < 10; i++) {
      now.addAndGet(1);
      acquire(c, ExpositionFormat.PROMETHEUS_TEXT).release();
    }
    assertThat(text(held)).isEqualTo(before);
    held.release();
    assertThat(c.heldBuffers()).isLessThanOrEqualTo(2 * ExpositionFormat.values().length);
  }

  /**
   * Slow readers each holding a different page: after {@link ExpositionCache#MAX_LIVE_PAGES} pages
   * are alive, further scrapes share the newest instead of rendering into yet another buffer.
   */
  @Test
  void manySlowReaders_pagesAliveAtOnceAreBounded() {
    ExpositionCache c = cacheOf(counting(), Duration.ZERO, now::get);
    java.util.Set<byte[]> alive =
        java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
    List<Rendition> held = new ArrayList<>();
    for (int i = 0; i < 50; i++) {
      now.addAndGet(1);
      Rendition r = acquire(c, ExpositionFormat.PROMETHEUS_TEXT);
      held.add(r);
      alive.add(r.gzipped());
    }
    assertThat(alive).hasSize(ExpositionCache.MAX_LIVE_PAGES);
    held.forEach(Rendition::release);
    now.addAndGet(1);
    Rendition fresh = acquire(c, ExpositionFormat.PROMETHEUS_TEXT);
    assertThat(collects.get()).as("renders again once the readers are done").isEqualTo(4);
    fresh.release();
  }

  /**
   * A page whose gzip is over the limit is never held: the scrape is told to stream, and the
   * streamed bytes are exactly what a held render sends; once the page fits again it is held again.
   */
  @Test
  void pageOverTheLimit_isStreamedByteForByte_andBufferedAgainWhenItShrinks() throws Exception {
    java.util.concurrent.atomic.AtomicInteger points =
        new java.util.concurrent.atomic.AtomicInteger(5000);
    Supplier<MetricSnapshots> source =
        () -> {
          List<GaugeDataPointSnapshot> ps = new ArrayList<>();
          for (int i = 0; i < points.get(); i++) {
            ps.add(new GaugeDataPointSnapshot(i, Labels.of("i", Integer.toString(i)), null));
          }
          return new MetricSnapshots(new GaugeSnapshot(new MetricMetadata("g", "help"), ps));
        };
    ExpositionCache big = cacheOf(source, Duration.ZERO, now::get, Long.MAX_VALUE);
    Rendition whole = acquire(big, ExpositionFormat.OPENMETRICS);
    String expected = text(whole);
    long limit = 4 * 1024;
    assertThat((long) whole.gzippedLength()).isGreaterThan(2 * limit);
    whole.release();

    ExpositionCache c = cacheOf(source, Duration.ZERO, now::get, limit);
    for (int i = 0; i < 3; i++) {
      now.addAndGet(1);
      Exposition e = c.acquire(ExpositionFormat.OPENMETRICS);
      assertThat(e).isInstanceOf(Exposition.Stream.class);
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      c.stream(ExpositionFormat.OPENMETRICS, out);
      assertThat(out.toString(StandardCharsets.UTF_8)).isEqualTo(expected);
    }
    assertThat(c.heldBuffers()).isZero();
    points.set(10);
    c.stream(ExpositionFormat.OPENMETRICS, new ByteArrayOutputStream());
    now.addAndGet(1);
    assertThat(c.acquire(ExpositionFormat.OPENMETRICS)).isInstanceOf(Rendition.class);
  }

  @Test
  void buffers_areReusedOnceReleased_noGrowthOverManyRenders() {
    ExpositionCache c = cacheOf(counting(), Duration.ZERO, now::get);
    java.util.Set<byte[]> seen =
        java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
    for (int i = 0; i < 100; i++) {
      now.addAndGet(1);
      Rendition r = acquire(c, ExpositionFormat.OPENMETRICS);
      seen.add(r.gzipped());
      r.release();
    }
    // The current page and one spare alternate.
    assertThat(seen).hasSizeLessThanOrEqualTo(2);
  }

  @Test
  void gzip_isComputedOncePerRendition_andDecodesToThePage() throws IOException {
    ExpositionCache c = cacheOf(counting(), Duration.ofHours(1), now::get);
    Rendition r = acquire(c, ExpositionFormat.PROMETHEUS_TEXT);
    byte[] gz = r.gzipped();
    assertThat(r.gzipped()).isSameAs(gz);
    try (InputStream in =
        new GZIPInputStream(new java.io.ByteArrayInputStream(gz, 0, r.gzippedLength()))) {
      assertThat(new String(in.readAllBytes(), StandardCharsets.UTF_8)).isEqualTo(text(r));
    }
    r.release();
  }

  @Test
  void gzip_largeAndIncompressiblePages_roundTrip() throws IOException {
    java.util.Random random = new java.util.Random(42);
    Supplier<MetricSnapshots> noisy =
        () -> {
          List<GaugeDataPointSnapshot> ps = new ArrayList<>();
          for (int i = 0; i < 20_000; i++) {
            ps.add(
                new GaugeDataPointSnapshot(
                    random.nextDouble(),
                    Labels.of("i", Long.toHexString(random.nextLong())),
                    null));
          }
          return new MetricSnapshots(new GaugeSnapshot(new MetricMetadata("g", "h"), ps));
        };
    ExpositionCache c = cacheOf(noisy, Duration.ZERO, now::get);
    for (int round = 0; round < 3; round++) {
      now.addAndGet(1);
      Rendition r = acquire(c, ExpositionFormat.OPENMETRICS);
      try (InputStream in =
          new GZIPInputStream(
              new java.io.ByteArrayInputStream(r.gzipped(), 0, r.gzippedLength()))) {
        assertThat(new String(in.readAllBytes(), StandardCharsets.UTF_8)).isEqualTo(text(r));
      }
      r.release();
    }
  }

  @Test
  void failedCollection_reachesTheCaller_andTheNextScrapeTriesAgain() throws IOException {
    AtomicInteger calls = new AtomicInteger();
    Supplier<MetricSnapshots> flaky =
        () -> {
          if (calls.incrementAndGet() == 1) {
            throw new IllegalStateException("collector broke");
          }
          return page(7);
        };
    ExpositionCache c = cacheOf(flaky, Duration.ofHours(1), now::get);
    assertThatThrownBy(() -> c.acquire(ExpositionFormat.PROMETHEUS_TEXT))
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("collector broke");
    Rendition r = acquire(c, ExpositionFormat.PROMETHEUS_TEXT);
    assertThat(text(r)).contains("} 7.0");
    r.release();
  }

  @Test
  void unsupportedSnapshots_fallBackWithTheCollectedSnapshots_notCached() {
    var h =
        HistogramSnapshot.builder()
            .name("h")
            .dataPoint(
                HistogramSnapshot.HistogramDataPointSnapshot.builder()
                    .classicHistogramBuckets(
                        io.prometheus.metrics.model.snapshots.ClassicHistogramBuckets.of(
                            new double[] {Double.POSITIVE_INFINITY}, new long[] {1}))
                    .sum(1)
                    .build())
            .build();
    Supplier<MetricSnapshots> source =
        () -> {
          collects.incrementAndGet();
          return new MetricSnapshots(h);
        };
    ExpositionCache c = cacheOf(source, Duration.ofHours(1), now::get);
    Exposition e = c.acquire(ExpositionFormat.OPENMETRICS);
    assertThat(e).isInstanceOf(Exposition.Fallback.class);
    assertThat(((Exposition.Fallback) e).reason()).contains("HistogramSnapshot");
    c.acquire(ExpositionFormat.OPENMETRICS);
    assertThat(collects.get()).isEqualTo(2);
  }

  @Test
  void formatNotScrapedForTwoMinutes_givesItsBuffersUp() {
    ExpositionCache c = cacheOf(counting(), Duration.ZERO, now::get);
    acquire(c, ExpositionFormat.PROMETHEUS_TEXT).release();
    now.addAndGet(1);
    acquire(c, ExpositionFormat.PROMETHEUS_TEXT).release();
    assertThat(c.heldBuffers()).isEqualTo(2);
    now.addAndGet(ExpositionCache.IDLE_TRIM.toNanos() + 1);
    acquire(c, ExpositionFormat.OPENMETRICS).release();
    // Text's page and spare are gone; OpenMetrics holds its one page.
    assertThat(c.heldBuffers()).isEqualTo(1);
  }

  /**
   * A held page costs its gzip only: the cache keeps no uncompressed copy (3 MB at 100 containers),
   * and a scrape without gzip gets the page inflated byte for byte as the encoder wrote it.
   */
  @Test
  void heldPage_isItsGzipOnly_andInflatesToTheEncodersBytes() throws Exception {
    Supplier<MetricSnapshots> source =
        () -> {
          List<GaugeDataPointSnapshot> ps = new ArrayList<>();
          for (int i = 0; i < 5000; i++) {
            ps.add(new GaugeDataPointSnapshot(i % 7, Labels.of("i", Integer.toString(i)), null));
          }
          return new MetricSnapshots(new GaugeSnapshot(new MetricMetadata("g", "help"), ps));
        };
    ExpositionCache c = cacheOf(source, Duration.ZERO, now::get);
    Rendition r = acquire(c, ExpositionFormat.OPENMETRICS);
    ExpositionBuffer direct = new ExpositionBuffer(1024);
    new TextEncoder().encode(source.get(), ExpositionFormat.OPENMETRICS, direct);
    assertThat(text(r)).isEqualTo(new String(direct.toByteArray(), StandardCharsets.UTF_8));
    assertThat(r.size()).isEqualTo(direct.size());
    assertThat(c.heldBytes()).isEqualTo(r.gzipped().length).isLessThan(direct.size() / 2);
    r.release();
  }

  /**
   * Pages whose inflation ends on a call that returns no bytes: an empty page, and pages whose
   * length is a multiple of the inflate chunk. Each is sent whole, not reported as truncated.
   */
  @Test
  void emptyAndChunkMultiplePages_inflateWhole() throws Exception {
    ExpositionCache empty = cacheOf(() -> new MetricSnapshots(), Duration.ZERO, now::get);
    Rendition r = acquire(empty, ExpositionFormat.PROMETHEUS_TEXT);
    assertThat(r.size()).isZero();
    assertThat(text(r)).isEmpty();
    r.release();
    // One point whose label value pads the page to exactly k inflate chunks.
    int fixed = encodedSize(padded(""));
    for (int k = 1; k <= 3; k++) {
      MetricSnapshots exact = padded("x".repeat(k * Rendition.INFLATE_CHUNK - fixed));
      assertThat(encodedSize(exact)).isEqualTo(k * Rendition.INFLATE_CHUNK);
      ExpositionCache c = cacheOf(() -> exact, Duration.ZERO, now::get);
      Rendition page = acquire(c, ExpositionFormat.PROMETHEUS_TEXT);
      ExpositionBuffer direct = new ExpositionBuffer(1024);
      new TextEncoder().encode(exact, ExpositionFormat.PROMETHEUS_TEXT, direct);
      assertThat(text(page)).isEqualTo(new String(direct.toByteArray(), StandardCharsets.UTF_8));
      page.release();
    }
  }

  static MetricSnapshots padded(String value) {
    return new MetricSnapshots(
        new GaugeSnapshot(
            new MetricMetadata("p", "h"),
            List.of(new GaugeDataPointSnapshot(1, Labels.of("v", value), null))));
  }

  static int encodedSize(MetricSnapshots s) throws UnsupportedFamilyException {
    ExpositionBuffer b = new ExpositionBuffer(1024);
    new TextEncoder().encode(s, ExpositionFormat.PROMETHEUS_TEXT, b);
    return b.size();
  }

  /** A client that stops reading mid-page (the write fails) leaves the page intact for others. */
  @Test
  void inflatingToAFailingClient_throws_andThePageStaysReadable() throws Exception {
    ExpositionCache c = cacheOf(counting(), Duration.ofHours(1), now::get);
    Rendition r = acquire(c, ExpositionFormat.PROMETHEUS_TEXT);
    String expected = text(r);
    java.io.OutputStream broken =
        new java.io.OutputStream() {
          @Override
          public void write(int b) throws IOException {
            throw new IOException("client went away");
          }

          @Override
          public void write(byte[] b, int off, int len) throws IOException {
            throw new IOException("client went away");
          }
        };
    assertThatThrownBy(() -> r.writeTo(broken)).hasMessage("client went away");
    assertThat(text(r)).isEqualTo(expected);
    r.release();
  }

  @Test
  void negativeMaxAge_isRejected() {
    assertThatThrownBy(() -> cacheOf(counting(), Duration.ofSeconds(-1), now::get))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("maxAge");
  }

  /**
   * A scrape that arrives while another renders is not blocked: it gets a future that the rendering
   * thread completes with the same page, claimed for it. One that gives up before the page comes
   * holds no reader: the page goes back to the cache when its last real reader is done.
   */
  @Test
  void acquireAsync_waitsWithoutBlocking_andAWaiterThatGaveUpHoldsNoPage() throws Exception {
    CountDownLatch collecting = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    ExpositionCache c =
        cacheOf(
            () -> {
              int n = collects.incrementAndGet();
              if (n == 1) {
                collecting.countDown();
                try {
                  finish.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
              }
              return page(n);
            },
            Duration.ZERO,
            now::get);
    ExecutorService renderer = Executors.newSingleThreadExecutor();
    try {
      Future<Exposition> rendering = renderer.submit(() -> c.acquire(ExpositionFormat.OPENMETRICS));
      assertThat(collecting.await(30, TimeUnit.SECONDS)).isTrue();
      java.util.concurrent.CompletableFuture<Exposition> waiter =
          c.acquireAsync(ExpositionFormat.OPENMETRICS);
      java.util.concurrent.CompletableFuture<Exposition> quitter =
          c.acquireAsync(ExpositionFormat.OPENMETRICS);
      assertThat(waiter).as("returned while the render is in flight").isNotDone();
      assertThat(quitter.cancel(false)).isTrue();
      finish.countDown();
      Rendition first = (Rendition) rendering.get(30, TimeUnit.SECONDS);
      Rendition shared = (Rendition) waiter.get(30, TimeUnit.SECONDS);
      assertThat(shared).isSameAs(first);
      assertThat(collects).hasValue(1);
      first.release();
      shared.release();
    } finally {
      renderer.shutdownNow();
    }
    // The next render retires the first page: given back at once unless a reader still holds it.
    now.addAndGet(1);
    acquire(c, ExpositionFormat.OPENMETRICS).release();
    assertThat(collects).hasValue(2);
    assertThat(c.livePages()).as("only the current page is alive").isEqualTo(1);
  }
}

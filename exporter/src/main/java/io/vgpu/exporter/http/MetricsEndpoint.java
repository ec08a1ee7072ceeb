package io.vgpu.exporter.http;

import io.javalin.http.Context;
import io.prometheus.metrics.exporter.common.PrometheusScrapeHandler;
import io.prometheus.metrics.expositionformats.ExpositionFormatWriter;
import io.prometheus.metrics.expositionformats.ExpositionFormats;
import io.prometheus.metrics.expositionformats.OpenMetricsTextFormatWriter;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.vgpu.exporter.exposition.Exposition;
import io.vgpu.exporter.exposition.ExpositionCache;
import io.vgpu.exporter.exposition.ExpositionFormat;
import io.vgpu.exporter.exposition.FamilySource;
import io.vgpu.exporter.exposition.Rendition;
import io.vgpu.exporter.metrics.CollectorStats;
import java.io.IOException;
import java.io.OutputStream;
import java.time.Duration;
import java.util.Enumeration;
import java.util.concurrent.Semaphore;

/**
 * {@code /metrics}. Content negotiation is client_java's ({@link ExpositionFormats#findWriter}):
 * when it picks Prometheus text or OpenMetrics 1.0, and the request has no query parameters, the
 * page comes from the {@link ExpositionCache} (one render shared by concurrent scrapes, gzip
 * computed once per render); anything else (protobuf, {@code name[]}, {@code debug}, or snapshots
 * the fast encoder does not write) goes to client_java's own scrape handler unchanged. Both paths
 * send the same bytes and headers for the same request (tested), except that a gzip response here
 * carries a Content-Length and is compressed at BEST_SPEED.
 */
final class MetricsEndpoint {
  /**
   * At most this many scrapes build and buffer an exposition through client_java's handler at once.
   * Each holds the whole exposition plus its snapshots (~15 MB at 200 containers), so the bound
   * follows the heap cap ({@link #FALLBACK_HEAP_SHARE} each) and the CPUs; the cached path needs no
   * bound (one render per format at a time).
   */
  static final int MAX_CONCURRENT_FALLBACK_SCRAPES = 4;

  /** Heap a client_java scrape may count on: a 200-container exposition and its snapshots. */
  static final long FALLBACK_HEAP_SHARE = 32L << 20;

  /**
   * Concurrent client_java scrapes for a heap of {@code maxHeap} bytes on {@code cpus} CPUs: one
   * per {@link #FALLBACK_HEAP_SHARE} of heap (the launcher's -Xmx48m allows one), at most one per
   * CPU and {@link #MAX_CONCURRENT_FALLBACK_SCRAPES}, at least one.
   */
  static int fallbackPermits(long maxHeap, int cpus) {
    long byHeap = maxHeap / FALLBACK_HEAP_SHARE;
    return (int) Math.clamp(Math.min(byHeap, cpus), 1, MAX_CONCURRENT_FALLBACK_SCRAPES);
  }

  private final Semaphore fallbackPermits =
      new Semaphore(
          fallbackPermits(
              Runtime.getRuntime().maxMemory(), Runtime.getRuntime().availableProcessors()),
          true);
  private final PrometheusScrapeHandler clientJava;
  private final ExpositionFormats formats = ExpositionFormats.init();
  private final ExpositionCache cache;
  private final CollectorStats stats;

  /** Renders what the registry's collectors give (client_java snapshots, tests). */
  MetricsEndpoint(PrometheusRegistry registry, Duration maxAge, CollectorStats stats) {
    this(registry, FamilySource.of(registry::scrape), maxAge, stats);
  }

  /**
   * @param registry what client_java's handler serves (protobuf, {@code name[]}, fallbacks)
   * @param page the same collectors' families, which the cached path renders
   */
  MetricsEndpoint(
      PrometheusRegistry registry, FamilySource page, Duration maxAge, CollectorStats stats) {
    this.clientJava = new PrometheusScrapeHandler(registry);
    this.cache = new ExpositionCache(page, maxAge, System::nanoTime);
    this.stats = stats;
  }

  void handle(Context ctx) throws Exception {
    long start = System.nanoTime();
    try {
      ExpositionFormat format = cacheableFormat(ctx);
      if (format == null) {
        delegate(ctx);
        return;
      }
      Exposition page = cache.acquire(format);
      switch (page) {
        case Rendition r -> {
          try {
            send(ctx, r);
          } finally {
            r.release();
          }
        }
        case Exposition.Stream s -> stream(ctx, s.format());
        case Exposition.Fallback f -> delegate(ctx);
      }
    } finally {
      stats.recordScrape(System.nanoTime() - start);
    }
  }

  /** The format to serve from the cache, or null when client_java's handler must answer. */
  private ExpositionFormat cacheableFormat(Context ctx) {
    if (!ctx.queryParamMap().isEmpty()) {
      return null;
    }
    ExpositionFormatWriter writer = formats.findWriter(ctx.header("Accept"));
    if (writer.getClass() == PrometheusTextFormatWriter.class) {
      return ExpositionFormat.PROMETHEUS_TEXT;
    }
    if (writer.getClass() == OpenMetricsTextFormatWriter.class) {
      return ExpositionFormat.OPENMETRICS;
    }
    return null;
  }

  private static void send(Context ctx, Rendition r) throws IOException {
    ctx.status(200);
    ctx.header("Content-Type", r.format().contentType());
    if (acceptsGzip(ctx)) {
      byte[] gz = r.gzipped();
      int length = r.gzippedLength();
      ctx.header("Content-Encoding", "gzip");
      ctx.res().setContentLength(length);
      if (!isHead(ctx)) {
        try (OutputStream out = ctx.res().getOutputStream()) {
          out.write(gz, 0, length);
        }
      }
    } else {
      ctx.res().setContentLength(r.size());
      if (!isHead(ctx)) {
        try (OutputStream out = ctx.res().getOutputStream()) {
          r.writeTo(out);
        }
      }
    }
  }

  /** A page too large to hold: written as it is encoded, chunked, gzipped on the fly if asked. */
  private void stream(Context ctx, ExpositionFormat format)
      throws IOException, InterruptedException {
    ctx.status(200);
    ctx.header("Content-Type", format.contentType());
    if (isHead(ctx)) {
      return;
    }
    boolean gzip = acceptsGzip(ctx);
    if (gzip) {
      ctx.header("Content-Encoding", "gzip");
    }
    try (OutputStream raw = ctx.res().getOutputStream();
        OutputStream out =
            gzip
                ? new java.util.zip.GZIPOutputStream(raw, 64 * 1024) {
                  {
                    def.setLevel(java.util.zip.Deflater.BEST_SPEED);
                  }
                }
                : raw) {
      cache.stream(format, out);
    }
  }

  private static boolean isHead(Context ctx) {
    return "HEAD".equals(ctx.req().getMethod());
  }

  /** client_java's rule: some Accept-Encoding element, trimmed, is "gzip" (no q-values). */
  static boolean acceptsGzip(Context ctx) {
    Enumeration<String> headers = ctx.req().getHeaders("Accept-Encoding");
    while (headers != null && headers.hasMoreElements()) {
      for (String token : headers.nextElement().split(",")) {
        if (token.trim().equalsIgnoreCase("gzip")) {
          return true;
        }
      }
    }
    return false;
  }

  private void delegate(Context ctx) throws IOException, InterruptedException {
    // A full client_java scrape builds and buffers the whole exposition; bounding concurrency
    // keeps many parallel scrapers from exhausting a small heap: they queue instead.
    fallbackPermits.acquire();
    try {
      clientJava.handleRequest(new JavalinExchange(ctx));
    } finally {
      fallbackPermits.release();
    }
  }
}

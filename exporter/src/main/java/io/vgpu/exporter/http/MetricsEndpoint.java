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
import jakarta.servlet.AsyncContext;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import java.io.IOException;
import java.io.OutputStream;
import java.time.Duration;
import java.util.Enumeration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

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
    return Math.clamp(Math.min(byHeap, cpus), 1, MAX_CONCURRENT_FALLBACK_SCRAPES);
  }

  /**
   * Scrapes waiting for a render in flight, past which a scrape is answered 503 at once. A waiting
   * scrape holds no server thread, only its connection and request (a few KB); the bound keeps a
   * render that hangs (a stuck driver call) from piling up requests without end.
   */
  static final int MAX_WAITING_SCRAPES = 1_000;

  private final Semaphore fallbackPermits =
      new Semaphore(
          fallbackPermits(
              Runtime.getRuntime().maxMemory(), Runtime.getRuntime().availableProcessors()),
          true);
  private final PrometheusScrapeHandler clientJava;
  private final ExpositionFormats formats = ExpositionFormats.init();
  private final ExpositionCache cache;
  private final CollectorStats stats;
  private final int maxWaiting;
  private final AtomicInteger waiting = new AtomicInteger();

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
    this(registry, page, maxAge, stats, MAX_WAITING_SCRAPES);
  }

  /** As above, with another bound on waiting scrapes (tests). */
  MetricsEndpoint(
      PrometheusRegistry registry,
      FamilySource page,
      Duration maxAge,
      CollectorStats stats,
      int maxWaiting) {
    this.clientJava = new PrometheusScrapeHandler(registry);
    this.cache = new ExpositionCache(page, maxAge, System::nanoTime);
    this.stats = stats;
    this.maxWaiting = maxWaiting;
  }

  /**
   * A scrape that finds a fresh page, or no render in flight, is answered on its server thread (the
   * render runs there). One that arrives while another scrape's render is in flight waits for that
   * render without holding a thread (the request is suspended, servlet async), and is answered on a
   * server thread once the page is there: any number of concurrent scrapes share one render, where
   * a waiting thread each would let only as many as the pool has threads join it, and queue the
   * rest for the next render, and the next.
   */
  void handle(Context ctx) throws Exception {
    long start = System.nanoTime();
    ExpositionFormat format = cacheableFormat(ctx);
    if (format == null) {
      try {
        delegate(ctx);
      } finally {
        stats.recordScrape(System.nanoTime() - start);
      }
      return;
    }
    CompletableFuture<Exposition> page = cache.acquireAsync(format);
    if (page.isDone()) {
      try {
        answer(ctx, claimedNow(page));
      } finally {
        stats.recordScrape(System.nanoTime() - start);
      }
      return;
    }
    if (waiting.incrementAndGet() > maxWaiting) {
      waiting.decrementAndGet();
      page.cancel(false); // the cache releases the page when it comes
      ctx.status(503)
          .header("Retry-After", "1")
          .contentType("text/plain")
          .result("busy: " + maxWaiting + " scrapes are waiting for the exposition already\n");
      stats.recordScrape(System.nanoTime() - start);
      return;
    }
    ctx.future(() -> answerWhenRendered(ctx, page, start));
  }

  /** Called once Javalin suspended the request: answers on a server thread when the page comes. */
  private CompletableFuture<Void> answerWhenRendered(
      Context ctx, CompletableFuture<Exposition> page, long start) {
    AsyncContext suspended = ctx.req().getAsyncContext();
    Executor serverThread =
        task -> {
          try {
            suspended.start(task); // the server's pool
          } catch (RuntimeException stopping) {
            task.run(); // the page must still be released and the request completed
          }
        };
    // The server ends a suspended request whose connection failed or timed out: then the page is
    // only given back, never written to a response that is no longer this scrape's.
    AtomicBoolean ended = new AtomicBoolean();
    suspended.addListener(new EndedListener(ended));
    CompletableFuture<Void> answered = new CompletableFuture<>();
    var _ =
        page.whenCompleteAsync(
            (exposition, failure) -> {
              waiting.decrementAndGet();
              try {
                if (failure != null) {
                  answered.completeExceptionally(failure);
                  return;
                }
                if (ended.get()) {
                  if (exposition instanceof Rendition r) {
                    r.release();
                  }
                  answered.complete(null);
                  return;
                }
                answer(ctx, exposition);
                answered.complete(null);
              } catch (Throwable t) { // a client that went away mid-send: Javalin ends the request
                answered.completeExceptionally(t);
              } finally {
                stats.recordScrape(System.nanoTime() - start);
              }
            },
            serverThread);
    return answered;
  }

  /** Marks a suspended request that the server ended (error, timeout) before it was answered. */
  private record EndedListener(AtomicBoolean ended) implements AsyncListener {
    @Override
    public void onComplete(AsyncEvent event) {
      ended.set(true);
    }

    @Override
    public void onTimeout(AsyncEvent event) {
      ended.set(true);
    }

    @Override
    public void onError(AsyncEvent event) {
      ended.set(true);
    }

    @Override
    public void onStartAsync(AsyncEvent event) {}
  }

  /** The page of a completed acquisition, or its failure as {@link ExpositionCache#acquire}. */
  private static Exposition claimedNow(CompletableFuture<Exposition> page) {
    try {
      return page.join();
    } catch (CompletionException e) {
      if (e.getCause() instanceof RuntimeException re) {
        throw re;
      }
      if (e.getCause() instanceof Error err) {
        throw err;
      }
      throw e;
    }
  }

  /** Sends a claimed page (and releases it), streams it, or hands the scrape to client_java. */
  private void answer(Context ctx, Exposition page) throws IOException, InterruptedException {
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
  }

  /** Scrapes waiting for a render now (tests). */
  int waitingScrapes() {
    return waiting.get();
  }

  /** The page cache (tests). */
  ExpositionCache cache() {
    return cache;
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
      for (String token : headers.nextElement().split(",", -1)) {
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

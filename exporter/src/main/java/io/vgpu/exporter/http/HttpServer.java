package io.vgpu.exporter.http;

import io.javalin.Javalin;
import io.javalin.compression.CompressionStrategy;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.vgpu.exporter.config.Endpoints;
import io.vgpu.exporter.metrics.CollectorStats;
import io.vgpu.exporter.metrics.NodeStateProvider;
import java.util.Objects;
import org.eclipse.jetty.util.thread.QueuedThreadPool;

/**
 * The HTTP surface on Javalin: {@code /metrics} ({@link MetricsEndpoint}: text, OpenMetrics,
 * protobuf, gzip, {@code name[]}), {@code /healthz}, {@code /readyz}, {@code /api/v1/containers}
 * and the landing page. Handlers only read in-memory state; discovery, informers and NVML sampling
 * run in the background.
 */
public final class HttpServer implements AutoCloseable {
  private final Javalin app;

  private final String host;
  private final int port;

  public HttpServer(
      String host,
      int port,
      java.time.Duration metricsMaxAge,
      PrometheusRegistry registry,
      NodeStateProvider states,
      Readiness readiness,
      CollectorStats stats,
      String version) {
    this.host = Objects.requireNonNull(host, "host");
    this.port = port;
    MetricsEndpoint metrics = new MetricsEndpoint(registry, metricsMaxAge, stats);
    this.app =
        Javalin.create(
            cfg -> {
              cfg.startup.showJavalinBanner = false;
              cfg.startup.showOldJavalinVersionWarning = false;
              cfg.http.compressionStrategy = CompressionStrategy.NONE; // client_java gzips /metrics
              QueuedThreadPool pool = new QueuedThreadPool(32, 4);
              pool.setName("vgpu-http");
              cfg.jetty.threadPool = pool;
              cfg.routes.get(Endpoints.METRICS, metrics::handle);
              cfg.routes.get(
                  Endpoints.HEALTHZ, ctx -> ctx.contentType("text/plain").result("ok\n"));
              cfg.routes.get(
                  Endpoints.READYZ,
                  ctx -> {
                    Readiness.Verdict v = readiness.verdict();
                    StringBuilder b = new StringBuilder(v.ready() ? "ready\n" : "not ready\n");
                    v.reasons().forEach(r -> b.append(r).append('\n'));
                    ctx.status(v.ready() ? 200 : 503)
                        .contentType("text/plain")
                        .result(b.toString());
                  });
              cfg.routes.get(
                  Endpoints.CONTAINERS_API,
                  ctx ->
                      ctx.contentType("application/json")
                          .result(ContainersView.json(states.build())));
              cfg.routes.get(
                  Endpoints.LANDING,
                  ctx -> {
                    // The operator status page (issue 8): containers, attribution, doctor verdicts.
                    Readiness.Verdict v = readiness.verdict();
                    ctx.contentType("text/html; charset=utf-8")
                        .result(
                            io.vgpu.exporter.ops.StatusPage.standard()
                                .html(states.build(), v.ready(), v.reasons(), version));
                  });
            });
  }

  /** Binds and starts serving; returns once the port is open. */
  public HttpServer start() {
    app.start(host, port);
    return this;
  }

  /** The bound port (useful with port 0). */
  public int port() {
    return app.port();
  }

  @Override
  public void close() {
    app.stop();
  }
}

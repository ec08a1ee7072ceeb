package io.vgpu.exporter.http;

import io.javalin.Javalin;
import io.javalin.compression.CompressionStrategy;
import io.javalin.http.Context;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.vgpu.exporter.config.Endpoints;
import io.vgpu.exporter.config.StatusPages;
import io.vgpu.exporter.exposition.FamilySource;
import io.vgpu.exporter.metrics.CollectorStats;
import io.vgpu.exporter.node.NodeStateProvider;
import java.net.InetAddress;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;
import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.thread.QueuedThreadPool;

/**
 * The HTTP surface on Javalin: {@code /metrics} ({@link MetricsEndpoint}: text, OpenMetrics,
 * protobuf, gzip, {@code name[]}), {@code /healthz}, {@code /readyz}, {@code /api/v1/containers}
 * and the landing page ({@link StatusViews}). Optionally HTTPS and basic authentication from an
 * exporter-toolkit web configuration ({@link WebConfig}); {@code /healthz} always answers without
 * credentials (kubelet probes), and {@code /readyz} answers them with its status but without its
 * reasons.
 */
public final class HttpServer implements AutoCloseable {
  /**
   * How the server listens and what it shows.
   *
   * @param host address to bind
   * @param port port to bind (0: any)
   * @param metricsMaxAge how long a rendered /metrics page may be served again
   * @param web TLS and basic-auth users
   * @param statusPages who may see / and /api/v1/containers
   * @param statusMaxAge how long the status model is shared before it is computed again
   * @param limits what connections may cost before they prove anything ({@link ConnectionGuard})
   */
  public record Settings(
      String host,
      int port,
      Duration metricsMaxAge,
      WebConfig web,
      StatusPages statusPages,
      Duration statusMaxAge,
      NetworkLimits limits) {
    public Settings {
      Objects.requireNonNull(limits, "limits");
      Objects.requireNonNull(host, "host");
      Objects.requireNonNull(metricsMaxAge, "metricsMaxAge");
      Objects.requireNonNull(web, "web");
      Objects.requireNonNull(statusPages, "statusPages");
      Objects.requireNonNull(statusMaxAge, "statusMaxAge");
    }
  }

  /**
   * Server threads. Every handler only reads in-memory state except the status views, which are
   * bounded separately ({@link StatusViews#MAX_CONCURRENT}), so a few threads serve many scrapers:
   * concurrent /metrics scrapes share one render and then only copy bytes out, and a scrape waiting
   * for a render in flight holds no thread ({@link MetricsEndpoint}), so the pool does not limit
   * how many scrapes share one render. Each thread costs a stack (a few hundred KB touched), which
   * is what the footprint goal (README: Footprint) bounds.
   */
  static final int MAX_THREADS = 16;

  private final Javalin app;
  private final Settings settings;
  private final StatusViews status;
  private final AtomicReference<ConnectionGuard> guard = new AtomicReference<>();

  public HttpServer(
      Settings settings,
      PrometheusRegistry registry,
      FamilySource page,
      NodeStateProvider states,
      Readiness readiness,
      CollectorStats stats,
      String version,
      StatusPage statusPage) {
    this.settings = Objects.requireNonNull(settings, "settings");
    MetricsEndpoint metrics = new MetricsEndpoint(registry, page, settings.metricsMaxAge(), stats);
    this.status =
        new StatusViews(
            states::build,
            Objects.requireNonNull(statusPage, "statusPage"),
            readiness,
            version,
            settings.statusMaxAge(),
            System::nanoTime);
    BasicAuth auth =
        settings.web().users().isEmpty() ? null : new BasicAuth(settings.web().users());
    this.app =
        Javalin.create(
            cfg -> {
              cfg.startup.showJavalinBanner = false;
              cfg.startup.showOldJavalinVersionWarning = false;
              cfg.http.compressionStrategy = CompressionStrategy.NONE; // client_java gzips /metrics
              QueuedThreadPool pool = new QueuedThreadPool(MAX_THREADS, 2);
              pool.setName("vgpu-http");
              cfg.jetty.threadPool = pool;
              cfg.jetty.addConnector(
                  (server, http) -> {
                    ServerConnector c =
                        settings
                            .web()
                            .tls()
                            .map(tls -> TlsConnector.create(server, http, tls))
                            .orElseGet(
                                () -> new ServerConnector(server, new HttpConnectionFactory(http)));
                    c.setHost(settings.host());
                    c.setPort(settings.port());
                    guard.set(ConnectionGuard.install(server, c, settings.limits(), stats));
                    return c;
                  });
              if (auth != null) {
                cfg.routes.before(ctx -> authenticate(ctx, auth, stats));
              }
              cfg.routes.get(Endpoints.METRICS, metrics::handle);
              cfg.routes.get(
                  Endpoints.HEALTHZ, ctx -> ctx.contentType("text/plain").result("ok\n"));
              cfg.routes.get(
                  Endpoints.READYZ,
                  ctx -> {
                    Readiness.Verdict v = readiness.verdict();
                    StringBuilder b = new StringBuilder(v.ready() ? "ready\n" : "not ready\n");
                    if (auth == null || ctx.attribute(AUTHENTICATED) != null) {
                      v.reasons().forEach(r -> b.append(r).append('\n'));
                      v.notes().forEach(n -> b.append(n).append('\n'));
                    }
                    ctx.status(v.ready() ? 200 : 503)
                        .contentType("text/plain")
                        .result(b.toString());
                  });
              if (settings.statusPages() != StatusPages.OFF) {
                cfg.routes.get(
                    Endpoints.CONTAINERS_API,
                    ctx -> {
                      if (statusAllowed(ctx)) {
                        status.json(ctx);
                      }
                    });
                cfg.routes.get(
                    Endpoints.LANDING,
                    ctx -> {
                      if (statusAllowed(ctx)) {
                        status.html(ctx);
                      }
                    });
              }
            });
  }

  private static final String AUTHENTICATED = "vgpu.authenticated";

  /**
   * Basic auth on every path but the probes: /healthz answers anyone (and hashes nothing), /readyz
   * answers anyone its status and only authenticated clients its reasons (they name files and
   * pods). A check the saturated hashing could not take is answered 429 at once ({@link BasicAuth}:
   * a wrong-password flood must not hold the server's threads).
   */
  private static void authenticate(Context ctx, BasicAuth auth, CollectorStats stats) {
    String path = ctx.path();
    if (path.equals(Endpoints.HEALTHZ)) {
      return;
    }
    BasicAuth.Outcome outcome = auth.check(ctx.header("Authorization"));
    if (outcome == BasicAuth.Outcome.ALLOWED) {
      ctx.attribute(AUTHENTICATED, true);
      return;
    }
    if (path.equals(Endpoints.READYZ)) {
      return;
    }
    if (outcome == BasicAuth.Outcome.BUSY) {
      stats.authThrottled();
      ctx.status(429)
          .header("Retry-After", "1")
          .contentType("text/plain")
          .result("Too many authentication attempts at once; retry shortly\n");
    } else {
      ctx.status(401)
          .header("WWW-Authenticate", "Basic realm=\"vgpu-exporter\", charset=\"UTF-8\"")
          .contentType("text/plain")
          .result("Unauthorized\n");
    }
    ctx.skipRemainingHandlers();
  }

  private boolean statusAllowed(Context ctx) {
    if (settings.statusPages() == StatusPages.ALL || isLoopback(ctx.req().getRemoteAddr())) {
      return true;
    }
    ctx.status(403)
        .contentType("text/plain")
        .result("the status views are served to loopback clients only (--web.status-pages)\n");
    return false;
  }

  static boolean isLoopback(String address) {
    if (address == null || address.isEmpty()) {
      return false;
    }
    try {
      // A literal address: no name lookup happens.
      return InetAddress.ofLiteral(address).isLoopbackAddress();
    } catch (IllegalArgumentException e) {
      return false;
    }
  }

  /** Binds and starts serving; returns once the port is open. */
  public HttpServer start() {
    app.start(settings.host(), settings.port());
    return this;
  }

  /** The bound port (useful with port 0). */
  public int port() {
    return app.port();
  }

  /** The listener's connection limits (tests: what they closed). */
  ConnectionGuard connectionGuard() {
    return guard.get();
  }

  /** How many times the status model was computed (tests: shared between viewers). */
  long statusComputations() {
    return status.computations();
  }

  @Override
  public void close() {
    app.stop();
  }
}

package io.vgpu.exporter.cli;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.ConsoleAppender;
import ch.qos.logback.core.encoder.Encoder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Configures logback from {@code --log.level} and {@code --log.format}: one line per event on
 * stderr, key-value pairs as fields ({@link LogLine}). Code logs through SLF4J's fluent API, e.g.
 * {@code LOG.atWarn().setMessage("region write failed").addKeyValue("file", f).log()}.
 */
public final class LogSetup {
  private LogSetup() {}

  public static void configure(String level, String format) {
    if (!(LoggerFactory.getILoggerFactory() instanceof LoggerContext ctx)) {
      return;
    }
    configure(ctx, level, format);
  }

  /** Configures {@code ctx}; also the start-up configuration ({@link StartupLogConfigurator}). */
  static void configure(LoggerContext ctx, String level, String format) {
    ctx.reset();
    Encoder<ILoggingEvent> encoder =
        format.equals("json") ? new LogLine.Json() : new LogLine.Logfmt();
    encoder.setContext(ctx);
    encoder.start();
    ConsoleAppender<ILoggingEvent> appender = new ConsoleAppender<>();
    appender.setContext(ctx);
    appender.setTarget("System.err");
    appender.setEncoder(encoder);
    appender.start();
    ch.qos.logback.classic.Logger root = ctx.getLogger(Logger.ROOT_LOGGER_NAME);
    root.setLevel(Level.toLevel(level, Level.INFO));
    root.addAppender(appender);
    Level libs = root.getLevel().isGreaterOrEqual(Level.WARN) ? root.getLevel() : Level.WARN;
    for (String noisy : new String[] {"org.eclipse.jetty", "io.javalin", "io.fabric8", "okhttp3"}) {
      ctx.getLogger(noisy).setLevel(libs);
    }
    // fabric8's informers log every failed list/watch retry as a WARN with an escaped stack trace
    // (every few seconds while the API server is away); the metadata source reports the same
    // failures itself, once per problem with back-off and the fix (KubernetesMetadataSource).
    Level informers = root.getLevel().isGreaterOrEqual(Level.ERROR) ? root.getLevel() : Level.ERROR;
    ctx.getLogger("io.fabric8.kubernetes.client.informers").setLevel(informers);
    // gRPC sets SO_KEEPALIVE on every client channel; netty warns that a unix socket has no such
    // option at each connect to the kubelet's pod-resources socket. The poller reports real
    // failures itself (PodResourcesSource).
    ctx.getLogger("io.grpc.netty.shaded.io.netty.bootstrap").setLevel(informers);
    ctx.addTurboFilter(new JavalinStartFailureFilter());
  }
}

package io.vgpu.exporter.cli;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.PatternLayout;
import ch.qos.logback.classic.encoder.JsonEncoder;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.ConsoleAppender;
import ch.qos.logback.core.encoder.Encoder;
import ch.qos.logback.core.encoder.LayoutWrappingEncoder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Configures logback from {@code --log.level} and {@code --log.format}: one line per event on
 * stderr.
 */
public final class LogSetup {
  static final String LOGFMT_PATTERN =
      "ts=%d{yyyy-MM-dd'T'HH:mm:ss.SSSXXX,UTC} level=%level logger=%logger{0} %safemsg%n";

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
    Encoder<ILoggingEvent> encoder;
    if (format.equals("json")) {
      JsonEncoder json = new JsonEncoder();
      json.setContext(ctx);
      json.start();
      encoder = json;
    } else {
      PatternLayout layout = new PatternLayout();
      layout.getInstanceConverterMap().put("safemsg", SafeMessageConverter::new);
      layout.setContext(ctx);
      layout.setPattern(LOGFMT_PATTERN);
      layout.start();
      LayoutWrappingEncoder<ILoggingEvent> wrapping = new LayoutWrappingEncoder<>();
      wrapping.setContext(ctx);
      wrapping.setLayout(layout);
      wrapping.start();
      encoder = wrapping;
    }
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
  }
}

package io.vgpu.exporter.cli;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.turbo.TurboFilter;
import ch.qos.logback.core.spi.FilterReply;
import org.slf4j.Marker;

/**
 * Drops Javalin's own "Failed to start Javalin" ERROR (with its stack trace): the exception it logs
 * is rethrown, and {@code serve} and {@code demo} report it as their one error line ({@code cannot
 * serve on ADDR:PORT: Address already in use}). Everything else Javalin logs passes.
 */
final class JavalinStartFailureFilter extends TurboFilter {
  static final String MESSAGE = "Failed to start Javalin";

  @Override
  public FilterReply decide(
      Marker marker, Logger logger, Level level, String format, Object[] params, Throwable t) {
    if (format != null
        && format.startsWith(MESSAGE)
        && (logger.getName().startsWith("io.javalin") || logger.getName().equals("Javalin"))) {
      return FilterReply.DENY;
    }
    return FilterReply.NEUTRAL;
  }
}

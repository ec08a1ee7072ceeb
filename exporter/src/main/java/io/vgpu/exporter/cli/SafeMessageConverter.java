package io.vgpu.exporter.cli;

import ch.qos.logback.classic.pattern.ClassicConverter;
import ch.qos.logback.classic.spi.ILoggingEvent;
import io.vgpu.exporter.text.TenantText;

/**
 * {@code %safemsg}: the formatted message with every control character, escape introducer and
 * bidirectional override replaced (see {@link TenantText}). Log messages quote tenant file and
 * directory names; one read with {@code less -R} or on a terminal must not run what they carry, and
 * a name with a newline must not forge a log line.
 */
public final class SafeMessageConverter extends ClassicConverter {
  @Override
  public String convert(ILoggingEvent event) {
    return TenantText.clean(event.getFormattedMessage());
  }
}

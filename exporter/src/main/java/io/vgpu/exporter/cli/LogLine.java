package io.vgpu.exporter.cli;

import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.IThrowableProxy;
import ch.qos.logback.classic.spi.ThrowableProxyUtil;
import ch.qos.logback.core.encoder.EncoderBase;
import io.vgpu.exporter.text.SafeJson;
import io.vgpu.exporter.text.TenantText;
import java.nio.charset.StandardCharsets;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.event.KeyValuePair;

/**
 * The two log formats ({@code --log.format}): one line per event, the event's key-value pairs
 * (SLF4J's fluent {@code addKeyValue}) as fields of their own, and a throwable's stack trace as one
 * {@code error} field (never extra lines). Values are tenant-safe: whatever could drive a terminal
 * or forge a line is escaped ({@link TenantText}, {@link SafeJson}).
 */
final class LogLine {
  private static final DateTimeFormatter TS =
      DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSSXXX").withZone(ZoneOffset.UTC);

  /** Fields every line has; a key-value pair with one of these names is written as kv_NAME. */
  private static final Set<String> RESERVED = Set.of("ts", "level", "logger", "msg", "error");

  private LogLine() {}

  /** {@code ts=... level=... logger=... msg="..." key=value ... error="..."}. */
  static final class Logfmt extends EncoderBase<ILoggingEvent> {
    @Override
    public byte[] encode(ILoggingEvent e) {
      StringBuilder b = new StringBuilder(160);
      b.append("ts=").append(TS.format(e.getInstant()));
      b.append(" level=").append(e.getLevel());
      b.append(" logger=").append(simpleName(e.getLoggerName()));
      b.append(" msg=");
      quoted(b, e.getFormattedMessage());
      for (Map.Entry<String, Object> kv : pairs(e).entrySet()) {
        b.append(' ').append(key(kv.getKey())).append('=');
        value(b, kv.getValue());
      }
      String error = error(e);
      if (error != null) {
        b.append(" error=");
        quoted(b, error);
      }
      return b.append('\n').toString().getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public byte[] headerBytes() {
      return null;
    }

    @Override
    public byte[] footerBytes() {
      return null;
    }

    /** Bare when it is a plain token, else quoted. */
    private static void value(StringBuilder b, Object v) {
      String s = String.valueOf(v);
      boolean bare = !s.isEmpty();
      for (int i = 0; i < s.length() && bare; i++) {
        char c = s.charAt(i);
        bare = c > ' ' && c < 0x7f && c != '"' && c != '=' && c != '\\';
      }
      if (bare) {
        b.append(s);
      } else {
        quoted(b, s);
      }
    }

    /**
     * A double-quoted string: backslash, quote and the line breaks of a stack trace escaped as in
     * Go's logfmt, every other unsafe character replaced ({@link TenantText#clean}).
     */
    private static void quoted(StringBuilder b, String s) {
      String clean = TenantText.clean(escapeBreaks(s));
      b.append('"').append(clean).append('"');
    }

    private static String escapeBreaks(String s) {
      StringBuilder out = new StringBuilder(s.length() + 16);
      for (int i = 0; i < s.length(); i++) {
        char c = s.charAt(i);
        switch (c) {
          case '\\' -> out.append("\\\\");
          case '"' -> out.append("\\\"");
          case '\n' -> out.append("\\n");
          case '\r' -> out.append("\\r");
          case '\t' -> out.append("\\t");
          default -> out.append(c);
        }
      }
      return out.toString();
    }
  }

  /** One JSON object per line: ts, level, logger, msg, each key-value pair, error. */
  static final class Json extends EncoderBase<ILoggingEvent> {
    @Override
    public byte[] encode(ILoggingEvent e) {
      Map<String, Object> line = new LinkedHashMap<>();
      line.put("ts", TS.format(e.getInstant()));
      line.put("level", e.getLevel().toString());
      line.put("logger", e.getLoggerName());
      line.put("msg", e.getFormattedMessage());
      for (Map.Entry<String, Object> kv : pairs(e).entrySet()) {
        Object v = kv.getValue();
        line.put(
            key(kv.getKey()),
            v instanceof Number || v instanceof Boolean || v == null ? v : String.valueOf(v));
      }
      String error = error(e);
      if (error != null) {
        line.put("error", error);
      }
      return (SafeJson.mapper().writeValueAsString(line) + "\n").getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public byte[] headerBytes() {
      return null;
    }

    @Override
    public byte[] footerBytes() {
      return null;
    }
  }

  private static Map<String, Object> pairs(ILoggingEvent e) {
    List<KeyValuePair> kvs = e.getKeyValuePairs();
    if (kvs == null || kvs.isEmpty()) {
      return Map.of();
    }
    Map<String, Object> out = new LinkedHashMap<>();
    for (KeyValuePair kv : kvs) {
      String k = kv.key == null ? "null" : kv.key;
      out.put(RESERVED.contains(k) ? "kv_" + k : k, kv.value);
    }
    return out;
  }

  /** Keys are code, but a key is still made a plain token. */
  private static String key(String k) {
    StringBuilder b = new StringBuilder(k.length());
    for (int i = 0; i < k.length(); i++) {
      char c = k.charAt(i);
      b.append((Character.isLetterOrDigit(c) && c < 0x7f) || c == '_' || c == '.' ? c : '_');
    }
    return b.isEmpty() ? "_" : b.toString();
  }

  /** The throwable with its stack trace and causes, or null. */
  private static String error(ILoggingEvent e) {
    IThrowableProxy t = e.getThrowableProxy();
    return t == null ? null : ThrowableProxyUtil.asString(t).stripTrailing();
  }

  private static String simpleName(String logger) {
    int dot = logger.lastIndexOf('.');
    return dot < 0 ? logger : logger.substring(dot + 1);
  }
}

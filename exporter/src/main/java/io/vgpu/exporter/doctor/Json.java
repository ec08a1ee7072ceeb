package io.vgpu.exporter.doctor;

import io.vgpu.exporter.text.TenantText;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A minimal JSON writer for the ops commands' machine-readable output: maps (insertion order kept),
 * lists, strings, numbers, booleans, null and Optionals. Not thread-safe; one per document.
 */
public final class Json {
  private Json() {}

  public static String write(Object value) {
    StringBuilder sb = new StringBuilder();
    append(sb, value);
    return sb.toString();
  }

  private static void append(StringBuilder sb, Object v) {
    switch (v) {
      case null -> sb.append("null");
      case Optional<?> o -> append(sb, o.orElse(null));
      case String s -> string(sb, s);
      case Boolean b -> sb.append(b);
      case Double d -> sb.append(d.isNaN() || d.isInfinite() ? "null" : d.toString());
      case Float f -> sb.append(f.isNaN() || f.isInfinite() ? "null" : f.toString());
      case Number n -> sb.append(n);
      case Map<?, ?> m -> {
        sb.append('{');
        boolean first = true;
        for (Map.Entry<?, ?> e : m.entrySet()) {
          if (!first) {
            sb.append(',');
          }
          first = false;
          string(sb, String.valueOf(e.getKey()));
          sb.append(':');
          append(sb, e.getValue());
        }
        sb.append('}');
      }
      case List<?> l -> {
        sb.append('[');
        for (int i = 0; i < l.size(); i++) {
          if (i > 0) {
            sb.append(',');
          }
          append(sb, l.get(i));
        }
        sb.append(']');
      }
      default -> string(sb, v.toString());
    }
  }

  private static void string(StringBuilder sb, String s) {
    sb.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> sb.append("\\\"");
        case '\\' -> sb.append("\\\\");
        case '\n' -> sb.append("\\n");
        case '\r' -> sb.append("\\r");
        case '\t' -> sb.append("\\t");
        default -> {
          // Escaped rather than dropped (JSON stays exact), so a terminal showing it is safe too.
          if (TenantText.unsafe(c, s, i) || Character.isSurrogate(c)) {
            sb.append(String.format(java.util.Locale.ROOT, "\\u%04x", (int) c));
          } else {
            sb.append(c);
          }
        }
      }
    }
    sb.append('"');
  }
}

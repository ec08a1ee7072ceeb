package io.vgpu.exporter.doctor;

import io.vgpu.exporter.text.SafeJson;
import io.vgpu.exporter.text.TenantText;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The operator tools' machine-readable output through Jackson: maps (insertion order kept), lists,
 * strings, numbers, booleans, null and Optionals; NaN and infinities become null (JSON has no such
 * numbers). Written by {@link SafeJson}: every character {@link TenantText} calls unsafe for a
 * terminal is escaped rather than dropped, so the JSON stays exact and printing it stays safe.
 * Thread-safe.
 */
public final class Json {
  private Json() {}

  public static String write(Object value) {
    return SafeJson.mapper().writeValueAsString(plain(value));
  }

  /** The value as maps, lists and scalars Jackson writes without reflection. */
  private static Object plain(Object v) {
    return switch (v) {
      case null -> null;
      case Optional<?> o -> plain(o.orElse(null));
      case String s -> s;
      case Boolean b -> b;
      case Double d -> d.isNaN() || d.isInfinite() ? null : d;
      case Float f -> f.isNaN() || f.isInfinite() ? null : f;
      case Number n -> n;
      case Map<?, ?> m -> {
        Map<String, Object> out = new LinkedHashMap<>();
        m.forEach((k, x) -> out.put(String.valueOf(k), plain(x)));
        yield out;
      }
      case List<?> l -> {
        List<Object> out = new ArrayList<>(l.size());
        l.forEach(x -> out.add(plain(x)));
        yield out;
      }
      default -> v.toString();
    };
  }
}

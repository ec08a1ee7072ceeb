package io.vgpu.regioncodec.hamicore;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small JSON reader for the fixture manifest (objects, arrays, strings without escapes other than
 * \" and \\, integers, true/false/null). Test-only; fails loudly on anything else.
 */
public final class MiniJson {
  private final String s;
  private int i;

  private MiniJson(String s) {
    this.s = s;
  }

  /** Parses one JSON document. */
  public static Object parse(String text) {
    MiniJson p = new MiniJson(text);
    Object v = p.value();
    p.ws();
    if (p.i != p.s.length()) {
      throw p.error("trailing text");
    }
    return v;
  }

  /** {@code o[key]} as an object. */
  @SuppressWarnings("unchecked")
  public static Map<String, Object> obj(Object o, String key) {
    return (Map<String, Object>) field(o, key);
  }

  /** {@code o[key]} as an array. */
  @SuppressWarnings("unchecked")
  public static List<Object> arr(Object o, String key) {
    return (List<Object>) field(o, key);
  }

  /** {@code o[key]} as a long. */
  public static long num(Object o, String key) {
    return (Long) field(o, key);
  }

  /** {@code o[key]} as a string. */
  public static String str(Object o, String key) {
    return (String) field(o, key);
  }

  @SuppressWarnings("unchecked")
  private static Object field(Object o, String key) {
    Map<String, Object> m = (Map<String, Object>) o;
    if (!m.containsKey(key)) {
      throw new IllegalArgumentException("manifest lacks \"" + key + "\" in " + m.keySet());
    }
    return m.get(key);
  }

  private IllegalArgumentException error(String what) {
    return new IllegalArgumentException("manifest: " + what + " at offset " + i);
  }

  private void ws() {
    while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
      i++;
    }
  }

  private void expect(char c) {
    ws();
    if (i >= s.length() || s.charAt(i) != c) {
      throw error("expected '" + c + "'");
    }
    i++;
  }

  private Object value() {
    ws();
    if (i >= s.length()) {
      throw error("unexpected end");
    }
    char c = s.charAt(i);
    if (c == '{') {
      Map<String, Object> m = new LinkedHashMap<>();
      i++;
      ws();
      if (s.charAt(i) == '}') {
        i++;
        return m;
      }
      do {
        ws();
        String k = string();
        expect(':');
        m.put(k, value());
        ws();
      } while (s.charAt(i++) == ',');
      if (s.charAt(i - 1) != '}') {
        throw error("expected '}'");
      }
      return m;
    }
    if (c == '[') {
      List<Object> l = new ArrayList<>();
      i++;
      ws();
      if (s.charAt(i) == ']') {
        i++;
        return l;
      }
      do {
        l.add(value());
        ws();
      } while (s.charAt(i++) == ',');
      if (s.charAt(i - 1) != ']') {
        throw error("expected ']'");
      }
      return l;
    }
    if (c == '"') {
      return string();
    }
    for (String lit : new String[] {"true", "false", "null"}) {
      if (s.startsWith(lit, i)) {
        i += lit.length();
        return lit.equals("null") ? null : Boolean.valueOf(lit);
      }
    }
    int start = i;
    if (c == '-') {
      i++;
    }
    while (i < s.length() && Character.isDigit(s.charAt(i))) {
      i++;
    }
    if (start == i || (i < s.length() && ".eE".indexOf(s.charAt(i)) >= 0)) {
      throw error("only integers are supported");
    }
    return Long.parseLong(s.substring(start, i));
  }

  private String string() {
    if (s.charAt(i) != '"') {
      throw error("expected a string");
    }
    StringBuilder b = new StringBuilder();
    i++;
    while (s.charAt(i) != '"') {
      char c = s.charAt(i++);
      if (c == '\\') {
        char e = s.charAt(i++);
        if (e != '"' && e != '\\') {
          throw error("unsupported escape");
        }
        c = e;
      }
      b.append(c);
    }
    i++;
    return b.toString();
  }
}

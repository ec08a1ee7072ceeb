package io.vgpu.hostpid.internal;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/**
 * The variables a caller asks for from a process's {@code /proc/<pid>/environ} ({@code NAME=value}
 * entries separated by NUL bytes), read within a byte bound. The process wrote its environment, so
 * the bytes are untrusted: any byte sequence gives a map of asked-for names only.
 */
public final class EnvironParser {
  private EnvironParser() {}

  /**
   * The asked-for variables among the first {@code maxBytes} of {@code environ}; empty if unread.
   */
  public static Map<String, String> read(Path environ, int maxBytes, Set<String> keys) {
    Map<String, String> env = new HashMap<>();
    BoundedReader.readPrefix(environ, maxBytes)
        .ifPresent(bytes -> select(new String(bytes, StandardCharsets.ISO_8859_1), keys, env));
    return env;
  }

  /** Adds the entries of {@code text} whose name is one of {@code keys} to {@code out}. */
  static void select(String text, Set<String> keys, Map<String, String> out) {
    for (String kv : text.split("\0", -1)) {
      int eq = kv.indexOf('=');
      if (eq > 0 && keys.contains(kv.substring(0, eq))) {
        out.put(kv.substring(0, eq), kv.substring(eq + 1));
      }
    }
  }
}

package io.vgpu.exporter.config;

import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Value parsers for {@link Flag}s. Each throws {@link IllegalArgumentException} saying what is
 * expected.
 */
public final class Parsers {
  private static final Pattern DURATION_PART = Pattern.compile("(\\d+)(ms|s|m|h)");
  private static final Pattern HOST =
      Pattern.compile("[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\\[?[0-9A-Fa-f:.]+]?");
  private static final Pattern LABEL_KEY =
      Pattern.compile(
          "([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
              + "[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?");

  private Parsers() {}

  public static boolean bool(String raw) {
    return switch (raw.toLowerCase(Locale.ROOT)) {
      case "true", "1", "yes", "on" -> true;
      case "false", "0", "no", "off" -> false;
      default -> throw new IllegalArgumentException("expected true or false");
    };
  }

  /** A TCP port; 0 asks the kernel for a free one (tests). */
  public static int port(String raw) {
    int port;
    try {
      port = Integer.parseInt(raw);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("expected a port number 0-65535", e);
    }
    if (port < 0 || port > 65_535) {
      throw new IllegalArgumentException("expected a port number 0-65535");
    }
    return port;
  }

  /** A host name or IP literal to bind to, without a port. */
  public static String host(String raw) {
    if (raw.isEmpty() || !HOST.matcher(raw).matches()) {
      throw new IllegalArgumentException("expected an IP address or host name, e.g. 0.0.0.0 or ::");
    }
    return raw;
  }

  /** A Go-style duration: {@code 500ms}, {@code 10s}, {@code 5m}, {@code 1h30m}. */
  public static Duration duration(String raw) {
    String s = raw.toLowerCase(Locale.ROOT);
    if (s.equals("0")) {
      return Duration.ZERO;
    }
    Matcher m = DURATION_PART.matcher(s);
    Duration total = Duration.ZERO;
    int end = 0;
    while (m.find()) {
      if (m.start() != end) {
        break;
      }
      long n;
      try {
        n = Long.parseLong(m.group(1));
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException("number too large in duration", e);
      }
      try {
        total =
            total.plus(
                switch (m.group(2)) {
                  case "ms" -> Duration.ofMillis(n);
                  case "s" -> Duration.ofSeconds(n);
                  case "m" -> Duration.ofMinutes(n);
                  default -> Duration.ofHours(n);
                });
      } catch (ArithmeticException e) {
        throw new IllegalArgumentException("duration too large", e);
      }
      end = m.end();
    }
    if (end == 0 || end != s.length()) {
      throw new IllegalArgumentException("expected a duration like 500ms, 10s, 5m or 1h30m");
    }
    return total;
  }

  /** A duration of at least {@code min}. */
  public static Flag.Parser<Duration> durationAtLeast(Duration min) {
    return raw -> {
      Duration d = duration(raw);
      if (d.compareTo(min) < 0) {
        throw new IllegalArgumentException("must be at least " + min.toMillis() + "ms");
      }
      return d;
    };
  }

  /** A path, made absolute against the working directory. */
  public static Path path(String raw) {
    if (raw.isEmpty()) {
      throw new IllegalArgumentException("expected a path");
    }
    try {
      return Path.of(raw).toAbsolutePath().normalize();
    } catch (InvalidPathException e) {
      throw new IllegalArgumentException("not a valid path: " + e.getReason(), e);
    }
  }

  /** A path as {@link #path}; empty means none. */
  public static Optional<Path> optionalPath(String raw) {
    return raw.isEmpty() ? Optional.empty() : Optional.of(path(raw));
  }

  public static String string(String raw) {
    return raw;
  }

  /** Comma-separated words; blanks dropped. */
  public static List<String> list(String raw) {
    return Arrays.stream(raw.split(",")).map(String::strip).filter(s -> !s.isEmpty()).toList();
  }

  /** Comma-separated Kubernetes label keys ({@code app}, {@code app.kubernetes.io/name}). */
  public static List<String> labelKeys(String raw) {
    List<String> keys = new ArrayList<>();
    for (String key : list(raw)) {
      if (key.length() > 317 || !LABEL_KEY.matcher(key).matches()) {
        throw new IllegalArgumentException("'" + key + "' is not a Kubernetes label key");
      }
      keys.add(key);
    }
    return List.copyOf(keys);
  }

  /** One of the given words, case-insensitive, returned lower-case. */
  public static Flag.Parser<String> oneOf(String... allowed) {
    return raw -> {
      String v = raw.toLowerCase(Locale.ROOT);
      for (String a : allowed) {
        if (a.equals(v)) {
          return v;
        }
      }
      throw new IllegalArgumentException("expected one of " + String.join(", ", allowed));
    };
  }
}

package io.vgpu.exporter.discovery;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Objects;
import java.util.Optional;

/**
 * What one {@code <cache path>.degraded} side file says: libvgpu could not use the shared region at
 * that cache path and runs with process-local limits (see libvgpu's README, "Degraded mode").
 *
 * <p>The file lives in the tenant's directory, so its content is hostile: {@link #parse} accepts
 * exactly the one line libvgpu writes and nothing else; every other content (and a file that is a
 * link, a FIFO, too large or has several names) is {@link Cause#MALFORMED}, whose content is never
 * shown anywhere.
 *
 * @param path the side file
 * @param cause the cause token, or {@link Cause#MALFORMED}
 * @param pid the degraded process's pid in the container's pid namespace (0 when malformed)
 * @param epochSeconds when it degraded, Unix seconds (0 when malformed)
 */
public record DegradedMark(Path path, Cause cause, int pid, long epochSeconds) {
  /** The side file's name suffix, after the cache file's name. */
  public static final String SUFFIX = ".degraded";

  /** Longest well-formed line ({@code slot-table-full}, 7-digit pid, 12-digit time) is 77 bytes. */
  public static final int MAX_BYTES = 256;

  /** Linux's PID_MAX_LIMIT (2^22): no pid is larger. */
  static final int MAX_PID = 1 << 22;

  /** 9999-12-31T23:59:59Z: later times are not a clock libvgpu read. */
  static final long MAX_EPOCH_SECONDS = 253_402_300_799L;

  private static final String PREFIX = "libvgpu-degraded v1 cause=";

  /** The causes libvgpu writes, plus {@code malformed}; a small fixed label set. */
  public enum Cause {
    DIR_MISSING,
    UNOPENABLE,
    SYMLINK,
    NOT_REGULAR,
    SLOT_TABLE_FULL,
    NO_SPACE,
    NO_LOCKS,
    VERSION,
    MALFORMED;

    /** The token as libvgpu writes it, and the metric label value. */
    public String label() {
      return name().toLowerCase(Locale.ROOT).replace('_', '-');
    }

    static Optional<Cause> ofToken(String token) {
      for (Cause c : values()) {
        if (c != MALFORMED && c.label().equals(token)) {
          return Optional.of(c);
        }
      }
      return Optional.empty();
    }
  }

  public DegradedMark {
    Objects.requireNonNull(path, "path");
    Objects.requireNonNull(cause, "cause");
  }

  /** A side file whose content (or type) is not what libvgpu writes. */
  public static DegradedMark malformed(Path path) {
    return new DegradedMark(path, Cause.MALFORMED, 0, 0);
  }

  public boolean malformed() {
    return cause == Cause.MALFORMED;
  }

  /** The cache file this side file is about ({@code x.cache} for {@code x.cache.degraded}). */
  public Path cachePath() {
    String name = path.getFileName().toString();
    return name.endsWith(SUFFIX)
        ? path.resolveSibling(name.substring(0, name.length() - SUFFIX.length()))
        : path;
  }

  /**
   * Parses the whole content of a side file: exactly {@code libvgpu-degraded v1 cause=<token>
   * pid=<pid> time=<seconds>\n}, token from {@link Cause}, pid in {@code [1, 2^22]} and time in
   * {@code [1, 253402300799]}, both plain decimal without sign or leading zero. Never throws.
   */
  public static DegradedMark parse(Path path, byte[] content) {
    return parseFields(content)
        .map(f -> new DegradedMark(path, f.cause, f.pid, f.time))
        .orElseGet(() -> malformed(path));
  }

  private record Fields(Cause cause, int pid, long time) {}

  private static Optional<Fields> parseFields(byte[] content) {
    if (content == null || content.length > MAX_BYTES || content.length == 0) {
      return Optional.empty();
    }
    for (byte b : content) {
      // Printable ASCII and the final newline only: anything else is not libvgpu's line.
      if ((b < 0x20 || b > 0x7e) && b != '\n') {
        return Optional.empty();
      }
    }
    String text = new String(content, StandardCharsets.US_ASCII);
    if (!text.startsWith(PREFIX)
        || !text.endsWith("\n")
        || text.indexOf('\n') != text.length() - 1) {
      return Optional.empty();
    }
    String[] fields = text.substring(PREFIX.length(), text.length() - 1).split(" ", -1);
    if (fields.length != 3 || !fields[1].startsWith("pid=") || !fields[2].startsWith("time=")) {
      return Optional.empty();
    }
    Optional<Cause> cause = Cause.ofToken(fields[0]);
    long pid = decimal(fields[1].substring(4), MAX_PID);
    long time = decimal(fields[2].substring(5), MAX_EPOCH_SECONDS);
    if (cause.isEmpty() || pid < 1 || time < 1) {
      return Optional.empty();
    }
    return Optional.of(new Fields(cause.get(), (int) pid, time));
  }

  /** A plain positive decimal up to {@code max}, or -1. */
  private static long decimal(String s, long max) {
    if (s.isEmpty() || s.length() > 12 || s.charAt(0) == '0') {
      return -1;
    }
    long v = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c < '0' || c > '9') {
        return -1;
      }
      v = v * 10 + (c - '0');
    }
    return v <= max ? v : -1;
  }
}

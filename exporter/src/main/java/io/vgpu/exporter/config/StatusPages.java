package io.vgpu.exporter.config;

import java.util.Locale;

/** Who may see the status views ({@code --web.status-pages}). */
public enum StatusPages {
  ALL,
  LOOPBACK,
  OFF;

  /** {@code all}, {@code loopback} or {@code off}, case-insensitive. */
  public static StatusPages parse(String raw) {
    return switch (raw.toLowerCase(Locale.ROOT)) {
      case "all" -> ALL;
      case "loopback" -> LOOPBACK;
      case "off" -> OFF;
      default -> throw new IllegalArgumentException("expected one of all, loopback, off");
    };
  }
}

package io.vgpu.exporter.metrics;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

/**
 * Version and source revision of this build, from {@code build.properties} (filtered by Maven).
 *
 * @param version project version, "dev" when run from an IDE
 * @param revision git revision when the build knew it, else "unknown"
 */
public record BuildInfo(String version, String revision) {
  public static BuildInfo load() {
    Properties p = new Properties();
    try (InputStream in =
        BuildInfo.class.getResourceAsStream("/io/vgpu/exporter/build.properties")) {
      if (in != null) {
        p.load(in);
      }
    } catch (IOException e) {
      // fall through to defaults
    }
    return new BuildInfo(
        clean(p.getProperty("version"), "dev"), clean(p.getProperty("revision"), "unknown"));
  }

  private static String clean(String v, String fallback) {
    return v == null || v.isBlank() || v.startsWith("${") ? fallback : v.strip();
  }
}

package io.vgpu.exporter.exposition;

/** What tests outside this package may ask an {@link ExpositionCache} about its memory. */
public final class ExpositionCacheProbe {
  private ExpositionCacheProbe() {}

  /** Pages alive: current ones and older ones a scrape still holds. */
  public static int livePages(ExpositionCache cache) {
    return cache.livePages();
  }
}

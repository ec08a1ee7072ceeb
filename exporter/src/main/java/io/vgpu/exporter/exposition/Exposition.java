package io.vgpu.exporter.exposition;

/**
 * What {@link ExpositionCache#acquire} gives a scrape: rendered bytes, a page to stream, or a
 * fallback.
 */
public sealed interface Exposition permits Rendition, Exposition.Fallback, Exposition.Stream {

  /**
   * The page holds something {@link TextEncoder} does not write: the caller serves the scrape with
   * client_java's handler. Not cached.
   */
  record Fallback(String reason) implements Exposition {}

  /**
   * The page is larger than the cache may hold ({@link ExpositionCache#pageLimit}): the caller
   * streams it with {@link ExpositionCache#stream}, one scrape at a time, in constant memory.
   */
  record Stream(ExpositionFormat format) implements Exposition {}
}

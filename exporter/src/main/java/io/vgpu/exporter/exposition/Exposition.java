package io.vgpu.exporter.exposition;

import io.prometheus.metrics.model.snapshots.MetricSnapshots;

/** What {@link ExpositionCache#acquire} gives a scrape: rendered bytes, or snapshots to encode. */
public sealed interface Exposition permits Rendition, Exposition.Fallback, Exposition.Stream {

  /**
   * The snapshots held something {@link TextEncoder} does not write: the caller encodes them with
   * client_java's writer. Not cached.
   */
  record Fallback(MetricSnapshots snapshots, String reason) implements Exposition {}

  /**
   * The page is larger than the cache may hold ({@link ExpositionCache#pageLimit}): the caller
   * streams it with {@link ExpositionCache#stream}, one scrape at a time, in constant memory.
   */
  record Stream(ExpositionFormat format) implements Exposition {}
}

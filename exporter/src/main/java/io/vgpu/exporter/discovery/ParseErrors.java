package io.vgpu.exporter.discovery;

import io.vgpu.regioncodec.RegionException;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * Counters behind {@code vgpu_exporter_parse_errors_total{reason}} and {@code
 * vgpu_exporter_region_best_effort_reads_total}. Thread-safe.
 */
public final class ParseErrors {
  /**
   * Reason label for {@code .cache} files beyond {@link CacheDiscovery#MAX_FILES_PER_CONTAINER}.
   */
  public static final String TOO_MANY_FILES = "too_many_files";

  private final LongAdder tooManyFiles = new LongAdder();
  private final LongAdder bestEffortReads = new LongAdder();

  private final Map<RegionException.Reason, LongAdder> counts =
      new EnumMap<>(RegionException.Reason.class);

  public ParseErrors() {
    for (RegionException.Reason r : RegionException.Reason.values()) {
      counts.put(r, new LongAdder());
    }
  }

  public void increment(RegionException.Reason reason) {
    counts.get(reason).increment();
  }

  public long count(RegionException.Reason reason) {
    return counts.get(reason).sum();
  }

  /** Counts one {@code .cache} file left unmapped because its directory holds too many. */
  public void incrementTooManyFiles() {
    tooManyFiles.increment();
  }

  /** Counts {@code n} more such files. */
  public void incrementTooManyFiles(int n) {
    tooManyFiles.add(n);
  }

  public long tooManyFiles() {
    return tooManyFiles.sum();
  }

  /**
   * Counts one snapshot whose slot seqlock never settled within the codec's retry bound (a writer
   * died mid-update, or keeps rewriting): its values were served as read, possibly torn.
   */
  public void incrementBestEffortRead() {
    bestEffortReads.increment();
  }

  public long bestEffortReads() {
    return bestEffortReads.sum();
  }
}

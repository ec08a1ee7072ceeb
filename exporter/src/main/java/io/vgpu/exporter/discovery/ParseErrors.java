package io.vgpu.exporter.discovery;

import io.vgpu.regioncodec.RegionException;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/** Counters behind {@code vgpu_exporter_parse_errors_total{reason}}. Thread-safe. */
public final class ParseErrors {
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
}

package io.vgpu.exporter.metrics;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/** Last outcome and duration of every collector, and of the last whole scrape. Thread-safe. */
public final class CollectorStats {
  /** One collector's last run. */
  public record Outcome(boolean success, double seconds) {}

  private final Map<String, Outcome> outcomes = new ConcurrentHashMap<>();
  private volatile double lastScrapeSeconds = Double.NaN;

  public void record(String collector, boolean success, long nanos) {
    outcomes.put(collector, new Outcome(success, nanos / 1e9));
  }

  public Map<String, Outcome> outcomes() {
    return Map.copyOf(outcomes);
  }

  public void recordScrape(long nanos) {
    lastScrapeSeconds = nanos / 1e9;
  }

  /** Seconds the previous complete scrape took (collect + encode + write); NaN before the first. */
  public double lastScrapeSeconds() {
    return lastScrapeSeconds;
  }
}

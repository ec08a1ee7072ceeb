package io.vgpu.exporter.metrics;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Last outcome and duration of every collector, and of the last whole scrape; what the HTTP server
 * turned away before it cost anything (the network defences of issue 31). Thread-safe.
 */
public final class CollectorStats {
  /** Why the HTTP server closed a connection before it proved anything. */
  public enum ConnectionRejection {
    /** Its client address had --web.max-connections-per-client open already. */
    PER_CLIENT_LIMIT("per_client_limit"),
    /** Its TLS handshake did not finish within --web.tls-handshake-timeout. */
    HANDSHAKE_TIMEOUT("handshake_timeout");

    private final String label;

    ConnectionRejection(String label) {
      this.label = label;
    }

    public String label() {
      return label;
    }
  }

  private final java.util.EnumMap<ConnectionRejection, java.util.concurrent.atomic.LongAdder>
      rejected = new java.util.EnumMap<>(ConnectionRejection.class);
  private final java.util.concurrent.atomic.LongAdder authThrottled =
      new java.util.concurrent.atomic.LongAdder();

  {
    for (ConnectionRejection r : ConnectionRejection.values()) {
      rejected.put(r, new java.util.concurrent.atomic.LongAdder());
    }
  }

  /** One connection closed by the limits. */
  public void connectionRejected(ConnectionRejection reason) {
    rejected.get(reason).increment();
  }

  /** Connections closed by the limits for {@code reason} since start. */
  public long connectionsRejected(ConnectionRejection reason) {
    return rejected.get(reason).sum();
  }

  /** One request answered 429 unchecked: the bounded password hashing was saturated. */
  public void authThrottled() {
    authThrottled.increment();
  }

  /** Requests answered 429 by the saturated hashing since start. */
  public long authThrottledCount() {
    return authThrottled.sum();
  }

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

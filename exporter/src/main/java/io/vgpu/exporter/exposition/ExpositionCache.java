package io.vgpu.exporter.exposition;

import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import java.time.Duration;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * Renders the exposition at most once per format per freshness window, and once for any number of
 * scrapes that arrive while a render is in flight (they wait for it instead of collecting again).
 * With a window of zero every scrape that finds no render in flight gets a fresh one; concurrent
 * scrapes still share. This is what keeps 50 concurrent scrapers, or an HA pair of Prometheus
 * servers, from multiplying the node's collection cost, and what lets a window's gzip be computed
 * once.
 *
 * <p>Memory: per format, the current page and at most one spare buffer for the next render; a page
 * that a slow client is still reading stays alive until its last reader releases it. A format not
 * scraped for {@link #IDLE_TRIM} gives its buffers up.
 */
public final class ExpositionCache {
  static final Duration IDLE_TRIM = Duration.ofMinutes(2);

  private final Supplier<MetricSnapshots> source;
  private final long maxAgeNanos;
  private final LongSupplier nanoTime;
  private final TextEncoder encoder = new TextEncoder(); // guarded by itself
  private final Object lock = new Object();
  private final Map<ExpositionFormat, Slot> slots = new EnumMap<>(ExpositionFormat.class);

  /** One format's state; guarded by {@code lock}. */
  private static final class Slot {
    Rendition current;
    CompletableFuture<Exposition> inFlight;
    ExpositionBuffer spare;
    int lastSize = 64 * 1024;
  }

  /**
   * @param source collects one scrape's snapshots (the registry)
   * @param maxAge how long a rendered page may be served again; zero renders per scrape
   * @param nanoTime the clock (System::nanoTime; tests inject their own)
   */
  public ExpositionCache(Supplier<MetricSnapshots> source, Duration maxAge, LongSupplier nanoTime) {
    if (maxAge.isNegative()) {
      throw new IllegalArgumentException("maxAge must not be negative: " + maxAge);
    }
    this.source = source;
    this.maxAgeNanos = maxAge.toNanos();
    this.nanoTime = nanoTime;
    for (ExpositionFormat f : ExpositionFormat.values()) {
      slots.put(f, new Slot());
    }
  }

  /**
   * A page in {@code format}: a {@link Rendition} the caller must {@link Rendition#release release}
   * once sent, or a {@link Exposition.Fallback} to encode with client_java. A failed collection is
   * thrown to every scrape that waited for it; the next call tries again.
   */
  public Exposition acquire(ExpositionFormat format) {
    while (true) {
      CompletableFuture<Exposition> pending;
      boolean mine = false;
      synchronized (lock) {
        long now = nanoTime.getAsLong();
        trimIdle(now);
        Slot slot = slots.get(format);
        Rendition cur = slot.current;
        if (cur != null && now - cur.renderedAtNanos() <= maxAgeNanos && cur.addReader()) {
          return cur;
        }
        if (slot.inFlight == null) {
          slot.inFlight = new CompletableFuture<>();
          mine = true;
        }
        pending = slot.inFlight;
      }
      if (mine) {
        render(format, pending);
      }
      Exposition result;
      try {
        result = pending.join();
      } catch (CompletionException e) {
        if (e.getCause() instanceof RuntimeException re) {
          throw re;
        }
        if (e.getCause() instanceof Error err) {
          throw err;
        }
        throw e;
      }
      if (!(result instanceof Rendition r)) {
        return result;
      }
      synchronized (lock) {
        if (r.addReader()) {
          return r;
        }
      }
      // A newer render retired this one and reused its buffer before we could read it: go again.
    }
  }

  private void render(ExpositionFormat format, CompletableFuture<Exposition> pending) {
    long started = nanoTime.getAsLong();
    ExpositionBuffer buffer = null;
    Exposition result;
    try {
      MetricSnapshots snapshots = source.get();
      try {
        TextEncoder.check(snapshots);
        buffer = takeBuffer(format);
        buffer.reset();
        synchronized (encoder) {
          encoder.encode(snapshots, format, buffer);
        }
        result = new Rendition(this, format, buffer, started);
      } catch (TextEncoder.Unsupported e) {
        result = new Exposition.Fallback(snapshots, e.getMessage());
      }
    } catch (RuntimeException | Error e) {
      synchronized (lock) {
        slots.get(format).inFlight = null;
      }
      pending.completeExceptionally(e);
      return;
    }
    synchronized (lock) {
      Slot slot = slots.get(format);
      slot.inFlight = null;
      if (result instanceof Rendition r) {
        slot.lastSize = r.size();
        Rendition old = slot.current;
        slot.current = r;
        if (old != null && old.retire()) {
          slot.spare = old.buffer();
        }
      } else if (buffer != null) {
        slot.spare = buffer;
      }
    }
    pending.complete(result);
  }

  private ExpositionBuffer takeBuffer(ExpositionFormat format) {
    synchronized (lock) {
      Slot slot = slots.get(format);
      ExpositionBuffer b = slot.spare;
      slot.spare = null;
      if (b != null) {
        return b;
      }
      // Room for the last page plus growth, so a steady node renders without copying.
      return new ExpositionBuffer(slot.lastSize + (slot.lastSize >> 3));
    }
  }

  void release(Rendition r) {
    synchronized (lock) {
      if (r.removeReader()) {
        Slot slot = slots.get(r.format());
        if (slot.spare == null) {
          slot.spare = r.buffer();
        }
      }
    }
  }

  /** Caller holds lock. */
  private void trimIdle(long now) {
    for (Slot slot : slots.values()) {
      Rendition cur = slot.current;
      if (cur != null && now - cur.renderedAtNanos() > IDLE_TRIM.toNanos()) {
        slot.current = null;
        slot.spare = null;
        cur.retire(); // a reader still sending keeps its own reference; the buffer is not reused
      }
    }
  }

  /** Buffers this cache holds now, current pages and spares (tests: memory stays bounded). */
  int heldBuffers() {
    synchronized (lock) {
      int n = 0;
      for (Slot slot : slots.values()) {
        n += (slot.current != null ? 1 : 0) + (slot.spare != null ? 1 : 0);
      }
      return n;
    }
  }
}

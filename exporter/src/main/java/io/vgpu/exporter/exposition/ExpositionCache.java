package io.vgpu.exporter.exposition;

import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import java.io.IOException;
import java.time.Duration;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import java.util.zip.CRC32;
import java.util.zip.Deflater;

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
  private final Deflater deflater = new Deflater(Deflater.BEST_SPEED, true); // guarded by itself
  private final CRC32 crc = new CRC32(); // guarded by deflater
  private int lastGzipSize = 16 * 1024; // guarded by deflater
  private final Object lock = new Object();
  private final Map<ExpositionFormat, Slot> slots = new EnumMap<>(ExpositionFormat.class);
  private final long pageLimit;

  /** One streamed page at a time: each holds a whole collection of snapshots while it sends. */
  private final java.util.concurrent.Semaphore streamPermit =
      new java.util.concurrent.Semaphore(1, true);

  /**
   * Pages of one format alive at once (the current one plus older ones still being sent); past this
   * a scrape gets the current page even when it is older than the freshness window.
   */
  static final int MAX_LIVE_PAGES = 3;

  /** Bytes a streamed page is written out in. */
  static final int STREAM_CHUNK = 64 * 1024;

  /**
   * The largest page held in memory: an eighth of the heap, at least 8 MiB (a 200-container node
   * renders ~5 MB). Larger pages (10 000 directories: ~60 MB) are streamed to each scrape instead
   * of buffered, so the heap never has to hold one.
   */
  static long defaultPageLimit() {
    return Math.max(8L << 20, Runtime.getRuntime().maxMemory() / 8);
  }

  /** One format's state; guarded by {@code lock}. */
  private static final class Slot {
    Rendition current;
    boolean streaming; // the last page was over pageLimit: stream, do not buffer
    int live; // renditions not yet recycled: the current one and those still being sent
    CompletableFuture<Exposition> inFlight;
    ExpositionBuffer spare;
    byte[] spareGzip;
    int lastSize = 64 * 1024;
  }

  /**
   * @param source collects one scrape's snapshots (the registry)
   * @param maxAge how long a rendered page may be served again; zero renders per scrape
   * @param nanoTime the clock (System::nanoTime; tests inject their own)
   */
  public ExpositionCache(Supplier<MetricSnapshots> source, Duration maxAge, LongSupplier nanoTime) {
    this(source, maxAge, nanoTime, defaultPageLimit());
  }

  /** As above, with the largest page held in memory ({@link #defaultPageLimit()} by default). */
  public ExpositionCache(
      Supplier<MetricSnapshots> source, Duration maxAge, LongSupplier nanoTime, long pageLimit) {
    this.pageLimit = pageLimit;
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
        if (slot.streaming) {
          return new Exposition.Stream(format);
        }
        Rendition cur = slot.current;
        if (cur != null && now - cur.renderedAtNanos() <= maxAgeNanos && cur.addReader()) {
          return cur;
        }
        // Slow readers still hold older pages: share the newest instead of rendering into yet
        // another buffer, so a crowd of slow scrapers cannot multiply the page in memory.
        if (cur != null
            && slot.inFlight == null
            && slot.live >= MAX_LIVE_PAGES
            && cur.addReader()) {
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
        buffer = takeBuffer(format);
        buffer.reset();
        synchronized (encoder) {
          encoder.encode(snapshots, format, buffer);
        }
        result = new Rendition(this, format, buffer, started);
      } catch (TextEncoder.Unsupported e) {
        result = new Exposition.Fallback(snapshots, e.getMessage());
      } catch (ExpositionBuffer.PageTooLarge e) {
        buffer = null; // dropped: a page this size is streamed from now on
        synchronized (lock) {
          Slot slot = slots.get(format);
          slot.streaming = true;
          slot.spare = null;
          slot.spareGzip = null;
        }
        result = new Exposition.Stream(format);
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
        slot.live++;
        slot.lastSize = r.size();
        Rendition old = slot.current;
        slot.current = r;
        if (old != null && old.retire()) {
          recycle(slot, old);
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
      return ExpositionBuffer.bounded(
          (int) Math.min(slot.lastSize + (slot.lastSize >> 3), pageLimit), pageLimit);
    }
  }

  /**
   * Collects and writes one page straight to {@code out} in {@link #STREAM_CHUNK} pieces (the
   * caller wraps {@code out} in gzip when asked), one scrape at a time. A page that shrank below
   * half the limit is buffered and shared again from the next scrape on.
   *
   * @throws IOException when the client goes away, or (as an abort of the response) when the
   *     snapshots hold something the fast encoder does not write
   */
  public void stream(ExpositionFormat format, java.io.OutputStream out)
      throws IOException, InterruptedException {
    streamPermit.acquire();
    try {
      MetricSnapshots snapshots = source.get();
      ExpositionBuffer chunks = ExpositionBuffer.streamingTo(out, STREAM_CHUNK);
      synchronized (encoder) {
        encoder.encode(snapshots, format, chunks);
      }
      chunks.flush();
      if (chunks.written() < pageLimit / 2) {
        synchronized (lock) {
          slots.get(format).streaming = false;
        }
      }
    } catch (TextEncoder.Unsupported e) {
      throw new IOException("streamed exposition aborted: " + e.getMessage(), e);
    } catch (java.io.UncheckedIOException e) {
      throw e.getCause();
    } finally {
      streamPermit.release();
    }
  }

  /** The largest page this cache holds in memory. */
  public long pageLimit() {
    return pageLimit;
  }

  /** The gzip member header: magic, deflate, no flags, no mtime, no extra flags, OS unknown=0. */
  private static final byte[] GZIP_HEADER = {0x1f, (byte) 0x8b, 8, 0, 0, 0, 0, 0, 0, 0};

  /**
   * Gzips a page at BEST_SPEED: a metrics page compresses ~35x at level 1 in a third of the time of
   * the default level 6 (3.8 against 12.4 ms for 3.3 MB here). One deflater for the cache, and the
   * output presized from the last page, so a render's gzip allocates only its result.
   *
   * @param length receives the number of valid bytes in the returned array
   */
  byte[] gzip(
      ExpositionFormat format, ExpositionBuffer page, java.util.function.IntConsumer length) {
    synchronized (deflater) {
      byte[] out = gzipArray(format, lastGzipSize + (lastGzipSize >> 2) + 64);
      System.arraycopy(GZIP_HEADER, 0, out, 0, GZIP_HEADER.length);
      int n = GZIP_HEADER.length;
      deflater.reset();
      deflater.setInput(page.array(), 0, page.size());
      deflater.finish();
      while (!deflater.finished()) {
        if (n == out.length) {
          out = java.util.Arrays.copyOf(out, out.length * 2);
        }
        n += deflater.deflate(out, n, out.length - n);
      }
      crc.reset();
      crc.update(page.array(), 0, page.size());
      if (out.length - n < 8) {
        out = java.util.Arrays.copyOf(out, n + 8);
      }
      n = putIntLe(out, n, (int) crc.getValue());
      n = putIntLe(out, n, page.size());
      lastGzipSize = n;
      length.accept(n);
      return out;
    }
  }

  private static int putIntLe(byte[] b, int at, int v) {
    b[at] = (byte) v;
    b[at + 1] = (byte) (v >>> 8);
    b[at + 2] = (byte) (v >>> 16);
    b[at + 3] = (byte) (v >>> 24);
    return at + 4;
  }

  void release(Rendition r) {
    synchronized (lock) {
      if (r.removeReader()) {
        recycle(slots.get(r.format()), r);
      }
    }
  }

  /** Caller holds lock; {@code r} is retired and has no reader. */
  private static void recycle(Slot slot, Rendition r) {
    slot.live--;
    if (slot.spare == null) {
      slot.spare = r.buffer();
    }
    byte[] gz = r.gzipArray();
    if (gz != null && (slot.spareGzip == null || slot.spareGzip.length < gz.length)) {
      slot.spareGzip = gz;
    }
  }

  /** A spare gzip array of at least {@code min} bytes, or a new one. */
  private byte[] gzipArray(ExpositionFormat format, int min) {
    synchronized (lock) {
      Slot slot = slots.get(format);
      byte[] gz = slot.spareGzip;
      slot.spareGzip = null;
      return gz != null && gz.length >= min ? gz : new byte[min];
    }
  }

  /** Caller holds lock. */
  private void trimIdle(long now) {
    for (Slot slot : slots.values()) {
      Rendition cur = slot.current;
      if (cur != null && now - cur.renderedAtNanos() > IDLE_TRIM.toNanos()) {
        slot.current = null;
        slot.spare = null;
        slot.spareGzip = null;
        if (cur.retire()) {
          slot.live--; // no reader: gone now (a reader still sending recycles it on release)
        }
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

package io.vgpu.exporter.exposition;

import java.io.IOException;
import java.time.Duration;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.LongSupplier;

/**
 * Renders the exposition at most once per format per freshness window, and once for any number of
 * scrapes that arrive while a render is in flight (they wait for it instead of collecting again).
 * With a window of zero every scrape that finds no render in flight gets a fresh one; concurrent
 * scrapes still share. This is what keeps 50 concurrent scrapers, or an HA pair of Prometheus
 * servers, from multiplying the node's collection cost, and what lets a window's gzip be computed
 * once.
 *
 * <p>Memory: a page is held gzipped only ({@link PageCompressor}: the encoder's output is
 * compressed in 64 KB chunks as it is written, so the uncompressed page never exists in memory;
 * ~125 KB for the 3 MB page of 100 containers). Per format, the current page and at most one spare
 * array for the next render; a page that a slow client is still reading stays alive until its last
 * reader releases it. A format not scraped for {@link #IDLE_TRIM} gives its arrays up.
 */
public final class ExpositionCache {
  static final Duration IDLE_TRIM = Duration.ofMinutes(2);

  private final FamilySource source;
  private final long maxAgeNanos;
  private final LongSupplier nanoTime;
  private final TextEncoder encoder = new TextEncoder(); // guarded by itself
  private final PageCompressor compressor = new PageCompressor(); // guarded by encoder
  private final ExpositionBuffer chunks = // guarded by encoder
      ExpositionBuffer.streamingTo(compressor, STREAM_CHUNK);
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

  /** Bytes a page is encoded in before each piece is compressed or streamed out. */
  static final int STREAM_CHUNK = 64 * 1024;

  /**
   * The largest page held in memory, gzipped: an eighth of the heap, at least 8 MiB (a
   * 200-container node's 5 MB page gzips to ~150 KB). Larger pages (incompressible tenant strings
   * on a node of 10 000 directories) are streamed to each scrape instead of held, so the heap never
   * has to hold one.
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
    byte[] spareGzip;
    int lastGzipSize = 1024;
  }

  /**
   * @param source collects one render's families (the exporter's collectors)
   * @param maxAge how long a rendered page may be served again; zero renders per scrape
   * @param nanoTime the clock (System::nanoTime; tests inject their own)
   */
  public ExpositionCache(FamilySource source, Duration maxAge, LongSupplier nanoTime) {
    this(source, maxAge, nanoTime, defaultPageLimit());
  }

  /** As above, with the largest page held in memory ({@link #defaultPageLimit()} by default). */
  public ExpositionCache(
      FamilySource source, Duration maxAge, LongSupplier nanoTime, long pageLimit) {
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
   * thrown to every scrape that waited for it; the next call tries again. Blocks while a render is
   * in flight; {@link #acquireAsync} is the same without blocking.
   */
  public Exposition acquire(ExpositionFormat format) {
    try {
      return acquireAsync(format).join();
    } catch (CompletionException e) {
      if (e.getCause() instanceof RuntimeException re) {
        throw re;
      }
      if (e.getCause() instanceof Error err) {
        throw err;
      }
      throw e;
    }
  }

  /**
   * {@link #acquire} without holding the calling thread while another scrape's render is in flight:
   * the future completes, on the thread that rendered, with the page already claimed for the caller
   * (a {@link Rendition} to release once sent) or with the collection's failure. A scrape that
   * finds a fresh page, or no render in flight, gets a completed future (it rendered on the calling
   * thread). A caller that gives up cancels the future; a page that arrives after that is released
   * here, so a scrape that went away never holds a page.
   */
  public CompletableFuture<Exposition> acquireAsync(ExpositionFormat format) {
    CompletableFuture<Exposition> claimed = new CompletableFuture<>();
    acquireInto(format, claimed);
    return claimed;
  }

  private void acquireInto(ExpositionFormat format, CompletableFuture<Exposition> claimed) {
    CompletableFuture<Exposition> pending;
    Exposition ready = null;
    boolean mine = false;
    synchronized (lock) {
      long now = nanoTime.getAsLong();
      trimIdle(now);
      Slot slot = slots.get(format);
      Rendition cur = slot.current;
      if (slot.streaming) {
        ready = new Exposition.Stream(format);
      } else if (cur != null && now - cur.renderedAtNanos() <= maxAgeNanos && cur.addReader()) {
        ready = cur;
      } else if (cur != null
          && slot.inFlight == null
          && slot.live >= MAX_LIVE_PAGES
          && cur.addReader()) {
        // Slow readers still hold older pages: share the newest instead of rendering into yet
        // another buffer, so a crowd of slow scrapers cannot multiply the page in memory.
        ready = cur;
      } else if (slot.inFlight == null) {
        slot.inFlight = new CompletableFuture<>();
        mine = true;
      }
      pending = slot.inFlight;
    }
    if (ready != null) {
      hand(claimed, ready);
      return;
    }
    if (mine) {
      render(format, pending);
    }
    var _ =
        pending.whenComplete(
            (result, failure) -> {
              if (failure != null) {
                claimed.completeExceptionally(failure);
              } else if (result instanceof Rendition r && !claim(r)) {
                // A newer render retired this one and reused its array before we could read it.
                acquireInto(format, claimed);
              } else {
                hand(claimed, result);
              }
            });
  }

  private boolean claim(Rendition r) {
    synchronized (lock) {
      return r.addReader();
    }
  }

  /** Gives a claimed page to its scrape, or back to the cache when the scrape gave up. */
  private static void hand(CompletableFuture<Exposition> claimed, Exposition page) {
    if (!claimed.complete(page) && page instanceof Rendition r) {
      r.release();
    }
  }

  private void render(ExpositionFormat format, CompletableFuture<Exposition> pending) {
    long started = nanoTime.getAsLong();
    Exposition result;
    try {
      try {
        List<? extends Family> families = source.families();
        byte[] into = gzipArray(format);
        synchronized (encoder) {
          try {
            compressor.start(into, pageLimit);
            chunks.reset();
            encoder.encode(families, format, chunks, compressor);
            chunks.flush();
            compressor.finish();
            result =
                new Rendition(
                    this::release,
                    format,
                    compressor.array(),
                    compressor.length(),
                    Math.toIntExact(compressor.rawSize()),
                    started);
          } finally {
            compressor.clear();
          }
        }
      } catch (UnsupportedFamilyException e) {
        result = new Exposition.Fallback(e.getMessage());
      } catch (ExpositionBuffer.PageTooLarge | ArithmeticException e) {
        synchronized (lock) {
          Slot slot = slots.get(format);
          slot.streaming = true; // a page this size is streamed from now on
          slot.spareGzip = null;
        }
        result = new Exposition.Stream(format);
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException(e); // the compressor writes to memory only
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
        slot.lastGzipSize = r.gzippedLength();
        Rendition old = slot.current;
        slot.current = r;
        if (old != null && old.retire()) {
          recycle(slot, old);
        }
      }
    }
    pending.complete(result);
  }

  /**
   * Collects and writes one page straight to {@code out} in {@link #STREAM_CHUNK} pieces (the
   * caller wraps {@code out} in gzip when asked), one scrape at a time. A page that shrank below
   * four times the limit (the limit is on compressed bytes) is held and shared again from the next
   * scrape on.
   *
   * @throws IOException when the client goes away, or (as an abort of the response) when the
   *     snapshots hold something the fast encoder does not write
   */
  public void stream(ExpositionFormat format, java.io.OutputStream out)
      throws IOException, InterruptedException {
    streamPermit.acquire();
    try {
      List<? extends Family> families = source.families();
      ExpositionBuffer chunks = ExpositionBuffer.streamingTo(out, STREAM_CHUNK);
      synchronized (encoder) {
        encoder.encode(families, format, chunks);
      }
      chunks.flush();
      // Buffered again once the page would compress to well under the limit (a metrics page
      // compresses at least ~8x; the limit is on the compressed bytes).
      if (chunks.written() < pageLimit * 4) {
        synchronized (lock) {
          slots.get(format).streaming = false;
        }
      }
    } catch (UnsupportedFamilyException e) {
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
    byte[] gz = r.gzipped();
    if (slot.spareGzip == null || slot.spareGzip.length < gz.length) {
      slot.spareGzip = gz;
    }
  }

  /**
   * The array for the next page of {@code format}: the spare if it holds the last page, else a new
   * one with half again as much room (so a steady node renders without copying, and a page that
   * grows a little still fits the arrays already made).
   */
  private byte[] gzipArray(ExpositionFormat format) {
    synchronized (lock) {
      Slot slot = slots.get(format);
      byte[] gz = slot.spareGzip;
      slot.spareGzip = null;
      if (gz != null && gz.length >= slot.lastGzipSize) {
        return gz;
      }
      long want = slot.lastGzipSize + (slot.lastGzipSize >> 1) + 256L;
      long floor = (long) PageCompressor.GZIP_HEADER.length + PageCompressor.TRAILER;
      return new byte[(int) Math.min(want, Math.max(pageLimit, floor))];
    }
  }

  /** Caller holds lock. */
  private void trimIdle(long now) {
    for (Slot slot : slots.values()) {
      Rendition cur = slot.current;
      if (cur != null && now - cur.renderedAtNanos() > IDLE_TRIM.toNanos()) {
        slot.current = null;
        slot.spareGzip = null;
        if (cur.retire()) {
          slot.live--; // no reader: gone now (a reader still sending recycles it on release)
        }
      }
    }
  }

  /** Bytes of the arrays this cache holds now, current pages and spares (tests). */
  long heldBytes() {
    synchronized (lock) {
      long n = 0;
      for (Slot slot : slots.values()) {
        n += (slot.current != null ? slot.current.gzipped().length : 0);
        n += (slot.spareGzip != null ? slot.spareGzip.length : 0);
      }
      return n;
    }
  }

  /**
   * Pages not yet given back: current ones and older ones a scrape still reads (tests: a scrape
   * that went away while waiting left no reader behind).
   */
  int livePages() {
    synchronized (lock) {
      int n = 0;
      for (Slot slot : slots.values()) {
        n += slot.live;
      }
      return n;
    }
  }

  /** Arrays this cache holds now, current pages and spares (tests: memory stays bounded). */
  int heldBuffers() {
    synchronized (lock) {
      int n = 0;
      for (Slot slot : slots.values()) {
        n += (slot.current != null ? 1 : 0) + (slot.spareGzip != null ? 1 : 0);
      }
      return n;
    }
  }
}

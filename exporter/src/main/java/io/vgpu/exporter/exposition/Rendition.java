package io.vgpu.exporter.exposition;

import java.io.IOException;
import java.io.OutputStream;

/**
 * One rendered exposition, shared by every scrape that asks within its freshness window. Readers
 * {@link ExpositionCache#acquire acquire} it and {@link #release} it when sent; its buffer goes
 * back to the cache for the next render only once it is retired and no reader holds it, so bytes
 * being sent are never overwritten.
 */
public final class Rendition implements Exposition {
  private final ExpositionCache owner;
  private final ExpositionFormat format;
  private final ExpositionBuffer buffer;
  private final long renderedAtNanos;
  private volatile byte[] gzipped; // written under this; read without it by gzipArray
  private int gzippedLength; // guarded by this
  private int readers; // guarded by owner's lock
  private boolean retired; // guarded by owner's lock
  private boolean recycled; // guarded by owner's lock

  Rendition(
      ExpositionCache owner,
      ExpositionFormat format,
      ExpositionBuffer buffer,
      long renderedAtNanos) {
    this.owner = owner;
    this.format = format;
    this.buffer = buffer;
    this.renderedAtNanos = renderedAtNanos;
  }

  public ExpositionFormat format() {
    return format;
  }

  long renderedAtNanos() {
    return renderedAtNanos;
  }

  public int size() {
    return buffer.size();
  }

  public void writeTo(OutputStream out) throws IOException {
    buffer.writeTo(out);
  }

  /**
   * The gzip encoding, computed once per rendition and shared by every scraper of the window (see
   * {@link ExpositionCache#gzip}); valid up to {@link #gzippedLength()}.
   */
  public synchronized byte[] gzipped() {
    if (gzipped == null) {
      gzipped = owner.gzip(format, buffer, this::setGzippedLength);
    }
    return gzipped;
  }

  /** Bytes of {@link #gzipped()} that hold the encoding. */
  public synchronized int gzippedLength() {
    gzipped();
    return gzippedLength;
  }

  private void setGzippedLength(int n) {
    gzippedLength = n;
  }

  /** Done sending; the last reader of a retired rendition returns its buffer. */
  public void release() {
    owner.release(this);
  }

  ExpositionBuffer buffer() {
    return buffer;
  }

  /**
   * The gzip array for reuse once this rendition is recycled; null if never gzipped. Unlocked: the
   * cache calls it under its own lock, and gzipped() takes this lock before the cache's.
   */
  byte[] gzipArray() {
    return gzipped;
  }

  /** Called under the owner's lock. Returns true when the buffer may be reused now. */
  boolean retire() {
    retired = true;
    recycled = readers == 0;
    return recycled;
  }

  /** Called under the owner's lock; false when the buffer was already handed to a new render. */
  boolean addReader() {
    if (recycled) {
      return false;
    }
    readers++;
    return true;
  }

  /** Called under the owner's lock. Returns true when the buffer may be reused now. */
  boolean removeReader() {
    readers--;
    recycled = retired && readers == 0;
    return recycled;
  }
}

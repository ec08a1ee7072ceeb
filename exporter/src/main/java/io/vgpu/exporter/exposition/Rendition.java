package io.vgpu.exporter.exposition;

import java.io.IOException;
import java.io.OutputStream;
import java.util.zip.Deflater;
import java.util.zip.GZIPOutputStream;

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
  private byte[] gzipped; // guarded by this
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
   * The gzip encoding, computed once per rendition (at BEST_SPEED: a metrics page compresses ~35x
   * at level 1 in a third of the default level's time, and every scraper of the window shares it).
   */
  public synchronized byte[] gzipped() throws IOException {
    if (gzipped == null) {
      ByteArraySink sink = new ByteArraySink(Math.max(1024, buffer.size() / 16));
      try (GzipLevel gz = new GzipLevel(sink, Deflater.BEST_SPEED)) {
        buffer.writeTo(gz);
      }
      gzipped = sink.toByteArray();
    }
    return gzipped;
  }

  /** Done sending; the last reader of a retired rendition returns its buffer. */
  public void release() {
    owner.release(this);
  }

  ExpositionBuffer buffer() {
    return buffer;
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

  /** GZIPOutputStream with a chosen level (its constructor takes none). */
  private static final class GzipLevel extends GZIPOutputStream {
    GzipLevel(OutputStream out, int level) throws IOException {
      super(out, 64 * 1024);
      def.setLevel(level);
    }
  }

  /** An unsynchronized ByteArrayOutputStream. */
  private static final class ByteArraySink extends OutputStream {
    private byte[] bytes;
    private int size;

    ByteArraySink(int capacity) {
      bytes = new byte[capacity];
    }

    @Override
    public void write(int b) {
      write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public void write(byte[] b, int off, int len) {
      if (size + len > bytes.length) {
        bytes = java.util.Arrays.copyOf(bytes, Math.max(size + len, bytes.length * 2));
      }
      System.arraycopy(b, off, bytes, size, len);
      size += len;
    }

    byte[] toByteArray() {
      return java.util.Arrays.copyOf(bytes, size);
    }
  }
}

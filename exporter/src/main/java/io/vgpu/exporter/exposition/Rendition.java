package io.vgpu.exporter.exposition;

import java.io.IOException;
import java.io.OutputStream;
import java.util.function.Consumer;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;

/**
 * One rendered exposition, shared by every scrape that asks within its freshness window. It holds
 * the page gzipped only (what Prometheus asks for; ~125 KB for a 3 MB page): a scrape without gzip
 * gets the page inflated as it is sent. Readers {@link ExpositionCache#acquire acquire} it and
 * {@link #release} it when sent; its array goes back to the cache for the next render only once it
 * is retired and no reader holds it, so bytes being sent are never overwritten.
 */
public final class Rendition implements Exposition {
  /** Bytes inflated per write when a scrape does not accept gzip. */
  static final int INFLATE_CHUNK = 32 * 1024;

  private final Consumer<Rendition> release;
  private final ExpositionFormat format;
  private final byte[] gzipped;
  private final int gzippedLength;
  private final int size;
  private final long renderedAtNanos;
  private int readers; // guarded by owner's lock
  private boolean retired; // guarded by owner's lock
  private boolean recycled; // guarded by owner's lock

  Rendition(
      Consumer<Rendition> release,
      ExpositionFormat format,
      byte[] gzipped,
      int gzippedLength,
      int size,
      long renderedAtNanos) {
    this.release = release;
    this.format = format;
    this.gzipped = gzipped;
    this.gzippedLength = gzippedLength;
    this.size = size;
    this.renderedAtNanos = renderedAtNanos;
  }

  public ExpositionFormat format() {
    return format;
  }

  long renderedAtNanos() {
    return renderedAtNanos;
  }

  /** Bytes of the page, uncompressed. */
  public int size() {
    return size;
  }

  /** Writes the page uncompressed, inflating it in {@link #INFLATE_CHUNK} pieces. */
  public void writeTo(OutputStream out) throws IOException {
    Inflater inflater = new Inflater(true);
    try {
      int header = PageCompressor.GZIP_HEADER.length;
      inflater.setInput(gzipped, header, gzippedLength - header - PageCompressor.TRAILER);
      byte[] chunk = new byte[Math.min(INFLATE_CHUNK, Math.max(1, size))];
      long written = 0;
      while (!inflater.finished()) {
        int n = inflater.inflate(chunk);
        // The call that reads the final block's end may return no bytes (an empty page, or one
        // whose last bytes filled the previous chunk exactly): finished, not truncated.
        if (n == 0
            && !inflater.finished()
            && (inflater.needsInput() || inflater.needsDictionary())) {
          throw new IOException("gzipped page ended early");
        }
        out.write(chunk, 0, n);
        written += n;
      }
      if (written != size) {
        throw new IOException("inflated " + written + " bytes, page has " + size);
      }
    } catch (DataFormatException e) {
      throw new IOException("gzipped page corrupt", e);
    } finally {
      inflater.end();
    }
  }

  /**
   * The gzip encoding (one member, BEST_SPEED), computed once per rendition and shared by every
   * scraper of the window; valid up to {@link #gzippedLength()}.
   */
  public byte[] gzipped() {
    return gzipped;
  }

  /** Bytes of {@link #gzipped()} that hold the encoding. */
  public int gzippedLength() {
    return gzippedLength;
  }

  /** Done sending; the last reader of a retired rendition returns its array. */
  public void release() {
    release.accept(this);
  }

  /** Called under the owner's lock. Returns true when the array may be reused now. */
  boolean retire() {
    retired = true;
    recycled = readers == 0;
    return recycled;
  }

  /** Called under the owner's lock; false when the array was already handed to a new render. */
  boolean addReader() {
    if (recycled) {
      return false;
    }
    readers++;
    return true;
  }

  /** Called under the owner's lock. Returns true when the array may be reused now. */
  boolean removeReader() {
    readers--;
    recycled = retired && readers == 0;
    return recycled;
  }
}

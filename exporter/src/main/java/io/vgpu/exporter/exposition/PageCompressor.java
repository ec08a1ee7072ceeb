package io.vgpu.exporter.exposition;

import java.io.OutputStream;
import java.util.Arrays;
import java.util.zip.CRC32;
import java.util.zip.Deflater;

/**
 * Gzips a page as it is encoded, into one array sized by the last compressed page, so that a render
 * never holds the uncompressed page (3 MB at 100 containers) but only its gzip member (~75 KB): the
 * encoder writes 64 KB chunks here ({@link ExpositionBuffer#streamingTo}). BEST_SPEED: a metrics
 * page compresses ~35x at level 1 in a third of the time of the default level 6. Not thread-safe;
 * {@link ExpositionCache} uses it under its encoder's lock.
 */
final class PageCompressor extends OutputStream {
  /** The gzip member header: magic, deflate, no flags, no mtime, no extra flags, OS unknown=0. */
  static final byte[] GZIP_HEADER = {0x1f, (byte) 0x8b, 8, 0, 0, 0, 0, 0, 0, 0};

  static final int TRAILER = 8;

  private final Deflater deflater = new Deflater(Deflater.BEST_SPEED, true);
  private final CRC32 crc = new CRC32();
  private byte[] out = new byte[0];
  private int length;
  private long rawSize;
  private long limit;

  /**
   * Starts a page written into {@code into} (grown by copying when too small).
   *
   * @param limit the most bytes the compressed page may take; past it a write throws {@link
   *     ExpositionBuffer.PageTooLarge}
   */
  void start(byte[] into, long limit) {
    if (into.length < GZIP_HEADER.length + TRAILER) {
      throw new IllegalArgumentException("gzip array too small: " + into.length);
    }
    this.out = into;
    this.limit = limit;
    System.arraycopy(GZIP_HEADER, 0, out, 0, GZIP_HEADER.length);
    length = GZIP_HEADER.length;
    rawSize = 0;
    deflater.reset();
    crc.reset();
  }

  @Override
  public void write(int b) {
    write(new byte[] {(byte) b}, 0, 1);
  }

  @Override
  public void write(byte[] b, int off, int len) {
    crc.update(b, off, len);
    rawSize += len;
    deflater.setInput(b, off, len);
    while (!deflater.needsInput()) {
      drain();
    }
  }

  private void drain() {
    if (length == out.length) {
      grow(out.length + 1);
    }
    length += deflater.deflate(out, length, out.length - length);
  }

  private void grow(int min) {
    long want = Math.max(min, (long) out.length + (out.length >> 1));
    if (min > limit) {
      throw new ExpositionBuffer.PageTooLarge(limit);
    }
    out = Arrays.copyOf(out, (int) Math.min(want, Math.min(limit, Integer.MAX_VALUE - 16)));
  }

  /** Ends the gzip member; the page is {@link #array()} up to {@link #length()}. */
  void finish() {
    deflater.finish();
    while (!deflater.finished()) {
      drain();
    }
    if (out.length - length < TRAILER) {
      grow(length + TRAILER);
    }
    length = putIntLe(out, length, (int) crc.getValue());
    length = putIntLe(out, length, (int) rawSize);
  }

  byte[] array() {
    return out;
  }

  int length() {
    return length;
  }

  /** Uncompressed bytes written since {@link #start}. */
  long rawSize() {
    return rawSize;
  }

  /** Drops the array so a failed render does not keep it alive. */
  void clear() {
    out = new byte[0];
  }

  private static int putIntLe(byte[] b, int at, int v) {
    b[at] = (byte) v;
    b[at + 1] = (byte) (v >>> 8);
    b[at + 2] = (byte) (v >>> 16);
    b[at + 3] = (byte) (v >>> 24);
    return at + 4;
  }
}

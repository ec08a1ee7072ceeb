package io.vgpu.exporter.exposition;

import java.io.IOException;
import java.io.OutputStream;
import java.util.Arrays;

/**
 * A growable byte buffer for one exposition, reused across renders so that a scrape does not
 * allocate the page again. Not thread-safe; {@link ExpositionCache} hands each buffer to one writer
 * at a time and lets readers see it only after the render completed.
 */
public final class ExpositionBuffer {
  private byte[] bytes;
  private int size;

  public ExpositionBuffer(int initialCapacity) {
    bytes = new byte[Math.max(64, initialCapacity)];
  }

  public int size() {
    return size;
  }

  public void reset() {
    size = 0;
  }

  /** The written bytes, as a copy (tests and debugging; the serving path uses writeTo). */
  public byte[] toByteArray() {
    return Arrays.copyOf(bytes, size);
  }

  public void writeTo(OutputStream out) throws IOException {
    out.write(bytes, 0, size);
  }

  /** The backing array; valid up to {@link #size()}. */
  byte[] array() {
    return bytes;
  }

  private void ensure(int extra) {
    int need = size + extra;
    if (need > bytes.length) {
      // Grow by half again: pages are large (MBs) and reach their steady size in a few renders.
      bytes = Arrays.copyOf(bytes, Math.max(need, bytes.length + (bytes.length >> 1)));
    }
  }

  public void write(byte b) {
    ensure(1);
    bytes[size++] = b;
  }

  public void write(byte[] src) {
    write(src, 0, src.length);
  }

  public void write(byte[] src, int off, int len) {
    ensure(len);
    System.arraycopy(src, off, bytes, size, len);
    size += len;
  }

  /** Writes a string known to be ASCII (metric names, numbers). */
  public void writeAscii(String s) {
    int n = s.length();
    ensure(n);
    for (int i = 0; i < n; i++) {
      bytes[size++] = (byte) s.charAt(i);
    }
  }

  /** Writes {@code v} in decimal, as {@link Long#toString(long)} would. */
  public void writeLong(long v) {
    if (v == Long.MIN_VALUE) {
      writeAscii(Long.toString(v));
      return;
    }
    ensure(20);
    if (v < 0) {
      bytes[size++] = '-';
      v = -v;
    }
    int digits = digits(v);
    int end = size + digits;
    for (int i = end - 1; i >= size; i--) {
      bytes[i] = (byte) ('0' + (int) (v % 10));
      v /= 10;
    }
    size = end;
  }

  /** Decimal digits of a non-negative long. */
  static int digits(long v) {
    int d = 1;
    while (v >= 10) {
      v /= 10;
      d++;
    }
    return d;
  }
}

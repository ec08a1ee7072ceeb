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
  private final OutputStream sink;
  private final long limit;
  private long flushed;

  public ExpositionBuffer(int initialCapacity) {
    this(initialCapacity, null, Long.MAX_VALUE);
  }

  private ExpositionBuffer(int initialCapacity, OutputStream sink, long limit) {
    bytes = new byte[Math.max(64, initialCapacity)];
    this.sink = sink;
    this.limit = limit;
  }

  /**
   * A buffer that refuses to hold more than {@code limit} bytes: a write past it throws {@link
   * PageTooLarge} (the cache then streams that page instead of holding it).
   */
  public static ExpositionBuffer bounded(int initialCapacity, long limit) {
    return new ExpositionBuffer(initialCapacity, null, limit);
  }

  /**
   * A buffer of {@code chunk} bytes that writes itself to {@code sink} whenever it fills, so a page
   * of any size costs one chunk of memory; {@link #flush} sends the rest. Write failures surface as
   * {@link java.io.UncheckedIOException}.
   */
  public static ExpositionBuffer streamingTo(OutputStream sink, int chunk) {
    return new ExpositionBuffer(
        chunk, java.util.Objects.requireNonNull(sink, "sink"), Long.MAX_VALUE);
  }

  /** Thrown by a {@linkplain #bounded bounded} buffer asked to grow past its limit. */
  public static final class PageTooLarge extends RuntimeException {
    private static final long serialVersionUID = 1L;

    PageTooLarge(long limit) {
      super("exposition larger than " + limit + " bytes", null, false, false);
    }
  }

  /** Writes what is buffered to the sink of a {@linkplain #streamingTo streaming} buffer. */
  public void flush() throws IOException {
    if (sink != null && size > 0) {
      sink.write(bytes, 0, size);
      flushed += size;
      size = 0;
    }
  }

  /** Whether this buffer writes itself to {@code s} as it fills. */
  @SuppressWarnings("ReferenceEquality") // the question is "this very stream"
  boolean streamsTo(OutputStream s) {
    return sink == s;
  }

  /** {@link #flush}, with a sink's failure as {@link java.io.UncheckedIOException}. */
  void drainToSink() {
    try {
      flush();
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /** Bytes written in total, including those already flushed to a sink. */
  public long written() {
    return flushed + size;
  }

  public int size() {
    return size;
  }

  /** Empties the buffer and restarts {@link #written()} from zero. */
  public void reset() {
    size = 0;
    flushed = 0;
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
    if (need > bytes.length && sink != null) {
      drainToSink();
      need = extra;
    }
    if (need > limit) {
      throw new PageTooLarge(limit);
    }
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

  /**
   * Writes {@code name}, {@code labels} and a space: the start of every sample line, with one room
   * check instead of three.
   */
  public void writeSampleStart(byte[] name, byte[] labels) {
    int n = name.length;
    int l = labels.length;
    ensure(n + l + 1);
    System.arraycopy(name, 0, bytes, size, n);
    System.arraycopy(labels, 0, bytes, size + n, l);
    size += n + l;
    bytes[size++] = ' ';
  }

  /** Writes a string known to be ASCII (metric names, numbers). */
  public void writeAscii(String s) {
    int n = s.length();
    ensure(n);
    for (int i = 0; i < n; i++) {
      bytes[size++] = (byte) s.charAt(i);
    }
  }

  /**
   * Writes {@code v} in decimal, as {@link Long#toString(long)} would. In int arithmetic two digits
   * at a time: C1 (the exporter's only compiler) calls into the VM for every long division, and a
   * page has ~16 000 values.
   */
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
    putDigits(v);
  }

  /**
   * Writes a whole number of at least 8 digits ({@code v >= 1e7}) as {@link Double#toString} prints
   * it: {@code d.ddd} without trailing zeros (at least one fraction digit), {@code E} and the
   * exponent ({@code 4294967296} is {@code 4.294967296E9}).
   */
  void writeScientific(long v) {
    ensure(24);
    int start = size;
    size = start + 1; // the digits go one to the right; the first is moved left of the point
    putDigits(v);
    int digits = size - start - 1;
    bytes[start] = bytes[start + 1];
    bytes[start + 1] = '.';
    int end = size;
    while (end > start + 3 && bytes[end - 1] == '0') {
      end--;
    }
    size = end;
    bytes[size++] = 'E';
    writeInt(digits - 1, 0);
  }

  /** The digits of non-negative {@code v}; room is the caller's. */
  private void putDigits(long v) {
    if (v < BILLION) {
      writeInt((int) v, 0);
      return;
    }
    long high = v / BILLION;
    int low = (int) (v - high * BILLION);
    if (high < BILLION) {
      writeInt((int) high, 0);
    } else {
      long top = high / BILLION;
      writeInt((int) top, 0);
      writeInt((int) (high - top * BILLION), 9);
    }
    writeInt(low, 9);
  }

  private static final long BILLION = 1_000_000_000L;

  /** "00" to "99". */
  private static final byte[] PAIRS = new byte[200];

  static {
    for (int i = 0; i < 100; i++) {
      PAIRS[2 * i] = (byte) ('0' + i / 10);
      PAIRS[2 * i + 1] = (byte) ('0' + i % 10);
    }
  }

  /**
   * Writes {@code v} (0 to 999 999 999) with at least {@code width} digits (zero-padded); room is
   * the caller's.
   */
  private void writeInt(int v, int width) {
    int start = size;
    int at = start + Math.max(digits(v), width);
    size = at;
    while (v >= 100) {
      int q = v / 100;
      int pair = (v - q * 100) << 1;
      bytes[--at] = PAIRS[pair + 1];
      bytes[--at] = PAIRS[pair];
      v = q;
    }
    if (v >= 10) {
      bytes[--at] = PAIRS[(v << 1) + 1];
      bytes[--at] = PAIRS[v << 1];
    } else {
      bytes[--at] = (byte) ('0' + v);
    }
    while (at > start) {
      bytes[--at] = '0';
    }
  }

  /** Decimal digits of a non-negative int. */
  private static int digits(int v) {
    int d = 1;
    for (int limit = 10; d < 10 && v >= limit; limit *= 10) {
      d++;
    }
    return d;
  }
}

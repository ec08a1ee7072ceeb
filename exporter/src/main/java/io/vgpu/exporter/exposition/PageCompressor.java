package io.vgpu.exporter.exposition;

import java.io.OutputStream;
import java.util.Arrays;
import java.util.zip.CRC32;
import java.util.zip.Deflater;

/**
 * Gzips a page as it is encoded, into one array sized by the last compressed page, so that a render
 * never holds the uncompressed page (3 MB at 100 containers) but only its gzip member (~125 KB):
 * the encoder writes 64 KB chunks here ({@link ExpositionBuffer#streamingTo}). BEST_SPEED: a
 * metrics page compresses ~35x at level 1 in a third of the time of the default level 6. Not
 * thread-safe; {@link ExpositionCache} uses it under its encoder's lock.
 *
 * <p>Segments: most families of a page are the same bytes as in the last page (limits, info,
 * counters of idle processes), and deflating them again was ~40 % of a scrape's CPU. {@link
 * TextEncoder} deflates each large family as a {@link Segment} of its own, between two full flushes
 * (a full flush ends the output at a byte boundary and makes the deflater forget what came before),
 * so the segment's bytes decode the same wherever they stand in a deflate stream; an unchanged
 * family's segment is {@linkplain #replay copied} into the next page instead of being encoded and
 * deflated again, and the page's CRC takes it in by {@link Crc32Combine} arithmetic. The price is
 * ratio: each segment starts without history (~125 KB instead of ~78 KB at 100 containers).
 */
final class PageCompressor extends OutputStream {
  /** The gzip member header: magic, deflate, no flags, no mtime, no extra flags, OS unknown=0. */
  static final byte[] GZIP_HEADER = {0x1f, (byte) 0x8b, 8, 0, 0, 0, 0, 0, 0, 0};

  static final int TRAILER = 8;

  private final Deflater deflater = new Deflater(Deflater.BEST_SPEED, true);
  private final CRC32 crc = new CRC32(); // of the bytes written since the last boundary
  private int pageCrc; // of the page up to the last boundary
  private long runLength; // bytes written since the last boundary
  private boolean flushNeeded; // the deflater took input since its last full flush
  private int segmentStart = -1;
  private int replayed; // segments replayed since start
  private byte[] out = new byte[0];
  private int length;
  private long rawSize;
  private long limit;

  /**
   * A family's bytes deflated on their own: {@code deflated} decodes to {@code rawLength} bytes
   * whose CRC-32 is {@code crc}, with no reference to anything before them and ending at a byte
   * boundary without a final block, so it may stand between any two boundaries of a page.
   */
  @SuppressWarnings("ArrayRecordComponent") // never compared; the bytes are owned
  record Segment(byte[] deflated, int crc, long rawLength) {}

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
    pageCrc = 0;
    runLength = 0;
    flushNeeded = false;
    segmentStart = -1;
    replayed = 0;
  }

  @Override
  public void write(int b) {
    write(new byte[] {(byte) b}, 0, 1);
  }

  @Override
  public void write(byte[] b, int off, int len) {
    crc.update(b, off, len);
    rawSize += len;
    runLength += len;
    flushNeeded = true;
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

  /**
   * Ends what the deflater was given at a byte boundary, forgetting it, and folds its CRC into the
   * page's: what follows may be a segment deflated elsewhere.
   */
  private void boundary() {
    if (flushNeeded) {
      do {
        if (length == out.length) {
          grow(out.length + 1);
        }
        length += deflater.deflate(out, length, out.length - length, Deflater.FULL_FLUSH);
      } while (length == out.length); // a full output array may hold back more of the flush
      flushNeeded = false;
    }
    if (runLength != 0) { // a segment right after another: nothing to fold
      pageCrc = Crc32Combine.combine(pageCrc, (int) crc.getValue(), runLength);
      crc.reset();
      runLength = 0;
    }
  }

  /** Starts a segment: the bytes written until {@link #endSegment} are deflated on their own. */
  void beginSegment() {
    boundary();
    segmentStart = length;
  }

  /** Ends the segment begun last and returns a copy of its deflated bytes. */
  Segment endSegment() {
    if (segmentStart < 0) {
      throw new IllegalStateException("no segment begun");
    }
    int segmentCrc = (int) crc.getValue();
    long segmentLength = runLength;
    boundary();
    Segment s =
        new Segment(Arrays.copyOfRange(out, segmentStart, length), segmentCrc, segmentLength);
    segmentStart = -1;
    return s;
  }

  /** Puts a segment of an earlier page here, as if its bytes had been written and deflated. */
  void replay(Segment s) {
    boundary();
    int n = s.deflated().length;
    if (out.length - length < n) {
      grow(length + n);
    }
    System.arraycopy(s.deflated(), 0, out, length, n);
    length += n;
    pageCrc = Crc32Combine.combine(pageCrc, s.crc(), s.rawLength());
    rawSize += s.rawLength();
    replayed++;
  }

  /** Segments {@linkplain #replay replayed} into this page. */
  int replayed() {
    return replayed;
  }

  /** Ends the gzip member; the page is {@link #array()} up to {@link #length()}. */
  void finish() {
    int fullCrc = Crc32Combine.combine(pageCrc, (int) crc.getValue(), runLength);
    deflater.finish();
    while (!deflater.finished()) {
      drain();
    }
    if (out.length - length < TRAILER) {
      grow(length + TRAILER);
    }
    length = putIntLe(out, length, fullCrc);
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

package io.vgpu.exporter.exposition;

/**
 * Sample values as client_java's text writers print them: {@code +Inf}, {@code -Inf}, otherwise
 * exactly {@link Double#toString(double)}. Most of an exporter's values are whole numbers (bytes,
 * counts), for which the same characters are produced here without building a String.
 */
final class DoubleText {
  /**
   * Fractional values repeat from scrape to scrape (limits as ratios, 2.5 s throttled): their text
   * is remembered in a small direct-mapped table so that Double.toString (a String and its bytes
   * per call) runs once per distinct value. Not thread-safe; one per encoder.
   */
  static final class Fractions {
    private static final int SIZE = 1024;
    private final long[] bits = new long[SIZE];
    private final byte[][] text = new byte[SIZE][];

    byte[] text(double d) {
      long b = Double.doubleToRawLongBits(d);
      int i = (int) ((b ^ (b >>> 29) ^ (b >>> 47)) & (SIZE - 1));
      byte[] t = text[i];
      if (t == null || bits[i] != b) {
        t = Double.toString(d).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        text[i] = t;
        bits[i] = b;
      }
      return t;
    }
  }

  private DoubleText() {}

  /** Below this, Double.toString prints a whole number as plain digits plus ".0". */
  private static final double PLAIN_LIMIT = 1e7;

  /**
   * Below 2^53 every whole double is exact and its neighbours are at most 1 apart, so the shortest
   * decimal that identifies it (what Double.toString prints) is its own digits without trailing
   * zeros: dropping any non-zero digit moves the value by at least 1, outside its rounding
   * interval.
   */
  private static final double EXACT_LIMIT = 0x1p53;

  /** Writes {@code d}; fractions through {@code fractions}' table when given (null: uncached). */
  static void write(ExpositionBuffer out, double d, Fractions fractions) {
    if (d == Double.POSITIVE_INFINITY) {
      out.writeAscii("+Inf");
      return;
    }
    if (d == Double.NEGATIVE_INFINITY) {
      out.writeAscii("-Inf");
      return;
    }
    double abs = Math.abs(d);
    long whole = (long) d;
    boolean negativeZero = d == 0 && Double.doubleToRawLongBits(d) != 0;
    if (whole != d || abs >= EXACT_LIMIT || negativeZero) {
      if (fractions != null) {
        out.write(fractions.text(d));
      } else {
        out.writeAscii(Double.toString(d));
      }
      return;
    }
    if (abs < PLAIN_LIMIT) {
      out.writeLong(whole);
      out.write((byte) '.');
      out.write((byte) '0');
      return;
    }
    // Scientific form: d.dddE<exponent>, trailing zeros dropped, at least one fraction digit.
    if (whole < 0) {
      out.write((byte) '-');
      whole = -whole;
    }
    out.writeScientific(whole);
  }
}

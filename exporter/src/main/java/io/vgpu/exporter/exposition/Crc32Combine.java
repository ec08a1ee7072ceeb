package io.vgpu.exporter.exposition;

/**
 * The CRC-32 (gzip's, reflected polynomial 0xEDB88320) of two byte strings put together, from the
 * CRCs of each and the length of the second, without the bytes: {@link PageCompressor} sends a
 * family's deflated bytes again from an earlier page and needs the page's CRC over them. Arithmetic
 * in GF(2)[x] modulo the CRC polynomial: CRC(A·B) = CRC(A)·x^(8·|B|) + CRC(B), where x^(8n) comes
 * from a table of x^(2^k) by square-and-multiply, so a combination costs O(log n) multiplications.
 */
final class Crc32Combine {
  /** The CRC-32 polynomial, bit-reversed (bit 31 holds x^0). */
  private static final int POLY = 0xEDB88320;

  /** x^0 in the reflected representation. */
  private static final int ONE = 1 << 31;

  /** POWERS[k] = x^(2^k) mod POLY, for every bit of a long length times 8. */
  private static final int[] POWERS = new int[64 + 3];

  static {
    POWERS[0] = ONE >>> 1; // x^1
    for (int k = 1; k < POWERS.length; k++) {
      POWERS[k] = multiply(POWERS[k - 1], POWERS[k - 1]);
    }
  }

  private Crc32Combine() {}

  /**
   * The CRC of A followed by B.
   *
   * @param crcA CRC-32 of A (as {@link java.util.zip.CRC32#getValue()} gives it)
   * @param crcB CRC-32 of B
   * @param lengthB bytes in B, at least 0
   */
  static int combine(int crcA, int crcB, long lengthB) {
    if (lengthB < 0) {
      throw new IllegalArgumentException("negative length " + lengthB);
    }
    return multiply(xPow8n(lengthB), crcA) ^ crcB;
  }

  /** x^(8n) mod POLY: 8n = n·2^3, so bit k of n selects x^(2^(k+3)). */
  private static int xPow8n(long n) {
    int p = ONE;
    int k = 3;
    while (n != 0) {
      if ((n & 1) != 0) {
        p = multiply(POWERS[k], p);
      }
      n >>>= 1;
      k++;
    }
    return p;
  }

  /** a·b mod POLY, both reflected: walks a's coefficients from x^0 while b is multiplied by x. */
  static int multiply(int a, int b) {
    int product = 0;
    for (int bit = ONE; bit != 0; bit >>>= 1) {
      if ((a & bit) != 0) {
        product ^= b;
        if ((a & (bit - 1)) == 0) {
          break;
        }
      }
      b = (b & 1) != 0 ? (b >>> 1) ^ POLY : b >>> 1;
    }
    return product;
  }
}

package io.vgpu.regioncodec.internal;

import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionException.Reason;
import io.vgpu.regioncodec.RegionFormatException;
import io.vgpu.regioncodec.UnsupportedLayoutException;

/**
 * Chooses the layout from the file size first and the version fields second (hami-core-facts.md 2.5
 * step 2). Never guesses: anything else is a typed exception that names what was found.
 */
public final class Detector {
  /** Larger files are refused: 16 MiB, 8x the largest layout (public as RegionFile's). */
  public static final long MAX_FILE_SIZE = 16L << 20;

  private Detector() {}

  /** Bytes needed to read magic and version fields. */
  public static final int HEADER_PROBE = 12;

  private static final long L0A = Layout.L0A.structSize();
  private static final long L0B = Layout.L0B.structSize();
  private static final long V1 = Layout.V1_2.structSize();
  private static final long BROKEN = Layout.V1_1_BROKEN.structSize();

  /**
   * The layout of a file of {@code size} bytes whose first 12 bytes hold {@code magic}, {@code
   * major} and {@code minor} (the latter two ignored for sizes of version-less layouts).
   *
   * @throws RegionFormatException TOO_SMALL, TOO_LARGE or BAD_MAGIC
   * @throws UnsupportedLayoutException UNKNOWN_SIZE or UNKNOWN_VERSION
   */
  public static Layout detect(long size, int magic, int major, int minor) {
    if (size < HEADER_PROBE) {
      throw new RegionFormatException(
          Reason.TOO_SMALL,
          "region file has " + size + " bytes; at least 12 are needed for magic and version",
          size);
    }
    if (size > MAX_FILE_SIZE) {
      throw new RegionFormatException(
          Reason.TOO_LARGE,
          "region file has "
              + size
              + " bytes, more than the "
              + MAX_FILE_SIZE
              + " any known layout needs",
          size);
    }
    if (magic != Geometry.MAGIC) {
      throw new RegionFormatException(
          Reason.BAD_MAGIC,
          "region file starts with 0x"
              + Integer.toHexString(magic)
              + ", not HAMi's magic 0x"
              + Integer.toHexString(Geometry.MAGIC)
              + " (19920718): not initialized or not a region",
          size);
    }
    if (size == L0A || size == L0A + 1) {
      return Layout.L0A;
    }
    if (size == L0B || size == L0B + 1) {
      return Layout.L0B;
    }
    long uMajor = Integer.toUnsignedLong(major);
    long uMinor = Integer.toUnsignedLong(minor);
    boolean brokenSize = size == BROKEN || size == BROKEN + 1;
    if (brokenSize || size >= V1) {
      if (uMajor == 1 && uMinor == 1) {
        return brokenSize ? Layout.V1_1_BROKEN : Layout.V1_1;
      }
      if (uMajor == 1 && uMinor == 2) {
        return Layout.V1_2;
      }
      throw new UnsupportedLayoutException(
          Reason.UNKNOWN_VERSION,
          "region file of "
              + size
              + " bytes says version "
              + uMajor
              + "."
              + uMinor
              + "; this codec knows 1.1 and 1.2 for v1-sized files",
          size,
          uMajor,
          uMinor);
    }
    throw new UnsupportedLayoutException(
        Reason.UNKNOWN_SIZE,
        "region file of "
            + size
            + " bytes matches no known layout (L0a 804680, L0b 1197896, "
            + "v1.1-broken 2008984, v1 >= 2008952; each may be 1 byte longer); version fields say "
            + uMajor
            + "."
            + uMinor,
        size,
        uMajor,
        uMinor);
  }

  /** How many bytes of a file of {@code size} bytes and this layout the reader maps. */
  public static long mappedLength(Layout layout, long size) {
    if ((layout == Layout.V1_2 || layout == Layout.V1_1) && size >= Extension.FILE_SIZE) {
      return Extension.FILE_SIZE;
    }
    return layout.structSize();
  }
}

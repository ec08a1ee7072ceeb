package io.vgpu.regioncodec.internal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** Fixed-size, NUL-terminated C strings from tenant-written bytes. */
public final class Text {
  private Text() {}

  /**
   * The bytes at {@code [offset, offset + capacity)} up to the first NUL, {@code ""} when the first
   * byte is 0. Printable ASCII is kept as is; invalid UTF-8 and control characters become U+FFFD,
   * so the result is always safe to log or use as a label value.
   */
  public static String cString(MemorySegment segment, long offset, int capacity) {
    // One bulk copy, then plain array reads: a MemorySegment read per byte is a chain of calls
    // under C1, and every scrape reads ~10 of these strings per region.
    byte[] raw = Scratch.bytes(capacity);
    MemorySegment.copy(segment, ValueLayout.JAVA_BYTE, offset, raw, 0, capacity);
    int length = 0;
    boolean ascii = true;
    int hash = 0;
    for (; length < capacity; length++) {
      byte b = raw[length];
      if (b == 0) {
        break;
      }
      if (b < 0x20 || b > 0x7e) {
        ascii = false;
      }
      hash = 31 * hash + b;
    }
    if (length == 0) {
      return "";
    }
    if (ascii) {
      return recentAscii(raw, length, hash);
    }
    return sanitize(Arrays.copyOf(raw, length));
  }

  /**
   * Strings read recently (device uuids, library versions, pod identity): the same few hundred come
   * back at every snapshot of every region, so a direct-mapped table hands out the String already
   * made when the bytes match, instead of a new one per read. Slots are overwritten racily; a
   * reader checks every byte of what it finds, so it sees either a matching string or makes its
   * own.
   */
  private static final int RECENT_SIZE = 4096;

  private static final String[] RECENT = new String[RECENT_SIZE];

  private static String recentAscii(byte[] raw, int length, int hash) {
    int slot = (hash ^ (hash >>> 15) ^ length) & (RECENT_SIZE - 1);
    String candidate = RECENT[slot];
    if (candidate != null && candidate.length() == length) {
      boolean same = true;
      for (int i = 0; i < length; i++) {
        if (candidate.charAt(i) != raw[i]) {
          same = false;
          break;
        }
      }
      if (same) {
        return candidate;
      }
    }
    String made = new String(raw, 0, length, StandardCharsets.ISO_8859_1);
    RECENT[slot] = made;
    return made;
  }

  private static String sanitize(byte[] bytes) {
    String decoded;
    try {
      decoded =
          StandardCharsets.UTF_8
              .newDecoder()
              .onMalformedInput(CodingErrorAction.REPLACE)
              .onUnmappableCharacter(CodingErrorAction.REPLACE)
              .decode(ByteBuffer.wrap(bytes))
              .toString();
    } catch (CharacterCodingException e) {
      // Unreachable with REPLACE actions; fall back to a lossless-enough view.
      decoded = new String(bytes, StandardCharsets.ISO_8859_1);
    }
    StringBuilder out = new StringBuilder(decoded.length());
    for (int i = 0; i < decoded.length(); i++) {
      char c = decoded.charAt(i);
      out.append(Character.isISOControl(c) ? '\uFFFD' : c);
    }
    return out.toString();
  }

  /**
   * UTF-8 bytes of {@code value}, NUL-padded to {@code capacity}; rejects values that do not fit.
   */
  public static byte[] encode(String value, int capacity, String field) {
    byte[] raw = value.getBytes(StandardCharsets.UTF_8);
    if (raw.length >= capacity) {
      throw new IllegalArgumentException(
          field + " must be shorter than " + capacity + " bytes in UTF-8: " + value);
    }
    return raw;
  }
}

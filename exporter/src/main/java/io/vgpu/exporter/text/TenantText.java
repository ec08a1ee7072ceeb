package io.vgpu.exporter.text;

/**
 * Makes tenant-derived text (directory and file names, region strings, library paths, error
 * messages quoting them) safe to print to a terminal, a log or a page: every character that could
 * move the cursor, clear the screen, set a window title, start an escape sequence or reorder what
 * is shown is replaced by {@code U+FFFD} (visible, so the reader knows something was there).
 * Covered: C0 controls (ESC, BEL, CR, LF, ...) and DEL, C1 controls (U+0080-U+009F, including the
 * single-character CSI U+009B), the bidirectional overrides, embeddings and isolates
 * (U+202A-U+202E, U+2066-U+2069, LRM/RLM/ALM), line and paragraph separators, and lone surrogates.
 */
public final class TenantText {
  private TenantText() {}

  static final char REPLACEMENT = '\uFFFD';

  /** {@code s} with every unsafe character replaced; null becomes "null". */
  public static String clean(Object value) {
    String s = String.valueOf(value);
    StringBuilder out = null;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      boolean unsafe = unsafe(c, s, i);
      if (unsafe && out == null) {
        out = new StringBuilder(s.length());
        out.append(s, 0, i);
      }
      if (out != null) {
        if (unsafe) {
          out.append(REPLACEMENT);
        } else {
          out.append(c);
        }
      }
    }
    return out == null ? s : out.toString();
  }

  /** Whether {@code c} (at {@code i} in {@code s}) must not reach a terminal or page as is. */
  public static boolean unsafe(char c, String s, int i) {
    if (c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0x9f)) {
      return true;
    }
    if (c == 0x061c || c == 0x200e || c == 0x200f || (c >= 0x202a && c <= 0x202e)) {
      return true;
    }
    if ((c >= 0x2066 && c <= 0x2069) || c == 0x2028 || c == 0x2029) {
      return true;
    }
    if (Character.isHighSurrogate(c)) {
      return i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1));
    }
    if (Character.isLowSurrogate(c)) {
      return i == 0 || !Character.isHighSurrogate(s.charAt(i - 1));
    }
    return false;
  }
}

package io.vgpu.hostpid.internal;

/**
 * The {@code NSpid:} line of {@code /proc/<pid>/status}: the pid in every PID namespace the process
 * is in, outermost (the procfs's) first; and its {@code Uid:} line.
 *
 * <p>Only whole lines count (a read cut short by the size bound cannot yield a truncated number),
 * and a second {@code NSpid:} line makes the file untrustworthy rather than picking one.
 */
public final class StatusParser {

  private static final String NSPID = "NSpid:";

  /** Deeper than any kernel allows (MAX_PID_NS_LEVEL is 32); bounds the work on junk. */
  static final int MAX_LEVELS = 33;

  private StatusParser() {}

  /**
   * The NSpid chain, or null when there is no single well-formed NSpid line ending in a newline.
   * Never throws.
   */
  public static int[] parseNsPids(String text) {
    if (text == null) {
      return null;
    }
    int found = -1;
    int lineStart = 0;
    int length = text.length();
    while (lineStart < length) {
      int newline = text.indexOf('\n', lineStart);
      if (newline < 0) {
        break; // an unterminated last line may be cut short: ignore it
      }
      if (text.startsWith(NSPID, lineStart)) {
        if (found >= 0) {
          return null;
        }
        found = lineStart;
      }
      lineStart = newline + 1;
    }
    if (found < 0) {
      return null;
    }
    return parseFields(text, found + NSPID.length(), text.indexOf('\n', found));
  }

  private static final String UID = "Uid:";

  /**
   * The ids of the first {@code Uid:} line (real, effective, saved, file-system), or null when
   * there is no such whole line or a field is not an unsigned 32-bit number. Never throws.
   */
  public static int[] parseUids(String text) {
    if (text == null) {
      return null;
    }
    int lineStart = 0;
    int length = text.length();
    while (lineStart < length) {
      int newline = text.indexOf('\n', lineStart);
      if (newline < 0) {
        return null; // an unterminated last line may be cut short
      }
      if (text.startsWith(UID, lineStart)) {
        return parseIds(text, lineStart + UID.length(), newline);
      }
      lineStart = newline + 1;
    }
    return null;
  }

  private static int[] parseIds(String text, int from, int to) {
    int[] ids = new int[4];
    int count = 0;
    int pos = from;
    while (pos < to) {
      while (pos < to && isBlank(text.charAt(pos))) {
        pos++;
      }
      int end = pos;
      while (end < to && !isBlank(text.charAt(end))) {
        end++;
      }
      if (end == pos) {
        break;
      }
      long id = StatParser.parseUnsigned(text, pos, end);
      if (id < 0 || id > 0xFFFF_FFFFL || count == ids.length) {
        return null;
      }
      ids[count++] = (int) id;
      pos = end;
    }
    return count == 0 ? null : java.util.Arrays.copyOf(ids, count);
  }

  private static int[] parseFields(String text, int from, int to) {
    int[] pids = new int[4];
    int count = 0;
    int pos = from;
    while (true) {
      int fieldStart = pos;
      while (fieldStart < to && isBlank(text.charAt(fieldStart))) {
        fieldStart++;
      }
      if (fieldStart == to) {
        break;
      }
      if (fieldStart == pos && pos != from) {
        return null; // fields must be separated by whitespace
      }
      int fieldEnd = fieldStart;
      while (fieldEnd < to && !isBlank(text.charAt(fieldEnd))) {
        fieldEnd++;
      }
      long pid = StatParser.parseUnsigned(text, fieldStart, fieldEnd);
      if (pid <= 0 || pid > Integer.MAX_VALUE || count == MAX_LEVELS) {
        return null;
      }
      if (count == pids.length) {
        pids = java.util.Arrays.copyOf(pids, pids.length * 2);
      }
      pids[count++] = (int) pid;
      pos = fieldEnd;
    }
    return count == 0 ? null : java.util.Arrays.copyOf(pids, count);
  }

  private static boolean isBlank(char c) {
    return c == ' ' || c == '\t';
  }
}

package io.vgpu.hostpid.internal;

/**
 * The fields of {@code /proc/<pid>/stat} the resolver needs: pid (field 1), state (field 3) and
 * start time (field 22).
 *
 * <p>Field 2 is the command name in parentheses and may itself contain spaces and parentheses, so
 * the fields after it are found from the <em>last</em> {@code ')'}: everything after it is numbers
 * and the one-letter state, which cannot contain one.
 */
public final class StatParser {

  /** Field number of the start time, counting from 1 as proc(5) does. */
  static final int START_TIME_FIELD = 22;

  /** Fields after the command name that precede the start time (3 .. 21). */
  private static final int FIELDS_BEFORE_START_TIME = START_TIME_FIELD - 3;

  private StatParser() {}

  /**
   * The parsed fields.
   *
   * @param pid field 1
   * @param state field 3, e.g. 'R', 'S', 'Z'
   * @param startTimeTicks field 22
   */
  public record Stat(int pid, char state, long startTimeTicks) {

    /** Zombie or dead: exited, only waiting to be reaped. */
    public boolean exited() {
      return state == 'Z' || state == 'X' || state == 'x';
    }
  }

  /** The fields, or null when the text is not a stat line. Never throws. */
  public static Stat parse(String text) {
    if (text == null) {
      return null;
    }
    int open = text.indexOf(" (");
    int close = text.lastIndexOf(')');
    if (open <= 0 || close < open) {
      return null;
    }
    long pid = parseUnsigned(text, 0, open);
    if (pid <= 0 || pid > Integer.MAX_VALUE) {
      return null;
    }
    int length = text.length();
    int pos = close + 1;
    if (pos >= length || text.charAt(pos) != ' ') {
      return null;
    }
    pos++;
    if (pos + 1 >= length || text.charAt(pos + 1) != ' ') {
      return null;
    }
    char state = text.charAt(pos);
    if (state < 'A' || state > 'z') {
      return null;
    }
    pos += 2;
    // Skip fields 4..21, each a (possibly negative) decimal number followed by one space.
    for (int field = 0; field < FIELDS_BEFORE_START_TIME - 1; field++) {
      int space = text.indexOf(' ', pos);
      if (space <= pos) {
        return null;
      }
      pos = space + 1;
    }
    int end = pos;
    while (end < length && text.charAt(end) != ' ' && text.charAt(end) != '\n') {
      end++;
    }
    long start = parseUnsigned(text, pos, end);
    if (start < 0) {
      return null;
    }
    return new Stat((int) pid, state, start);
  }

  /** Decimal digits only, at most 18 of them (no overflow); -1 otherwise. */
  static long parseUnsigned(String s, int from, int to) {
    if (to <= from || to - from > 18) {
      return -1;
    }
    long value = 0;
    for (int i = from; i < to; i++) {
      char c = s.charAt(i);
      if (c < '0' || c > '9') {
        return -1;
      }
      value = value * 10 + (c - '0');
    }
    return value;
  }
}

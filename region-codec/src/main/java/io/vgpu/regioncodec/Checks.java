package io.vgpu.regioncodec;

/** Argument checks shared by the records' compact constructors. */
final class Checks {
  private Checks() {}

  static void index(long value, long bound, String name) {
    if (value < 0 || value >= bound) {
      throw new IllegalArgumentException(name + " must be in [0, " + bound + "), was " + value);
    }
  }

  static void nonNegative(long value, String name) {
    if (value < 0) {
      throw new IllegalArgumentException(name + " must not be negative, was " + value);
    }
  }
}

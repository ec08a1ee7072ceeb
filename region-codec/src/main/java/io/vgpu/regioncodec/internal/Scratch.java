package io.vgpu.regioncodec.internal;

/**
 * Per-thread scratch arrays for reading a snapshot: a snapshot is read by one thread start to end,
 * and fresh arrays per snapshot (a slot's usage fields, a string's bytes) were a tenth of a large
 * node's per-scrape allocation. An array handed out is valid until the same thread asks again.
 */
final class Scratch {
  private static final ThreadLocal<Scratch> CURRENT = ThreadLocal.withInitial(Scratch::new);

  private long[] longs = new long[128];
  private byte[] bytes = new byte[256];

  private Scratch() {}

  /** At least {@code length} longs. */
  static long[] longs(int length) {
    Scratch s = CURRENT.get();
    if (s.longs.length < length) {
      s.longs = new long[length];
    }
    return s.longs;
  }

  /** At least {@code length} bytes. */
  static byte[] bytes(int length) {
    Scratch s = CURRENT.get();
    if (s.bytes.length < length) {
      s.bytes = new byte[length];
    }
    return s.bytes;
  }
}

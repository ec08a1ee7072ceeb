package io.vgpu.regioncodec.internal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * Little-endian, aligned VarHandle access to a region segment. Every field the codec touches is
 * naturally aligned in every layout, and mapped segments start page-aligned, so acquire/release and
 * atomic modes are legal.
 */
public final class Access {
  private Access() {}

  private static final VarHandle I16 =
      ValueLayout.JAVA_SHORT.withOrder(ByteOrder.LITTLE_ENDIAN).varHandle();
  private static final VarHandle I32 =
      ValueLayout.JAVA_INT.withOrder(ByteOrder.LITTLE_ENDIAN).varHandle();
  private static final VarHandle I64 =
      ValueLayout.JAVA_LONG.withOrder(ByteOrder.LITTLE_ENDIAN).varHandle();

  public static int intAcquire(MemorySegment s, long offset) {
    return (int) I32.getAcquire(s, offset);
  }

  public static long longAcquire(MemorySegment s, long offset) {
    return (long) I64.getAcquire(s, offset);
  }

  public static int u16Acquire(MemorySegment s, long offset) {
    return ((short) I16.getAcquire(s, offset)) & 0xffff;
  }

  /** An unsigned 64-bit field as a non-negative long, saturating at {@link Long#MAX_VALUE}. */
  public static long u64Saturated(MemorySegment s, long offset) {
    long v = longAcquire(s, offset);
    return v < 0 ? Long.MAX_VALUE : v;
  }

  /** An unsigned 64-bit field as a non-negative int, saturating at {@link Integer#MAX_VALUE}. */
  public static int u64SaturatedInt(MemorySegment s, long offset) {
    long v = longAcquire(s, offset);
    return v < 0 || v > Integer.MAX_VALUE ? Integer.MAX_VALUE : (int) v;
  }

  public static void setIntRelease(MemorySegment s, long offset, int value) {
    I32.setRelease(s, offset, value);
  }

  public static void setLongRelease(MemorySegment s, long offset, long value) {
    I64.setRelease(s, offset, value);
  }

  public static void setShort(MemorySegment s, long offset, short value) {
    I16.set(s, offset, value);
  }

  /** Atomic add with release semantics (a locked add on x86), as the library bumps seqlocks. */
  public static long getAndAddLongRelease(MemorySegment s, long offset, long delta) {
    return (long) I64.getAndAddRelease(s, offset, delta);
  }
}

package io.vgpu.regioncodec;

import io.vgpu.regioncodec.internal.Access;
import io.vgpu.regioncodec.internal.Detector;
import io.vgpu.regioncodec.internal.Extension;
import io.vgpu.regioncodec.internal.Geometry;
import io.vgpu.regioncodec.internal.RegionReader;
import java.lang.foreign.MemorySegment;

/**
 * Decodes a region held in memory exactly as {@link RegionFile} decodes a mapped file (detect from
 * the first 12 bytes and the size, then the reader protocol), so properties can run thousands of
 * cases without writing files. File-based cases elsewhere cover the mapping itself.
 */
final class InMemoryRegion {
  private InMemoryRegion() {}

  /** Decodes the first {@code size} bytes of {@code segment} (8-byte aligned). */
  static RegionSnapshot decode(MemorySegment segment, long size) {
    int magic = size >= 12 ? Access.intAcquire(segment, 0) : 0;
    int major = size >= 12 ? Access.intAcquire(segment, 4) : 0;
    int minor = size >= 12 ? Access.intAcquire(segment, 8) : 0;
    Layout layout = Detector.detect(size, magic, major, minor);
    long length = Detector.mappedLength(layout, size);
    return RegionReader.snapshot(
        segment.asSlice(0, length), Geometry.of(layout), length > layout.structSize());
  }

  /**
   * Whether a snapshot of this unchanging segment must be best effort: a live slot within the
   * clamped {@code proc_num} has an odd seqlock (layouts that have one), or the extension's
   * generation is odd (a compaction that never finishes).
   */
  static boolean mustBeBestEffort(MemorySegment segment, Layout layout, long size) {
    Geometry g = Geometry.of(layout);
    if (Detector.mappedLength(layout, size) > layout.structSize()
        && Access.intAcquire(segment, Extension.OFFSET) == Extension.MAGIC
        && Access.u16Acquire(segment, Extension.OFFSET + Extension.F_MAJOR) == 1
        && (Access.longAcquire(segment, Extension.OFFSET + Extension.F_GENERATION) & 1) != 0) {
      return true;
    }
    if (g.slotSeqlockOffset < 0) {
      return false;
    }
    int n = Math.max(0, Math.min(Access.intAcquire(segment, g.procNumOffset), 1024));
    for (int i = 0; i < n; i++) {
      long base = g.slotBase(i);
      if (Access.intAcquire(segment, base) != 0
          && Access.intAcquire(segment, base + g.slotStatusOffset) != 0
          && (Access.longAcquire(segment, base + g.slotSeqlockOffset) & 1) != 0) {
        return true;
      }
    }
    return false;
  }
}

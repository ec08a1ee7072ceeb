package io.vgpu.regioncodec.internal;

import io.vgpu.regioncodec.Layout;

/**
 * Byte offsets of every field the codec reads or writes, per layout (x86_64 glibc, from
 * hami-core-facts.md section 1 and libvgpu's {@code vgpu_region.h}). {@code -1} marks a field the
 * layout does not have.
 */
public final class Geometry {
  public static final int MAGIC = 19_920_718;
  public static final int MAX_DEVICES = 16;
  public static final int MAX_PROCS = 1024;
  public static final int UUID_LEN = 96;
  public static final int SEM_SIZE = 32;

  // device_memory_t: the same first five fields in every layout (L0 stops after total).
  public static final int MEM_CONTEXT = 0;
  public static final int MEM_MODULE = 8;
  public static final int MEM_DATA = 16;
  public static final int MEM_OFFSET = 24;
  public static final int MEM_TOTAL = 32;
  // device_util_t
  public static final int UTIL_DEC = 0;
  public static final int UTIL_ENC = 8;
  public static final int UTIL_SM = 16;

  public static final int SLOT_PID = 0;
  public static final int SLOT_HOSTPID = 4;

  public final Layout layout;
  public final long structSize;
  public final int majorOffset;
  public final int minorOffset;
  public final int smInitFlagOffset;
  public final int ownerPidOffset;
  public final int semOffset;
  public final int semPostinitOffset;
  public final int deviceNumOffset;
  public final int uuidsOffset;
  public final int limitOffset;
  public final int smLimitOffset;
  public final int procsOffset;
  public final int slotSize;
  public final int procNumOffset;
  public final int utilizationSwitchOffset;
  public final int recentKernelOffset;
  public final int priorityOffset;
  public final int lastKernelTimeOffset;
  public final int slotSeqlockOffset;
  public final int slotUsedOffset;
  public final int usedStride;
  public final int slotMonitorUsedOffset;
  public final int slotDeviceUtilOffset;
  public final int deviceUtilStride;
  public final int slotStatusOffset;

  private Geometry(
      Layout layout,
      int majorOffset,
      int minorOffset,
      int smInitFlagOffset,
      int ownerPidOffset,
      int semOffset,
      int semPostinitOffset,
      int deviceNumOffset,
      int procsOffset,
      int slotSize,
      int lastKernelTimeOffset,
      int slotSeqlockOffset,
      int slotUsedOffset,
      int usedStride,
      int slotMonitorUsedOffset,
      int slotDeviceUtilOffset,
      int deviceUtilStride,
      int slotStatusOffset) {
    this.layout = layout;
    this.structSize = layout.structSize();
    this.majorOffset = majorOffset;
    this.minorOffset = minorOffset;
    this.smInitFlagOffset = smInitFlagOffset;
    this.ownerPidOffset = ownerPidOffset;
    this.semOffset = semOffset;
    this.semPostinitOffset = semPostinitOffset;
    this.deviceNumOffset = deviceNumOffset;
    this.uuidsOffset = deviceNumOffset + 8;
    this.limitOffset = uuidsOffset + MAX_DEVICES * UUID_LEN;
    this.smLimitOffset = limitOffset + MAX_DEVICES * 8;
    this.procsOffset = procsOffset;
    this.slotSize = slotSize;
    this.procNumOffset = procsOffset + MAX_PROCS * slotSize;
    this.utilizationSwitchOffset = procNumOffset + 4;
    this.recentKernelOffset = procNumOffset + 8;
    this.priorityOffset = procNumOffset + 12;
    this.lastKernelTimeOffset = lastKernelTimeOffset;
    this.slotSeqlockOffset = slotSeqlockOffset;
    this.slotUsedOffset = slotUsedOffset;
    this.usedStride = usedStride;
    this.slotMonitorUsedOffset = slotMonitorUsedOffset;
    this.slotDeviceUtilOffset = slotDeviceUtilOffset;
    this.deviceUtilStride = deviceUtilStride;
    this.slotStatusOffset = slotStatusOffset;
    if (smLimitOffset + MAX_DEVICES * 8 != procsOffset) {
      throw new AssertionError(layout + ": sm_limit does not end at procs");
    }
  }

  private static final Geometry L0A =
      new Geometry(Layout.L0A, -1, -1, 4, 8, 16, -1, 48, 1848, 784, -1, -1, 8, 40, 648, -1, 0, 776);
  private static final Geometry L0B =
      new Geometry(
          Layout.L0B, -1, -1, 4, 8, 16, -1, 48, 1848, 1168, -1, -1, 8, 40, 648, 776, 24, 1160);
  private static final Geometry V1_1 =
      new Geometry(
          Layout.V1_1,
          4,
          8,
          12,
          16,
          24,
          -1,
          56,
          1856,
          1960,
          2_008_912,
          -1,
          8,
          64,
          1032,
          1160,
          48,
          1928);
  private static final Geometry V1_2 =
      new Geometry(
          Layout.V1_2,
          4,
          8,
          12,
          16,
          24,
          2_008_920,
          56,
          1856,
          1960,
          2_008_912,
          1936,
          8,
          64,
          1032,
          1160,
          48,
          1928);
  // The broken layout's seqlock was maintained by the libraries that wrote it, so it is used.
  private static final Geometry V1_1_BROKEN =
      new Geometry(
          Layout.V1_1_BROKEN,
          4,
          8,
          12,
          16,
          24,
          56,
          88,
          1888,
          1960,
          2_008_944,
          8,
          16,
          64,
          1040,
          1168,
          48,
          1936);

  /** The geometry of {@code layout}. */
  public static Geometry of(Layout layout) {
    return switch (layout) {
      case L0A -> L0A;
      case L0B -> L0B;
      case V1_1 -> V1_1;
      case V1_1_BROKEN -> V1_1_BROKEN;
      case V1_2 -> V1_2;
    };
  }

  public long slotBase(int slot) {
    return procsOffset + (long) slotSize * slot;
  }

  public long usedField(int slot, int device, int field) {
    return slotBase(slot) + slotUsedOffset + (long) usedStride * device + field;
  }

  public long monitorUsed(int slot, int device) {
    return slotBase(slot) + slotMonitorUsedOffset + 8L * device;
  }

  /** {@code -1} when the layout has no device utilization. */
  public long utilField(int slot, int device, int field) {
    if (slotDeviceUtilOffset < 0) {
      return -1;
    }
    return slotBase(slot) + slotDeviceUtilOffset + (long) deviceUtilStride * device + field;
  }

  public long uuid(int device) {
    return uuidsOffset + (long) UUID_LEN * device;
  }

  public long limit(int device) {
    return limitOffset + 8L * device;
  }

  public long smLimit(int device) {
    return smLimitOffset + 8L * device;
  }
}

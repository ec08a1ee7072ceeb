package io.vgpu.regioncodec.internal;

import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.ExtensionDevice;
import io.vgpu.regioncodec.RegionExtension;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.SlotExtension;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Writes a {@link RegionSpec} into a zeroed segment, field by field at the layout's offsets. The
 * same slot code serves {@link io.vgpu.regioncodec.RegionWriter#putSlot} on a live mapping, where
 * the seqlock protocol is followed.
 */
public final class Encoder {
  private Encoder() {}

  /** Writes the whole region; {@code segment} must be zeroed and {@code spec.fileSize()} long. */
  public static void encode(MemorySegment s, RegionSpec spec) {
    Geometry g = Geometry.of(spec.layout());
    if (g.majorOffset >= 0) {
      Access.setIntRelease(s, g.majorOffset, spec.majorVersion());
      Access.setIntRelease(s, g.minorOffset, spec.minorVersion());
    }
    Access.setIntRelease(s, g.smInitFlagOffset, spec.smInitFlag());
    Access.setLongRelease(s, g.ownerPidOffset, spec.ownerPid());
    // sem_init(pshared=1, value=1) on x86_64 glibc stores value 1 in the first word.
    s.set(ValueLayout.JAVA_BYTE, g.semOffset, (byte) 1);
    if (g.semPostinitOffset >= 0) {
      s.set(ValueLayout.JAVA_BYTE, g.semPostinitOffset, (byte) 1);
    }
    Access.setLongRelease(s, g.deviceNumOffset, spec.deviceNum());
    for (int d = 0; d < spec.devices().size(); d++) {
      RegionSpec.DeviceSpec device = spec.devices().get(d);
      putString(s, g.uuid(d), device.uuid(), Geometry.UUID_LEN, "uuid");
      Access.setLongRelease(s, g.limit(d), device.memoryLimitBytes());
      Access.setLongRelease(s, g.smLimit(d), device.smLimitPercent());
    }
    boolean extension = spec.extension().isPresent();
    for (int i = 0; i < spec.slots().size(); i++) {
      writeSlot(s, g, i, spec.slots().get(i), extension, false);
    }
    Access.setIntRelease(s, g.utilizationSwitchOffset, spec.utilizationSwitch());
    Access.setIntRelease(s, g.recentKernelOffset, spec.recentKernel());
    Access.setIntRelease(s, g.priorityOffset, spec.priority());
    if (g.lastKernelTimeOffset >= 0) {
      Access.setLongRelease(s, g.lastKernelTimeOffset, spec.lastKernelTimeEpochSeconds());
    }
    Access.setIntRelease(s, g.procNumOffset, spec.procNum());
    if (extension) {
      writeExtension(s, spec.extension().orElseThrow());
    }
    // Like the library: the magic last, so a reader never sees it before the rest.
    Access.setIntRelease(s, 0, Geometry.MAGIC);
  }

  /**
   * Writes one slot. With {@code live} and a seqlock layout the {@code used[]} fields are written
   * between two seqlock increments (odd while writing), as the library does; otherwise the stored
   * seqlock is the spec's value.
   */
  public static void writeSlot(
      MemorySegment s,
      Geometry g,
      int slot,
      RegionSpec.SlotSpec spec,
      boolean extension,
      boolean live) {
    long base = g.slotBase(slot);
    boolean seqlock = g.slotSeqlockOffset >= 0;
    long seqOffset = base + g.slotSeqlockOffset;
    for (DeviceUsage u : spec.usage()) {
      if (g.slotDeviceUtilOffset < 0 && u.smUtilPercent() != 0) {
        throw new IllegalArgumentException(
            "layout " + g.layout.label() + " has no sm_util; smUtilPercent must be 0");
      }
    }
    if (live && seqlock) {
      Access.getAndAddLongRelease(s, seqOffset, 1);
    }
    boolean[] set = new boolean[Geometry.MAX_DEVICES];
    for (DeviceUsage u : spec.usage()) {
      writeUsage(s, g, slot, u);
      set[u.deviceIndex()] = true;
    }
    for (int d = 0; d < Geometry.MAX_DEVICES; d++) {
      if (!set[d] && live) {
        writeUsage(s, g, slot, DeviceUsage.zero(d));
      }
    }
    if (live && seqlock) {
      Access.getAndAddLongRelease(s, seqOffset, 1);
    } else if (seqlock) {
      Access.setLongRelease(s, seqOffset, spec.seqlock());
    }
    Access.setIntRelease(s, base + Geometry.SLOT_HOSTPID, spec.hostPid());
    if (extension) {
      SlotExtension e = spec.extension().orElse(SlotExtension.EMPTY);
      Access.setLongRelease(
          s, Extension.slot(slot, Extension.S_START_TIME_TICKS), e.startTimeTicks());
      Access.setLongRelease(s, Extension.slot(slot, Extension.S_HEARTBEAT_NS), e.heartbeatNanos());
      Access.setIntRelease(s, Extension.slot(slot, Extension.S_HOSTPID_SOURCE), e.hostPidSource());
      Access.setIntRelease(s, Extension.slot(slot, Extension.S_PID_TAG), spec.pid());
    }
    Access.setIntRelease(s, base + g.slotStatusOffset, spec.status());
    Access.setIntRelease(s, base + Geometry.SLOT_PID, spec.pid());
  }

  /** Writes one device's usage of a slot (no seqlock handling). */
  public static void writeUsage(MemorySegment s, Geometry g, int slot, DeviceUsage u) {
    int d = u.deviceIndex();
    Access.setLongRelease(s, g.usedField(slot, d, Geometry.MEM_CONTEXT), u.contextBytes());
    Access.setLongRelease(s, g.usedField(slot, d, Geometry.MEM_MODULE), u.moduleBytes());
    Access.setLongRelease(s, g.usedField(slot, d, Geometry.MEM_DATA), u.dataBytes());
    Access.setLongRelease(s, g.usedField(slot, d, Geometry.MEM_TOTAL), u.totalBytes());
    Access.setLongRelease(s, g.monitorUsed(slot, d), u.monitorUsedBytes());
    long sm = g.utilField(slot, d, Geometry.UTIL_SM);
    if (sm >= 0) {
      Access.setLongRelease(s, sm, u.smUtilPercent());
    }
  }

  private static void writeExtension(MemorySegment s, RegionExtension e) {
    long base = Extension.OFFSET;
    Access.setShort(s, base + Extension.F_MAJOR, (short) e.major());
    Access.setShort(s, base + Extension.F_MINOR, (short) e.minor());
    Access.setIntRelease(s, base + Extension.F_SIZE, Extension.SIZE);
    Access.setLongRelease(s, base + Extension.F_GENERATION, e.generation());
    Access.setLongRelease(s, base + Extension.F_CREATED_NS, e.createdNanos());
    putString(
        s, base + Extension.F_LIB_VERSION, e.libVersion(), Extension.LIB_VERSION_LEN, "libVersion");
    putString(s, base + Extension.F_POD_UID, e.podUid(), Extension.POD_UID_LEN, "podUid");
    putString(
        s,
        base + Extension.F_CONTAINER_NAME,
        e.containerName(),
        Extension.CONTAINER_NAME_LEN,
        "containerName");
    Access.setLongRelease(s, base + Extension.F_LOCK_HOLDER_SINCE_NS, e.lockHolderSinceNanos());
    Access.setIntRelease(s, base + Extension.F_LOCK_HOLDER_PID, e.lockHolderPid());
    for (ExtensionDevice d : e.devices()) {
      writeExtensionDevice(s, d);
    }
    Access.setIntRelease(s, base + Extension.F_MAGIC, Extension.MAGIC);
  }

  /** One device's counters in the extension block (its {@code index} says which). */
  public static void writeExtensionDevice(MemorySegment s, ExtensionDevice d) {
    int i = d.index();
    Access.setLongRelease(s, Extension.device(i, Extension.D_OOM_REJECTIONS), d.oomRejections());
    Access.setLongRelease(
        s, Extension.device(i, Extension.D_OOM_REJECTED_BYTES), d.oomRejectedBytes());
    Access.setLongRelease(s, Extension.device(i, Extension.D_THROTTLED_NS), d.throttledNanos());
    Access.setLongRelease(
        s, Extension.device(i, Extension.D_LAUNCHES_DELAYED), d.launchesDelayed());
    Access.setLongRelease(s, Extension.device(i, Extension.D_LAUNCHES_TOTAL), d.launchesTotal());
    Access.setLongRelease(s, Extension.device(i, Extension.D_BUSY_NS), d.busyNanos());
    Access.setLongRelease(
        s, Extension.device(i, Extension.D_LIMITER_WINDOW_PPM), d.limiterWindowPpm());
  }

  private static void putString(
      MemorySegment s, long offset, String value, int capacity, String field) {
    byte[] raw = Text.encode(value, capacity, field);
    MemorySegment.copy(raw, 0, s, ValueLayout.JAVA_BYTE, offset, raw.length);
    s.asSlice(offset + raw.length, capacity - raw.length).fill((byte) 0);
  }
}

package io.vgpu.regioncodec;

import io.vgpu.regioncodec.RegionException.Reason;
import io.vgpu.regioncodec.internal.Access;
import io.vgpu.regioncodec.internal.Encoder;
import io.vgpu.regioncodec.internal.Geometry;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Objects;
import java.util.function.Function;

/**
 * Creates region files and updates single fields of an open read-write {@link RegionFile}.
 *
 * <p>Each single-field update is one aligned atomic store with release semantics, so a concurrent
 * reader (ours, HAMi's monitor or the library) sees the old or the new value, never a mix. {@link
 * #putSlot} and {@link #updateUsage} follow the library's seqlock protocol on layouts that have
 * one. Thread-safe in the sense that every method is a set of atomic stores; concurrent writers of
 * the same slot are not serialized (neither are the library's).
 *
 * <p><b>Warning:</b> writing into a live container's region changes what its processes enforce.
 * Only {@code hostpid}, {@code limit}, {@code sm_limit}, {@code utilization_switch} and {@code
 * recent_kernel} are meant for production write-back; the slot methods are for fixtures and demos.
 */
public final class RegionWriter {
  private final Target file;
  private final MemorySegment segment;
  private final Geometry geometry;

  /**
   * What a writer needs of the open file it writes (given by {@link RegionFile#writer()}, so this
   * class never refers back to the file's class): its mapping and layout, whether the extension
   * block is mapped, and the file's own size check and fault message.
   */
  record Target(
      MemorySegment segment,
      Geometry geometry,
      boolean extensionMapped,
      Runnable checkSize,
      Function<InternalError, RegionIoException> truncated) {}

  RegionWriter(Target file) {
    this.file = file;
    this.segment = file.segment();
    this.geometry = file.geometry();
  }

  /**
   * Writes a byte-exact region of {@code spec.layout()} to {@code path} (created or truncated; a
   * symbolic link at {@code path} is refused).
   *
   * @throws RegionIoException when the file cannot be written
   * @throws IllegalArgumentException when a string field does not fit its C array
   */
  public static void create(Path path, RegionSpec spec) {
    Objects.requireNonNull(path, "path");
    byte[] bytes = encode(spec);
    try (FileChannel channel =
        FileChannel.open(
            path,
            StandardOpenOption.CREATE,
            StandardOpenOption.WRITE,
            StandardOpenOption.TRUNCATE_EXISTING,
            LinkOption.NOFOLLOW_LINKS)) {
      ByteBuffer buffer = ByteBuffer.wrap(bytes);
      while (buffer.hasRemaining()) {
        channel.write(buffer);
      }
    } catch (IOException e) {
      Reason reason =
          e instanceof java.nio.file.AccessDeniedException
              ? Reason.PERMISSION_DENIED
              : Reason.IO_ERROR;
      throw new RegionIoException(reason, "cannot write " + path + ": " + e, e);
    }
  }

  /** The bytes {@link #create} writes for {@code spec}. */
  public static byte[] encode(RegionSpec spec) {
    Objects.requireNonNull(spec, "spec");
    try (Arena arena = Arena.ofConfined()) {
      // 8-byte alignment so the same aligned VarHandles serve heap-built and mapped regions.
      MemorySegment segment = arena.allocate(spec.fileSize(), 8);
      Encoder.encode(segment, spec);
      return segment.toArray(ValueLayout.JAVA_BYTE);
    }
  }

  /** The layout being written. */
  public Layout layout() {
    return geometry.layout;
  }

  /** Stores {@code procs[slot].hostpid}. */
  public void setHostPid(int slot, int hostPid) {
    Checks.index(slot, Geometry.MAX_PROCS, "slot");
    store(
        () ->
            Access.setIntRelease(
                segment, geometry.slotBase(slot) + Geometry.SLOT_HOSTPID, hostPid));
  }

  /** Stores {@code procs[slot].status}. */
  public void setStatus(int slot, int status) {
    Checks.index(slot, Geometry.MAX_PROCS, "slot");
    store(
        () ->
            Access.setIntRelease(
                segment, geometry.slotBase(slot) + geometry.slotStatusOffset, status));
  }

  /** Stores {@code limit[device]} in bytes (0 = unlimited). */
  public void setMemoryLimit(int device, long bytes) {
    Checks.index(device, Geometry.MAX_DEVICES, "device");
    Checks.nonNegative(bytes, "bytes");
    store(() -> Access.setLongRelease(segment, geometry.limit(device), bytes));
  }

  /** Stores {@code sm_limit[device]} in percent (0 or at least 100 = unlimited). */
  public void setSmLimit(int device, int percent) {
    Checks.index(device, Geometry.MAX_DEVICES, "device");
    Checks.nonNegative(percent, "percent");
    store(() -> Access.setLongRelease(segment, geometry.smLimit(device), percent));
  }

  /** Stores {@code utilization_switch}. */
  public void setUtilizationSwitch(int value) {
    store(() -> Access.setIntRelease(segment, geometry.utilizationSwitchOffset, value));
  }

  /**
   * Stores {@code last_kernel_time} (epoch seconds).
   *
   * @throws IllegalStateException for the L0 layouts, which have no such field
   */
  public void setLastKernelTime(long epochSeconds) {
    if (geometry.lastKernelTimeOffset < 0) {
      throw new IllegalStateException(geometry.layout + " has no last_kernel_time");
    }
    store(() -> Access.setLongRelease(segment, geometry.lastKernelTimeOffset, epochSeconds));
  }

  /**
   * Stores the first word of {@code sem}: 1 is free (as {@code sem_init} leaves it), 0 is taken by
   * a {@code sem_wait} that has not posted. For fixtures and demos of a dead lock holder.
   */
  public void setSemaphoreValue(int value) {
    Checks.nonNegative(value, "value");
    store(() -> Access.setIntRelease(segment, geometry.semOffset, value));
  }

  /**
   * Stores every counter of one device in libvgpu's extension block.
   *
   * @throws IllegalStateException when the file has no extension block mapped
   */
  public void setExtensionDevice(ExtensionDevice device) {
    Objects.requireNonNull(device, "device");
    if (!file.extensionMapped()) {
      throw new IllegalStateException("no extension block mapped");
    }
    store(() -> Encoder.writeExtensionDevice(segment, device));
  }

  /** Stores {@code recent_kernel}. */
  public void setRecentKernel(int value) {
    store(() -> Access.setIntRelease(segment, geometry.recentKernelOffset, value));
  }

  /** Stores {@code proc_num} as given (fixtures may store out-of-range values). */
  public void setProcNum(int value) {
    store(() -> Access.setIntRelease(segment, geometry.procNumOffset, value));
  }

  /**
   * Replaces slot {@code slot}: usage of every device (unlisted devices zeroed) between two seqlock
   * increments, then hostpid, status and pid. Does not change {@code proc_num}.
   */
  public void putSlot(int slot, RegionSpec.SlotSpec spec) {
    Checks.index(slot, Geometry.MAX_PROCS, "slot");
    Objects.requireNonNull(spec, "spec");
    store(() -> Encoder.writeSlot(segment, geometry, slot, spec, file.extensionMapped(), true));
  }

  /** Replaces one device's usage of a slot under the slot's seqlock (when the layout has one). */
  public void updateUsage(int slot, DeviceUsage usage) {
    Checks.index(slot, Geometry.MAX_PROCS, "slot");
    Objects.requireNonNull(usage, "usage");
    if (geometry.slotDeviceUtilOffset < 0 && usage.smUtilPercent() != 0) {
      throw new IllegalArgumentException(
          "layout " + geometry.layout.label() + " has no sm_util; smUtilPercent must be 0");
    }
    store(
        () -> {
          long seq = geometry.slotBase(slot) + geometry.slotSeqlockOffset;
          boolean seqlock = geometry.slotSeqlockOffset >= 0;
          if (seqlock) {
            Access.getAndAddLongRelease(segment, seq, 1);
          }
          Encoder.writeUsage(segment, geometry, slot, usage);
          if (seqlock) {
            Access.getAndAddLongRelease(segment, seq, 1);
          }
        });
  }

  private void store(Runnable write) {
    file.checkSize().run();
    try {
      write.run();
    } catch (InternalError e) {
      throw file.truncated().apply(e);
    }
  }
}

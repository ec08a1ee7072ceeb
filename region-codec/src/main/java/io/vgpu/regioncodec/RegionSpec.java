package io.vgpu.regioncodec;

import io.vgpu.regioncodec.internal.Extension;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * What {@link RegionWriter#create} writes: every header field, the devices, the slots (written at
 * positions {@code 0..n-1}) and optionally libvgpu's extension block. Build one with {@link
 * #builder(Layout)}; the raw fields ({@code deviceNum}, {@code procNum}, {@code seqlock}) can be
 * set to any value so tests can produce hostile files.
 *
 * @param layout the layout to write
 * @param majorVersion written at offset 4 for layouts with version fields
 * @param minorVersion written at offset 8 for layouts with version fields
 * @param ownerPid {@code owner_pid}
 * @param smInitFlag {@code sm_init_flag}
 * @param deviceNum {@code device_num} as stored (unsigned 64-bit)
 * @param devices uuid and limits of devices {@code 0..n-1} (at most 16)
 * @param procNum {@code proc_num} as stored
 * @param utilizationSwitch {@code utilization_switch}
 * @param recentKernel {@code recent_kernel}
 * @param priority {@code priority}
 * @param lastKernelTimeEpochSeconds {@code last_kernel_time} (ignored by L0 layouts)
 * @param slots slot contents for positions {@code 0..n-1} (at most 1024)
 * @param extension the extension header, V1_1/V1_2 only
 * @param fileSize the file size; at least the struct size (plus the extension when present)
 */
public record RegionSpec(
    Layout layout,
    int majorVersion,
    int minorVersion,
    long ownerPid,
    int smInitFlag,
    long deviceNum,
    List<DeviceSpec> devices,
    int procNum,
    int utilizationSwitch,
    int recentKernel,
    int priority,
    long lastKernelTimeEpochSeconds,
    List<SlotSpec> slots,
    Optional<RegionExtension> extension,
    long fileSize) {

  /** Validates sizes and that the extension fits the layout. */
  public RegionSpec {
    Objects.requireNonNull(layout, "layout");
    devices = List.copyOf(devices);
    slots = List.copyOf(slots);
    Objects.requireNonNull(extension, "extension");
    if (devices.size() > RegionFile.MAX_DEVICES) {
      throw new IllegalArgumentException("at most 16 devices, got " + devices.size());
    }
    if (slots.size() > RegionFile.MAX_PROCESSES) {
      throw new IllegalArgumentException("at most 1024 slots, got " + slots.size());
    }
    if (extension.isPresent() && layout != Layout.V1_2 && layout != Layout.V1_1) {
      throw new IllegalArgumentException(
          "the extension block follows the v1.1/v1.2 struct only, not " + layout.label());
    }
    long minimum = extension.isPresent() ? Extension.FILE_SIZE : layout.structSize();
    if (fileSize < minimum || fileSize > RegionFile.MAX_FILE_SIZE) {
      throw new IllegalArgumentException(
          "fileSize must be in ["
              + minimum
              + ", "
              + RegionFile.MAX_FILE_SIZE
              + "], was "
              + fileSize);
    }
  }

  /** A builder with the library's initial values for {@code layout}. */
  public static Builder builder(Layout layout) {
    return new Builder(layout);
  }

  /**
   * One device header entry.
   *
   * @param uuid written as bytes (UTF-8, at most 95 bytes so a NUL follows)
   * @param memoryLimitBytes {@code limit[d]}
   * @param smLimitPercent {@code sm_limit[d]}
   */
  public record DeviceSpec(String uuid, long memoryLimitBytes, int smLimitPercent) {
    /** Validates the uuid length. */
    public DeviceSpec {
      if (uuid.getBytes(java.nio.charset.StandardCharsets.UTF_8).length > 95) {
        throw new IllegalArgumentException("uuid longer than 95 bytes: " + uuid);
      }
    }
  }

  /**
   * One slot's contents.
   *
   * @param pid container pid (0 = free slot)
   * @param hostPid host pid
   * @param status 0 free, 1 running, 2 suspended
   * @param usage per-device usage, placed by {@link DeviceUsage#deviceIndex()}; devices not listed
   *     are zero
   * @param seqlock the slot's seqlock value as stored (odd = writer in progress); ignored by
   *     layouts without one
   * @param extension libvgpu's per-slot data, written when the region has the extension
   */
  public record SlotSpec(
      int pid,
      int hostPid,
      int status,
      List<DeviceUsage> usage,
      long seqlock,
      Optional<SlotExtension> extension) {
    /** Copies the usage list and rejects two entries for one device. */
    public SlotSpec {
      usage = List.copyOf(usage);
      Objects.requireNonNull(extension, "extension");
      boolean[] seen = new boolean[RegionFile.MAX_DEVICES];
      for (DeviceUsage u : usage) {
        if (seen[u.deviceIndex()]) {
          throw new IllegalArgumentException("two usage entries for device " + u.deviceIndex());
        }
        seen[u.deviceIndex()] = true;
      }
    }

    /** A running (or suspended) process with the given usage and a clean seqlock. */
    public static SlotSpec of(int pid, int hostPid, int status, List<DeviceUsage> usage) {
      return new SlotSpec(pid, hostPid, status, usage, 0, Optional.empty());
    }

    /** This slot with another seqlock value. */
    public SlotSpec withSeqlock(long value) {
      return new SlotSpec(pid, hostPid, status, usage, value, extension);
    }

    /** This slot with libvgpu's per-slot data. */
    public SlotSpec withExtension(SlotExtension value) {
      return new SlotSpec(pid, hostPid, status, usage, seqlock, Optional.of(value));
    }
  }

  /** Builds a {@link RegionSpec}; not thread-safe. */
  public static final class Builder {
    private final Layout layout;
    private int majorVersion;
    private int minorVersion;
    private long ownerPid;
    private int smInitFlag;
    private Long deviceNum;
    private final List<DeviceSpec> devices = new ArrayList<>();
    private Integer procNum;
    private int utilizationSwitch = 1;
    private int recentKernel = 2;
    private int priority = 1;
    private long lastKernelTime;
    private final List<SlotSpec> slots = new ArrayList<>();
    private Optional<RegionExtension> extension = Optional.empty();
    private long fileSize;

    private Builder(Layout layout) {
      this.layout = Objects.requireNonNull(layout, "layout");
      if (layout.hasVersionFields()) {
        majorVersion = 1;
        minorVersion = layout == Layout.V1_2 ? 2 : 1;
      }
    }

    /** Overrides the version fields (ignored by L0 layouts). */
    public Builder version(int major, int minor) {
      this.majorVersion = major;
      this.minorVersion = minor;
      return this;
    }

    public Builder ownerPid(long value) {
      this.ownerPid = value;
      return this;
    }

    public Builder smInitFlag(int value) {
      this.smInitFlag = value;
      return this;
    }

    /** Overrides {@code device_num}; by default it is the number of devices added. */
    public Builder deviceNum(long value) {
      this.deviceNum = value;
      return this;
    }

    public Builder device(String uuid, long memoryLimitBytes, int smLimitPercent) {
      devices.add(new DeviceSpec(uuid, memoryLimitBytes, smLimitPercent));
      return this;
    }

    /** Overrides {@code proc_num}; by default it is the number of slots added. */
    public Builder procNum(int value) {
      this.procNum = value;
      return this;
    }

    public Builder utilizationSwitch(int value) {
      this.utilizationSwitch = value;
      return this;
    }

    public Builder recentKernel(int value) {
      this.recentKernel = value;
      return this;
    }

    public Builder priority(int value) {
      this.priority = value;
      return this;
    }

    public Builder lastKernelTime(long epochSeconds) {
      this.lastKernelTime = epochSeconds;
      return this;
    }

    public Builder slot(SlotSpec slot) {
      slots.add(slot);
      return this;
    }

    /** Adds a slot with a clean seqlock. */
    public Builder slot(int pid, int hostPid, int status, DeviceUsage... usage) {
      return slot(SlotSpec.of(pid, hostPid, status, List.of(usage)));
    }

    public Builder extension(RegionExtension value) {
      this.extension = Optional.of(value);
      return this;
    }

    /** Overrides the file size; by default the struct size + 1, or the extension file size. */
    public Builder fileSize(long value) {
      this.fileSize = value;
      return this;
    }

    public RegionSpec build() {
      long size =
          fileSize != 0
              ? fileSize
              : extension.isPresent() ? Extension.FILE_SIZE : layout.structSize() + 1;
      return new RegionSpec(
          layout,
          majorVersion,
          minorVersion,
          ownerPid,
          smInitFlag,
          deviceNum != null ? deviceNum : devices.size(),
          devices,
          procNum != null ? procNum : slots.size(),
          utilizationSwitch,
          recentKernel,
          priority,
          lastKernelTime,
          slots,
          extension,
          size);
    }
  }
}

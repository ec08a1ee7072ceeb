package io.vgpu.regioncodec;

import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * An immutable, consistent view of one region at one moment, built by {@link RegionFile#snapshot()}
 * following the reader protocol.
 *
 * @param layout the layout the file was read as
 * @param majorVersion {@code major_version} (0 for layouts without version fields)
 * @param minorVersion {@code minor_version} (0 for layouts without version fields)
 * @param ownerPid {@code owner_pid}: container pid holding the slot-table semaphore, 0 if free
 * @param deviceCount {@code min(device_num, 16)}; {@code device_num} above 16 (or negative as a
 *     signed value) counts as 16
 * @param devices one header per device {@code < deviceCount}
 * @param rawProcNum {@code proc_num} as stored, unclamped
 * @param utilizationSwitch {@code utilization_switch}
 * @param recentKernel {@code recent_kernel} (negative: blocked by a higher-priority task)
 * @param priority {@code priority}
 * @param lastKernelTimeEpochSeconds {@code last_kernel_time} (0 for L0 layouts, which lack it)
 * @param processes live slots (pid and status non-zero), first occurrence of each pid, in slot
 *     order
 * @param bestEffort true when a slot's seqlock never settled within the retry bound or the slot
 *     table kept changing during both passes; values may then be torn
 * @param tornRetries how many slot reads were retried because a writer was active
 * @param extension libvgpu's extension block, when present and understood
 */
public record RegionSnapshot(
    Layout layout,
    int majorVersion,
    int minorVersion,
    long ownerPid,
    int deviceCount,
    List<DeviceHeader> devices,
    int rawProcNum,
    int utilizationSwitch,
    int recentKernel,
    int priority,
    long lastKernelTimeEpochSeconds,
    List<ProcessSlot> processes,
    boolean bestEffort,
    int tornRetries,
    Optional<RegionExtension> extension) {
  /** Copies lists and checks counts, device indexes and pid uniqueness. */
  public RegionSnapshot {
    Objects.requireNonNull(layout, "layout");
    Checks.index(deviceCount, RegionFile.MAX_DEVICES + 1, "deviceCount");
    devices = List.copyOf(devices);
    processes = List.copyOf(processes);
    Objects.requireNonNull(extension, "extension");
    Checks.nonNegative(tornRetries, "tornRetries");
    if (devices.size() != deviceCount) {
      throw new IllegalArgumentException(
          "devices has " + devices.size() + " entries but deviceCount is " + deviceCount);
    }
    for (int i = 0; i < devices.size(); i++) {
      if (devices.get(i).index() != i) {
        throw new IllegalArgumentException(
            "device at position " + i + " has index " + devices.get(i).index());
      }
    }
    if (processes.size() > RegionFile.MAX_PROCESSES) {
      throw new IllegalArgumentException("at most 1024 processes, got " + processes.size());
    }
    // One int[] and a sort rather than a boxed set: snapshots are built on every scrape.
    int[] pids = new int[processes.size()];
    for (int i = 0; i < pids.length; i++) {
      ProcessSlot slot = processes.get(i);
      if (slot.devices().size() != deviceCount) {
        throw new IllegalArgumentException(
            "slot "
                + slot.slotIndex()
                + " has "
                + slot.devices().size()
                + " devices but deviceCount is "
                + deviceCount);
      }
      pids[i] = slot.pid();
    }
    java.util.Arrays.sort(pids);
    for (int i = 1; i < pids.length; i++) {
      if (pids[i] == pids[i - 1]) {
        throw new IllegalArgumentException("duplicate pid " + pids[i]);
      }
    }
  }

  /** Processes whose status is {@link ProcessSlot#STATUS_SUSPENDED}. */
  public long suspendedCount() {
    return processes.stream().filter(p -> p.status() == ProcessSlot.STATUS_SUSPENDED).count();
  }

  /** Sum over processes of {@code used[device].total}, saturating. */
  public long usedBytes(int device) {
    Checks.index(device, deviceCount, "device");
    long sum = 0;
    for (ProcessSlot slot : processes) {
      long r = sum + slot.devices().get(device).totalBytes();
      sum = r < 0 ? Long.MAX_VALUE : r;
    }
    return sum;
  }
}

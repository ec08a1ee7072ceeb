package io.vgpu.regioncodec;

import java.util.List;
import java.util.Optional;

/**
 * One live process slot of a region.
 *
 * @param slotIndex position in {@code procs[]}, in {@code [0, 1024)}
 * @param pid the process id in the container's pid namespace (never 0 in a snapshot)
 * @param hostPid the host pid the library detected, 0 when unknown; may equal {@code pid} when
 *     detection failed (HAMi's "hostpid == pid" bug)
 * @param status 1 running, 2 suspended; other non-zero values are passed through unchanged
 * @param devices usage per device, for devices {@code < deviceCount} of the snapshot, in index
 *     order
 * @param extension libvgpu's per-slot data when the region has the extension block
 */
public record ProcessSlot(
    int slotIndex,
    int pid,
    int hostPid,
    int status,
    List<DeviceUsage> devices,
    Optional<SlotExtension> extension) {
  /** Slot status of a running process. */
  public static final int STATUS_RUNNING = 1;

  /** Slot status of a suspended (SIGUSR2) process. */
  public static final int STATUS_SUSPENDED = 2;

  /** Copies the list and checks device indexes are {@code 0..n-1} in order. */
  public ProcessSlot {
    Checks.index(slotIndex, RegionFile.MAX_PROCESSES, "slotIndex");
    devices = List.copyOf(devices);
    if (devices.size() > RegionFile.MAX_DEVICES) {
      throw new IllegalArgumentException("at most 16 devices, got " + devices.size());
    }
    for (int i = 0; i < devices.size(); i++) {
      if (devices.get(i).deviceIndex() != i) {
        throw new IllegalArgumentException(
            "devices must be indexed 0..n-1 in order; position "
                + i
                + " has index "
                + devices.get(i).deviceIndex());
      }
    }
    java.util.Objects.requireNonNull(extension, "extension");
  }

  /** Sum of {@code used[d].total} over the devices. */
  public long totalBytes() {
    long sum = 0;
    for (DeviceUsage usage : devices) {
      sum = saturatedAdd(sum, usage.totalBytes());
    }
    return sum;
  }

  private static long saturatedAdd(long a, long b) {
    long r = a + b;
    return r < 0 ? Long.MAX_VALUE : r;
  }
}

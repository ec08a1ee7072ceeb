package io.vgpu.regioncodec;

import java.util.List;
import java.util.Objects;

/**
 * libvgpu's extension block (at offset 2 008 960 of files it creates). HAMi readers never look
 * there; HAMi-core never writes it.
 *
 * @param major extension major version (1)
 * @param minor extension minor version
 * @param generation bumped around every slot-table compaction (odd while one is in progress)
 * @param createdNanos {@code CLOCK_REALTIME} nanoseconds at region creation
 * @param libVersion libvgpu version string
 * @param podUid the pod uid the region belongs to, as libvgpu knew it
 * @param containerName the container name, as libvgpu knew it
 * @param lockHolderPid container pid holding the slot-table lock, 0 if free
 * @param lockHolderSinceNanos when that holder took the lock, 0 if free
 * @param devices per-device counters, for devices {@code < deviceCount} of the snapshot
 */
public record RegionExtension(
    int major,
    int minor,
    long generation,
    long createdNanos,
    String libVersion,
    String podUid,
    String containerName,
    int lockHolderPid,
    long lockHolderSinceNanos,
    List<ExtensionDevice> devices) {
  /** Copies the device list and checks that indexes are {@code 0..n-1} in order. */
  public RegionExtension {
    Objects.requireNonNull(libVersion, "libVersion");
    Objects.requireNonNull(podUid, "podUid");
    Objects.requireNonNull(containerName, "containerName");
    devices = List.copyOf(devices);
    if (devices.size() > RegionFile.MAX_DEVICES) {
      throw new IllegalArgumentException("at most 16 devices, got " + devices.size());
    }
    for (int i = 0; i < devices.size(); i++) {
      if (devices.get(i).index() != i) {
        throw new IllegalArgumentException(
            "devices must be indexed 0..n-1 in order; position "
                + i
                + " has index "
                + devices.get(i).index());
      }
    }
  }
}

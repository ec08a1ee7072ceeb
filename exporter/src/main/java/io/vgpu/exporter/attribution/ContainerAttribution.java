package io.vgpu.exporter.attribution;

import io.vgpu.exporter.discovery.ContainerKey;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * One container, reconciled.
 *
 * @param key pod UID and container name
 * @param devices per device, in region order
 * @param slots the verdict on every live slot
 * @param hostPids host pids attributed to the container (live slots and unslotted GPU processes)
 * @param unslottedProcesses GPU processes of the container without a region slot (library bypassed)
 * @param utilizationSwitch the region's {@code utilization_switch} (max over files)
 * @param recentKernel the region's {@code recent_kernel} (min over files: negative = blocked)
 * @param priority the region's {@code priority}
 * @param memoryIdleSeconds how long the container has held device memory without a kernel (0 when
 *     it holds none; counted from when the exporter first saw it if no kernel was ever reported)
 * @param leakSuspected {@code memoryIdleSeconds} reached the configured leak threshold
 * @param priorityBlockedSeconds total time seen blocked by priority (recent_kernel < 0)
 * @param overSmLimitSeconds total time seen above the SM limit, by device index
 */
public record ContainerAttribution(
    ContainerKey key,
    List<DeviceAttribution> devices,
    List<SlotVerdict> slots,
    List<Integer> hostPids,
    int unslottedProcesses,
    int utilizationSwitch,
    int recentKernel,
    int priority,
    Optional<Double> memoryIdleSeconds,
    boolean leakSuspected,
    double priorityBlockedSeconds,
    Map<Integer, Double> overSmLimitSeconds) {
  public ContainerAttribution {
    Objects.requireNonNull(key, "key");
    devices = List.copyOf(devices);
    slots = List.copyOf(slots);
    hostPids = List.copyOf(hostPids);
    Objects.requireNonNull(memoryIdleSeconds, "memoryIdleSeconds");
    overSmLimitSeconds = Map.copyOf(overSmLimitSeconds);
  }

  public boolean priorityBlocked() {
    return recentKernel < 0;
  }

  public long zombieSlots() {
    return slots.stream().filter(SlotVerdict::isZombie).count();
  }

  /** Live slots per mismatch reason (all reasons present, zeros included). */
  public Map<MismatchReason, Long> mismatches() {
    Map<MismatchReason, Long> out = new EnumMap<>(MismatchReason.class);
    for (MismatchReason r : MismatchReason.values()) {
      out.put(r, 0L);
    }
    for (SlotVerdict v : slots) {
      Optional<MismatchReason> r = v.mismatch();
      if (r.isPresent()) {
        out.put(r.get(), out.get(r.get()) + 1);
      }
    }
    return out;
  }

  public Optional<DeviceAttribution> device(int index, String uuid) {
    // A loop, not a stream: every scrape asks once per container and device.
    for (DeviceAttribution d : devices) {
      if (d.index() == index && d.uuid().equals(uuid)) {
        return Optional.of(d);
      }
    }
    return Optional.empty();
  }
}

package io.vgpu.exporter.attribution;

import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * What the reconciler concluded about one live slot.
 *
 * @param region the cache file
 * @param slotIndex position in {@code procs[]}
 * @param pid in-container pid the slot records
 * @param recordedHostPid the hostpid the slot records
 * @param hostPid the host pid resolved through /proc (empty when unresolved or a zombie)
 * @param mismatch why {@code recordedHostPid} is wrong, when it is
 * @param zombie why the slot belongs to no running process, when it does not
 * @param totalBytes sum of the slot's {@code used[].total}
 */
public record SlotVerdict(
    Path region,
    int slotIndex,
    int pid,
    int recordedHostPid,
    OptionalInt hostPid,
    Optional<MismatchReason> mismatch,
    Optional<ZombieReason> zombie,
    long totalBytes) {
  public SlotVerdict {
    Objects.requireNonNull(region, "region");
    Objects.requireNonNull(hostPid, "hostPid");
    Objects.requireNonNull(mismatch, "mismatch");
    Objects.requireNonNull(zombie, "zombie");
    if (zombie.isPresent() && hostPid.isPresent()) {
      throw new IllegalArgumentException("a zombie slot has no live host pid");
    }
  }

  /** Neither resolved nor a zombie: attribution for the container is incomplete. */
  public boolean unresolved() {
    return hostPid.isEmpty() && zombie.isEmpty();
  }

  public boolean isZombie() {
    return zombie.isPresent();
  }
}

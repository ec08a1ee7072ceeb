package io.vgpu.exporter.node;

import io.vgpu.regioncodec.RegionSnapshot;
import java.time.Duration;
import java.util.Optional;

/**
 * Who holds a region's slot-table lock according to the region: our extension's holder record when
 * present, else HAMi's {@code owner_pid}. Pids are container pids.
 *
 * @param containerPid the holder's pid inside the container
 * @param source {@code extension} or {@code owner_pid}
 * @param heldFor how long, when the extension recorded when it was taken
 */
public record LockHolder(int containerPid, String source, Optional<Duration> heldFor) {

  public static Optional<LockHolder> of(RegionSnapshot s, java.time.Instant now) {
    if (s.extension().isPresent() && s.extension().get().lockHolderPid() != 0) {
      var x = s.extension().get();
      Optional<Duration> held = Optional.empty();
      if (x.lockHolderSinceNanos() > 0) {
        long nowNanos = now.getEpochSecond() * 1_000_000_000L + now.getNano();
        held = Optional.of(Duration.ofNanos(Math.max(0, nowNanos - x.lockHolderSinceNanos())));
      }
      return Optional.of(new LockHolder(x.lockHolderPid(), "extension", held));
    }
    if (s.ownerPid() > 0 && s.ownerPid() <= Integer.MAX_VALUE) {
      return Optional.of(new LockHolder((int) s.ownerPid(), "owner_pid", Optional.empty()));
    }
    return Optional.empty();
  }
}

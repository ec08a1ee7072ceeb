package io.vgpu.exporter.attribution;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.node.SlotPolicy;
import io.vgpu.regioncodec.ProcessSlot;
import java.util.HashSet;
import java.util.Set;

/**
 * The slots the latest reconciliation found to be zombies (process gone or pid reused), as a {@link
 * SlotPolicy} that leaves them out of "used" memory and process counts. Created before the node
 * view that reads it and the {@link AttributionService} that updates it, so neither needs the other
 * to exist first. Thread-safe: one volatile immutable set, read inside scrapes without I/O.
 */
public final class ZombieSlots implements SlotPolicy {
  /** (container, in-container pid) of a zombie slot. */
  private record Key(ContainerKey container, int pid) {}

  private volatile Set<Key> zombies = Set.of();

  @Override
  public boolean counts(ContainerKey container, ProcessSlot slot) {
    return !zombies.contains(new Key(container, slot.pid()));
  }

  /** Replaces the set with the zombie slots of {@code result}. */
  void update(AttributionResult result) {
    Set<Key> z = new HashSet<>();
    for (ContainerAttribution c : result.containers()) {
      c.slots().stream()
          .filter(SlotVerdict::isZombie)
          .forEach(v -> z.add(new Key(c.key(), v.pid())));
    }
    zombies = Set.copyOf(z);
  }
}

package io.vgpu.exporter.node;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.regioncodec.ProcessSlot;

/**
 * Decides whether a live slot's memory and utilization count for its container. The default counts
 * every slot the codec reports as live (pid and status non-zero), as HAMi's monitor does; the
 * attribution layer installs one that excludes zombie slots (process gone or pid reused).
 * Implementations must be thread-safe and must not do I/O (they run inside a scrape).
 */
@FunctionalInterface
public interface SlotPolicy {
  SlotPolicy ALL_LIVE = (container, slot) -> true;

  boolean counts(ContainerKey container, ProcessSlot slot);
}

package io.vgpu.exporter.node;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.regioncodec.ProcessSlot;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The slot liveness of one evidence pass ({@link EvidencePass}), looked up by the slots a scrape
 * reads: the same {@link NodeEvidence#fateOf} the doctor's judgment prints, computed once per pass,
 * so {@code /metrics} renders the word {@code doctor}, {@code inspect}, the status page and {@code
 * /api/v1/containers} print. A lookup does no I/O (it runs inside a scrape). A slot the pass did
 * not see (it was written after the pass, or no pass ran yet) is {@link
 * NodeEvidence.SlotFate#UNKNOWN}: not judged, never guessed alive or gone. Immutable.
 */
public final class SlotFates {
  /** No evidence gathered: every slot is UNKNOWN. */
  public static final SlotFates NOT_JUDGED = new SlotFates(Map.of());

  /**
   * One slot as it was judged: the same bytes identify it in a later read (a slot reused by another
   * process records another pid, host pid or start time, so it misses and reads UNKNOWN).
   */
  private record Key(
      ContainerKey container, String regionFile, int pid, int recordedHostPid, long startTicks) {
    // Written out: a record's generated equals/hashCode go through method handles, which the
    // exporter's C1-only JIT does not inline, and every scrape looks up every slot.
    @Override
    public boolean equals(Object o) {
      return this == o
          || (o instanceof Key k
              && pid == k.pid
              && recordedHostPid == k.recordedHostPid
              && startTicks == k.startTicks
              && container.equals(k.container)
              && Objects.equals(regionFile, k.regionFile));
    }

    @Override
    public int hashCode() {
      int h = container.hashCode();
      h = 31 * h + Objects.hashCode(regionFile);
      h = 31 * h + pid;
      h = 31 * h + recordedHostPid;
      return 31 * h + Long.hashCode(startTicks);
    }
  }

  private final Map<Key, NodeEvidence.SlotFate> fates;

  private SlotFates(Map<Key, NodeEvidence.SlotFate> fates) {
    this.fates = Map.copyOf(fates);
  }

  /** The fate of every slot of every readable region of {@code evidence}. */
  public static SlotFates of(NodeEvidence evidence) {
    Map<Key, NodeEvidence.SlotFate> out = new HashMap<>();
    for (NodeEvidence.Container c : evidence.containers()) {
      for (NodeEvidence.Region r : c.regions()) {
        if (r.latest().isEmpty()) {
          continue;
        }
        for (ProcessSlot s : r.latest().get().processes()) {
          out.put(key(c.key(), fileName(r), s), evidence.fateOf(c, r, s));
        }
      }
    }
    return new SlotFates(out);
  }

  /**
   * The judged fate of {@code slot}, read from file {@code regionFile} (its name inside the
   * container directory) of {@code container}; UNKNOWN when this pass did not judge it.
   */
  public NodeEvidence.SlotFate fate(ContainerKey container, String regionFile, ProcessSlot slot) {
    return fates.getOrDefault(key(container, regionFile, slot), NodeEvidence.SlotFate.UNKNOWN);
  }

  /** Slots judged (tests). */
  public int size() {
    return fates.size();
  }

  private static Key key(ContainerKey container, String regionFile, ProcessSlot s) {
    return new Key(
        Objects.requireNonNull(container, "container"),
        regionFile,
        s.pid(),
        s.hostPid(),
        s.extension().map(e -> e.startTimeTicks()).orElse(0L));
  }

  private static String fileName(NodeEvidence.Region r) {
    return r.path().getFileName() == null ? "" : r.path().getFileName().toString();
  }
}

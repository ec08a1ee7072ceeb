package io.vgpu.exporter.doctor;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.node.LockHolder;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.regioncodec.ProcessSlot;
import io.vgpu.regioncodec.RegionSnapshot;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The one judgment of what the node's files and processes mean: whether a slot's process is alive,
 * whether a region can be read, who holds its slot-table lock, and each container's verdict. The
 * doctor's checks, {@code inspect}, {@code cleanup}/{@code unlock}, the status page and {@code
 * /api/v1/containers} all render these values; none of them judges on its own, so they cannot
 * disagree. Pure functions of {@link NodeEvidence} (and the doctor's findings on it).
 */
public final class Judgment {
  private Judgment() {}

  /** The word every surface prints for a slot's liveness. */
  public static String word(NodeEvidence.SlotFate fate) {
    return switch (fate) {
      case ALIVE -> "ALIVE";
      case GONE -> "GONE";
      case UNKNOWN -> "UNKNOWN";
    };
  }

  /**
   * One slot, judged.
   *
   * @param slot the slot as read
   * @param fate alive, gone, or cannot be told from here
   * @param process the live process behind it, when alive
   */
  public record Slot(
      ProcessSlot slot, NodeEvidence.SlotFate fate, Optional<NodeEvidence.PodProcess> process) {
    public Slot {
      Objects.requireNonNull(slot, "slot");
      Objects.requireNonNull(fate, "fate");
      Objects.requireNonNull(process, "process");
    }

    /** Alive, but the region records another host pid than the process has. */
    public boolean hostPidWrong() {
      return process.isPresent() && process.get().hostPid() != slot.hostPid();
    }

    /** ALIVE, WRONG-PID, GONE or UNKNOWN. */
    public String word() {
      return hostPidWrong() ? "WRONG-PID" : Judgment.word(fate);
    }
  }

  /** The state of a region's slot-table lock. */
  public enum LockState {
    /** Nobody holds it. */
    FREE("free"),
    /** A live process of the pod holds it. */
    HELD_LIVE("held by a live process"),
    /** The recorded holder is gone: the container's processes block on it. */
    HELD_DEAD("held by a process that is gone"),
    /**
     * HAMi-core's semaphore is down with no holder recorded in every sample (HAMi #2500's lost post
     * after a killed holder): the container's processes block on it. shrreg-tool calls it LOCKED.
     */
    TAKEN_NO_HOLDER("LOCKED with no holder recorded (HAMi #2500 lost post)");

    private final String says;

    LockState(String says) {
      this.says = says;
    }

    /** How the state reads in a sentence. */
    public String says() {
      return says;
    }

    /** Whether the container is stuck on this lock until someone releases it. */
    public boolean stuck() {
      return this == HELD_DEAD || this == TAKEN_NO_HOLDER;
    }
  }

  /**
   * One region's lock, judged.
   *
   * @param state the state
   * @param holder the recorded holder, when one is recorded
   * @param liveHolder the live process that is the holder, when alive
   */
  public record Lock(
      LockState state, Optional<LockHolder> holder, Optional<NodeEvidence.PodProcess> liveHolder) {
    public Lock {
      Objects.requireNonNull(state, "state");
      Objects.requireNonNull(holder, "holder");
      Objects.requireNonNull(liveHolder, "liveHolder");
    }

    /** One line: "free", "held by container pid 12 (ALIVE)", "held by container pid 12 (GONE)". */
    public String describe() {
      return switch (state) {
        case FREE -> "free";
        case HELD_LIVE ->
            "held by container pid " + holder.orElseThrow().containerPid() + " (ALIVE)";
        case HELD_DEAD ->
            "held by container pid " + holder.orElseThrow().containerPid() + " (GONE)";
        case TAKEN_NO_HOLDER -> state.says();
      };
    }
  }

  /**
   * One region, judged.
   *
   * @param region the evidence
   * @param unreadable the codec's reason word when it cannot be read (then no lock and no slots)
   * @param lock its lock, when readable
   * @param slots its live slots, when readable
   */
  public record Region(
      NodeEvidence.Region region,
      Optional<String> unreadable,
      Optional<Lock> lock,
      List<Slot> slots) {
    public Region {
      Objects.requireNonNull(region, "region");
      Objects.requireNonNull(unreadable, "unreadable");
      Objects.requireNonNull(lock, "lock");
      slots = List.copyOf(slots);
    }

    /** The latest readable sample. */
    public Optional<RegionSnapshot> snapshot() {
      return region.latest();
    }

    /** Slots with this fate. */
    public long count(NodeEvidence.SlotFate fate) {
      return slots.stream().filter(s -> s.fate() == fate).count();
    }
  }

  /** A slot's fate and live process. */
  public static Slot slot(
      NodeEvidence e, NodeEvidence.Container c, NodeEvidence.Region r, ProcessSlot s) {
    Optional<NodeEvidence.PodProcess> p = e.processOfSlot(c, r, s);
    return new Slot(s, p.isPresent() ? NodeEvidence.SlotFate.ALIVE : e.fateOf(c, r, s), p);
  }

  /** The lock of a readable region. */
  public static Lock lock(NodeEvidence e, NodeEvidence.Container c, NodeEvidence.Region r) {
    RegionSnapshot s = r.latest().orElseThrow();
    Optional<LockHolder> holder = LockHolder.of(s, e.now());
    if (holder.isPresent()) {
      Optional<NodeEvidence.PodProcess> live =
          e.processOfContainerPid(c, r, holder.get().containerPid());
      return new Lock(live.isPresent() ? LockState.HELD_LIVE : LockState.HELD_DEAD, holder, live);
    }
    return new Lock(
        r.semaphoreTakenThroughout() ? LockState.TAKEN_NO_HOLDER : LockState.FREE,
        Optional.empty(),
        Optional.empty());
  }

  /** A region: its health, lock and slots. */
  public static Region region(NodeEvidence e, NodeEvidence.Container c, NodeEvidence.Region r) {
    Optional<String> unreadable = r.unreadableReason();
    if (unreadable.isPresent()) {
      return new Region(r, unreadable, Optional.empty(), List.of());
    }
    List<Slot> slots = new ArrayList<>();
    for (ProcessSlot s : r.latest().orElseThrow().processes()) {
      slots.add(slot(e, c, r, s));
    }
    return new Region(r, Optional.empty(), Optional.of(lock(e, c, r)), slots);
  }

  /**
   * One container, judged: its regions and the doctor's verdict about it.
   *
   * @param key pod UID and container name
   * @param regions each cache file, judged
   * @param verdict the worst finding about the container or its pod (OK when none)
   * @param findings every finding about the container or its pod
   */
  public record Container(
      ContainerKey key, List<Region> regions, Severity verdict, List<Finding> findings) {
    public Container {
      Objects.requireNonNull(key, "key");
      regions = List.copyOf(regions);
      Objects.requireNonNull(verdict, "verdict");
      findings = List.copyOf(findings);
    }

    /** WARN and FAIL findings, worst first (then by check number). */
    public List<Finding> problems() {
      return findings.stream()
          .filter(f -> f.severity() == Severity.WARN || f.severity() == Severity.FAIL)
          .sorted(
              java.util.Comparator.comparingInt((Finding f) -> -f.severity().exitCode())
                  .thenComparingInt(Finding::check))
          .toList();
    }

    /** Slots with this fate over all regions. */
    public long count(NodeEvidence.SlotFate fate) {
      return regions.stream().mapToLong(r -> r.count(fate)).sum();
    }

    /** Live slots whose recorded host pid is wrong. */
    public long wrongHostPids() {
      return regions.stream().flatMap(r -> r.slots().stream()).filter(Slot::hostPidWrong).count();
    }

    /** Slots over all regions. */
    public long slots() {
      return regions.stream().mapToLong(r -> r.slots().size()).sum();
    }

    /** "2 ALIVE, 1 GONE" style count of the slots; "no processes" when none. */
    public String processes() {
      if (slots() == 0) {
        return "no processes";
      }
      List<String> parts = new ArrayList<>();
      for (NodeEvidence.SlotFate f : NodeEvidence.SlotFate.values()) {
        long n = count(f);
        if (n > 0) {
          parts.add(n + " " + word(f));
        }
      }
      long wrong = wrongHostPids();
      if (wrong > 0) {
        parts.add(wrong + " WRONG-PID");
      }
      return String.join(", ", parts);
    }

    /**
     * The one-line summary shown before the details: "uid_ctr: 2 ALIVE, 1 GONE; 2 problem(s),
     * first: zombie-slots ...".
     */
    public String summary() {
      List<Finding> p = problems();
      return key.dirName()
          + ": "
          + processes()
          + (p.isEmpty()
              ? ""
              : "; "
                  + p.size()
                  + " problem(s), first: "
                  + p.getFirst().id()
                  + " "
                  + p.getFirst().summary());
    }
  }

  /** Whether finding {@code f} is about container {@code key} or its pod. */
  public static boolean about(Finding f, ContainerKey key) {
    String dir = key.dirName();
    return f.subject().equals(dir)
        || f.subject().startsWith(dir + " ")
        || f.subject().equals(Checks.pod(key.podUid()));
  }

  /** The worst severity among {@code findings} (OK when none). */
  public static Severity worst(List<Finding> findings) {
    Severity w = Severity.OK;
    for (Finding f : findings) {
      if (f.severity().exitCode() > w.exitCode()) {
        w = f.severity();
      }
    }
    return w;
  }

  /** One container of the evidence, with the report's verdict about it. */
  public static Container container(
      NodeEvidence e, NodeEvidence.Container c, List<Finding> findings) {
    List<Region> regions = new ArrayList<>();
    for (NodeEvidence.Region r : c.regions()) {
      regions.add(region(e, c, r));
    }
    List<Finding> mine = findings.stream().filter(f -> about(f, c.key())).toList();
    return new Container(c.key(), regions, worst(mine), mine);
  }

  /** Every container of the evidence, in the evidence's order. */
  public static Map<ContainerKey, Container> containers(NodeEvidence e, List<Finding> findings) {
    Map<ContainerKey, Container> out = new LinkedHashMap<>();
    for (NodeEvidence.Container c : e.containers()) {
      out.put(c.key(), container(e, c, findings));
    }
    return out;
  }
}

package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.LockHolder;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.text.TenantText;
import io.vgpu.regioncodec.ProcessSlot;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * What {@code cleanup} and {@code unlock} would do, judged from the node (a slot or lock holder is
 * dead when no process of its pod that maps the region has that pid innermost), and how it is
 * applied: by {@code shrreg-tool}, which takes the region's slot-table lock (libvgpu's record lock
 * and HAMi-core's semaphore) and frees exactly the judged slots ({@code --pids}) or releases
 * exactly the judged holder ({@code --holder}). One implementation of the writes, in C, for both
 * sides of the container boundary.
 *
 * @param actions one per region that needs a change
 * @param skipped regions that could not be judged, with why
 */
public record RepairPlan(List<Action> actions, List<String> skipped) {
  public RepairPlan {
    actions = List.copyOf(actions);
    skipped = List.copyOf(skipped);
  }

  /** What to do to one region. */
  public enum Kind {
    /** Free the slots of dead processes. */
    CLEANUP,
    /** Release a slot-table lock whose holder is dead. */
    UNLOCK
  }

  /**
   * One change.
   *
   * @param kind cleanup or unlock
   * @param file the region
   * @param subject {@code <podUID>_<container>}
   * @param pids the dead slots' container pids (cleanup) or the dead holder (unlock)
   * @param slotGuards per dead slot {@code pid:hostpid[:startTicks]} as judged, so shrreg-tool
   *     frees a slot only if no new process re-registered it meanwhile (cleanup only)
   * @param details one line per slot or holder
   * @param expectInode {@code DEV:INO} of the file that was judged (from the descriptor it was read
   *     through): shrreg-tool acts only on that very file, singly linked and reached without a
   *     link, and exits {@link #WRONG_FILE_EXIT} otherwise
   */
  public record Action(
      Kind kind,
      Path file,
      String subject,
      List<Integer> pids,
      List<String> slotGuards,
      List<String> details,
      String expectInode) {
    public Action {
      java.util.Objects.requireNonNull(expectInode, "expectInode");
      pids = List.copyOf(pids);
      slotGuards = List.copyOf(slotGuards);
      details = List.copyOf(details);
    }

    /** The shrreg-tool arguments that apply this action. */
    public List<String> toolArgs() {
      List<String> a =
          new ArrayList<>(
              List.of("--file", file.toString(), "--expect-inode", expectInode, "--json"));
      if (kind == Kind.CLEANUP) {
        a.add("--cleanup");
        a.add("--pids");
        a.add(String.join(",", slotGuards));
      } else {
        a.add("--force-unlock");
        if (!pids.isEmpty()) {
          // A recorded holder judged gone; without one (a semaphore taken with no holder),
          // shrreg-tool watches the lock itself and releases it only if it stays so.
          a.add("--holder");
          a.add(Integer.toString(pids.getFirst()));
        }
      }
      return a;
    }
  }

  /**
   * Slots judged GONE in every readable region ({@link Judgment#region}); UNKNOWN slots are kept,
   * and a region whose lock is stuck is left for {@code unlock} first (shrreg-tool could not take
   * the lock to free anything).
   */
  public static RepairPlan cleanup(NodeEvidence e) {
    List<Action> actions = new ArrayList<>();
    List<String> skipped = new ArrayList<>();
    for (NodeEvidence.Container c : e.containers()) {
      for (NodeEvidence.Region r : c.regions()) {
        Optional<Judgment.Region> actionable = actionable(e, c, r, "its processes", skipped);
        if (actionable.isEmpty()) {
          continue;
        }
        Judgment.Region judged = actionable.get();
        List<Integer> pids = new ArrayList<>();
        List<String> guards = new ArrayList<>();
        List<String> details = new ArrayList<>();
        for (Judgment.Slot j : judged.slots()) {
          ProcessSlot s = j.slot();
          if (j.fate() == NodeEvidence.SlotFate.UNKNOWN) {
            skipped.add(
                r.path()
                    + ": slot "
                    + s.slotIndex()
                    + " (pid "
                    + s.pid()
                    + ") UNKNOWN: cannot be judged here; kept");
          } else if (j.fate() == NodeEvidence.SlotFate.GONE) {
            pids.add(s.pid());
            guards.add(
                s.pid()
                    + ":"
                    + s.hostPid()
                    + s.extension()
                        .filter(x -> x.startTimeTicks() > 0)
                        .map(x -> ":" + x.startTimeTicks())
                        .orElse(""));
            details.add(
                "slot "
                    + s.slotIndex()
                    + ": container pid "
                    + s.pid()
                    + " GONE, holds "
                    + Checks.mib(s.totalBytes()));
          }
        }
        if (pids.isEmpty()) {
          continue;
        }
        Judgment.Lock lock = judged.lock().orElseThrow();
        if (lock.state().stuck()) {
          skipped.add(
              r.path()
                  + ": "
                  + pids.size()
                  + " GONE slot(s) kept: the lock is "
                  + lock.describe()
                  + "; run `unlock` first");
          continue;
        }
        actions.add(
            new Action(
                Kind.CLEANUP,
                r.path(),
                Checks.container(c),
                pids,
                guards,
                details,
                r.deviceAndInode().get()));
      }
    }
    return new RepairPlan(actions, skipped);
  }

  /**
   * Locks judged stuck ({@link Judgment#lock}): held by a holder that is GONE, or taken with no
   * holder recorded. A live holder's lock is never touched.
   */
  public static RepairPlan unlock(NodeEvidence e) {
    List<Action> actions = new ArrayList<>();
    List<String> skipped = new ArrayList<>();
    for (NodeEvidence.Container c : e.containers()) {
      for (NodeEvidence.Region r : c.regions()) {
        Optional<Judgment.Region> actionable = actionable(e, c, r, "its lock holder", skipped);
        if (actionable.isEmpty()) {
          continue;
        }
        Judgment.Region judged = actionable.get();
        Judgment.Lock lock = judged.lock().orElseThrow();
        switch (lock.state()) {
          case FREE -> {}
          case HELD_LIVE ->
              skipped.add(
                  r.path() + ": lock " + lock.describe() + ": the holder is alive; not touched");
          case HELD_DEAD -> {
            LockHolder h = lock.holder().orElseThrow();
            actions.add(
                new Action(
                    Kind.UNLOCK,
                    r.path(),
                    Checks.container(c),
                    List.of(h.containerPid()),
                    List.of(),
                    List.of(
                        "lock holder container pid "
                            + h.containerPid()
                            + " (from "
                            + h.source()
                            + ") is GONE"),
                    r.deviceAndInode().get()));
          }
          case TAKEN_NO_HOLDER ->
              actions.add(
                  new Action(
                      Kind.UNLOCK,
                      r.path(),
                      Checks.container(c),
                      List.of(),
                      List.of(),
                      List.of("lock " + lock.describe()),
                      r.deviceAndInode().get()));
        }
      }
    }
    return new RepairPlan(actions, skipped);
  }

  /**
   * Result of running one action.
   *
   * @param action what ran
   * @param exitCode shrreg-tool's exit code (-1 when it could not be started)
   * @param output its stdout and stderr
   */
  public record Outcome(Action action, int exitCode, String output) {
    /** What the exit code means, for the report. */
    public String meaning() {
      return switch (exitCode) {
        case WRONG_FILE_EXIT ->
            "nothing changed: the path no longer names the file that was judged (replaced, a"
                + " link, hard-linked or not a regular file); run the command again to judge anew";
        case BAD_SEMAPHORE_EXIT ->
            "nothing changed: the region's slot-table semaphore is not a usable semaphore"
                + " (overwritten by the tenant, or a library of another layout); its processes"
                + " cannot lock it either: recreate the pod (a new pod gets a new region)";
        default -> "";
      };
    }
  }

  /**
   * shrreg-tool's exit code when the region's slot-table semaphore is not a usable semaphore (a
   * tenant overwrote it): it validated it before use and changed nothing.
   */
  public static final int BAD_SEMAPHORE_EXIT = 11;

  /**
   * shrreg-tool's exit code when {@code --expect-inode} does not match what the path opens to
   * without following links: it changed nothing.
   */
  public static final int WRONG_FILE_EXIT = 10;

  /** Applies every action with the given shrreg-tool. */
  public List<Outcome> apply(Path tool) {
    List<Outcome> out = new ArrayList<>();
    for (Action a : actions) {
      List<String> cmd = new ArrayList<>();
      cmd.add(tool.toString());
      cmd.addAll(a.toolArgs());
      try {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        p.getOutputStream().close();
        String text = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
          p.destroyForcibly();
          out.add(new Outcome(a, -1, "timed out"));
          continue;
        }
        out.add(new Outcome(a, p.exitValue(), text.strip()));
      } catch (IOException e) {
        out.add(new Outcome(a, -1, "cannot run " + tool + ": " + e.getMessage()));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        out.add(new Outcome(a, -1, "interrupted"));
        break;
      }
    }
    return out;
  }

  /** JSON model of the plan (and outcomes when applied). */
  public Map<String, Object> model(boolean applied, List<Outcome> outcomes) {
    Map<String, Object> root = new LinkedHashMap<>();
    root.put("dry_run", !applied);
    List<Object> list = new ArrayList<>();
    for (Action a : actions) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("kind", a.kind().name().toLowerCase(java.util.Locale.ROOT));
      m.put("file", a.file().toString());
      m.put("subject", a.subject());
      m.put("pids", a.pids());
      m.put("details", a.details());
      m.put("command", "shrreg-tool " + String.join(" ", a.toolArgs()));
      outcomes.stream()
          .filter(o -> o.action().equals(a))
          .findFirst()
          .ifPresent(
              o -> {
                m.put("exit_code", o.exitCode());
                m.put("output", o.output());
                if (!o.meaning().isEmpty()) {
                  m.put("meaning", o.meaning());
                }
              });
      list.add(m);
    }
    root.put("actions", list);
    root.put("skipped", skipped);
    return root;
  }

  /**
   * The region judged, when a repair can act on it; otherwise empty, with why in {@code skipped}:
   * unreadable (the judgment's reason word and the reader's own detail, e.g. that a sparse file
   * kept its size on a full filesystem, cleaned for a terminal) or its inode unknown, so {@code
   * whose} (its processes, its lock holder) cannot be matched to it.
   */
  private static Optional<Judgment.Region> actionable(
      NodeEvidence e,
      NodeEvidence.Container c,
      NodeEvidence.Region r,
      String whose,
      List<String> skipped) {
    Judgment.Region judged = Judgment.region(e, c, r);
    if (judged.unreadable().isPresent()) {
      skipped.add(
          r.path()
              + ": FAIL unreadable ("
              + judged.unreadable().get()
              + ")"
              + r.error().map(d -> ": " + TenantText.clean(d)).orElse(""));
      return Optional.empty();
    }
    if (r.deviceAndInode().isEmpty()) {
      skipped.add(r.path() + ": inode unknown, " + whose + " cannot be matched");
      return Optional.empty();
    }
    return Optional.of(judged);
  }
}

package io.vgpu.exporter.node;

import java.util.EnumMap;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The bytes of {@code maps} one evidence pass may read, over all pod processes and per pod (tenants
 * control how large their processes' maps are). One tenant cannot spend the whole pass: each pod
 * has its own share, and the pass reads pods round-robin (every pod's first process before any
 * pod's second). What a pass did not read whole is counted by reason, and its pod is "not fully
 * seen": a slot there that matches no seen process is UNKNOWN, never GONE. Not thread-safe (one
 * pass).
 */
final class MapsBudget {
  /** Why a pod process was not seen whole. */
  enum Shortfall {
    /** The pass's budget was spent before or inside its maps. */
    PASS_BUDGET("pass_budget"),
    /** Its pod's share was spent before or inside its maps. */
    POD_BUDGET("pod_budget"),
    /** Its maps alone are larger than one process's bound. */
    MAPS_TOO_LARGE("maps_too_large"),
    /** Its maps could not be read (another uid without CAP_SYS_PTRACE, exited mid-read). */
    UNREADABLE("unreadable"),
    /** Its read did not finish within the per-file deadline. */
    DEADLINE("deadline");

    private final String label;

    Shortfall(String label) {
      this.label = label;
    }

    /** The {@code reason} label value. */
    String label() {
      return label;
    }
  }

  private final int perProcess;
  private final long perPod;
  private long passLeft;
  private final Map<String, Long> podSpent = new HashMap<>();
  private final EnumMap<Shortfall, Integer> shortfalls = new EnumMap<>(Shortfall.class);
  private final Set<String> notFullySeen = new TreeSet<>();

  MapsBudget(long perPass, long perPod, int perProcess) {
    this.passLeft = perPass;
    this.perPod = perPod;
    this.perProcess = perProcess;
  }

  /** The most bytes the next read of a {@code pod} process may take (0: none left). */
  int bound(String pod) {
    long podLeft = perPod - podSpent.getOrDefault(pod, 0L);
    return (int) Math.max(0, Math.min(perProcess, Math.min(passLeft, podLeft)));
  }

  /** Why a read bounded by {@code bound} for {@code pod} stopped short (or could not start). */
  Shortfall limitOf(String pod, int bound) {
    long podLeft = perPod - podSpent.getOrDefault(pod, 0L);
    if (bound >= perProcess) {
      return Shortfall.MAPS_TOO_LARGE;
    }
    return podLeft <= passLeft ? Shortfall.POD_BUDGET : Shortfall.PASS_BUDGET;
  }

  /** Charges a read of {@code bytes} to the pass and the pod. */
  void spend(String pod, int bytes) {
    passLeft = Math.max(0, passLeft - bytes);
    podSpent.merge(pod, (long) bytes, Long::sum);
  }

  /** Records a process of {@code pod} not seen whole. */
  void shortfall(String pod, Shortfall why) {
    shortfalls.merge(why, 1, Integer::sum);
    notFullySeen.add(pod);
  }

  /** Processes not seen whole, by reason (reasons with none absent). */
  Map<Shortfall, Integer> shortfalls() {
    return Map.copyOf(shortfalls);
  }

  /** Pods with a process not seen whole. */
  Set<String> notFullySeen() {
    return Set.copyOf(notFullySeen);
  }
}

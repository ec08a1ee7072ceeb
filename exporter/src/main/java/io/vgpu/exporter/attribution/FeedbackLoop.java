package io.vgpu.exporter.attribution;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.Set;

/**
 * HAMi's monitor feedback loop ({@code feedback.go}), as a pure decision over the regions of a
 * node. Run it every 5 s, as HAMi does:
 *
 * <ol>
 *   <li>Activity decay: a region with {@code recent_kernel > 0} gets it decremented; if still above
 *       0 the container counts as active, at its {@code priority} (0 = highest), on each of its GPU
 *       uuids. libvgpu sets {@code recent_kernel = 2} on every limited launch, so "active" means
 *       "launched kernels in the last 5-10 s".
 *   <li>Blocking: a container sharing a GPU with an active container of strictly higher priority
 *       (lower number) gets {@code recent_kernel = -1}, which makes libvgpu's launch path sleep
 *       until it is non-negative again; otherwise a negative value is reset to 0.
 *   <li>Switch: {@code utilization_switch = 1} (enforce the SM limit) when a higher priority is
 *       active on a shared GPU or more than one container of its own priority is (itself included),
 *       else 0: a container alone on its GPU runs unthrottled.
 * </ol>
 *
 * <p>What a region says is the tenant's: its caller ({@link AttributionService}) hands in only
 * regions with a live process of the region's own pod and only the uuids NVML shows that pod's
 * processes on, and this class reads priority and {@code recent_kernel} within their valid ranges.
 * So a tenant can block another pod only by really running, at a higher priority, on a GPU that pod
 * really shares: HAMi's rule, not a forged region's.
 *
 * <p>Only changed values are returned as writes. Stateless and thread safe.
 */
public final class FeedbackLoop {
  private FeedbackLoop() {}

  /**
   * One region as the loop sees it.
   *
   * @param region the cache file
   * @param priority {@code priority}
   * @param recentKernel {@code recent_kernel}
   * @param utilizationSwitch {@code utilization_switch}
   * @param uuids the region's non-empty device uuids
   */
  public record Input(
      Path region, int priority, int recentKernel, int utilizationSwitch, Set<String> uuids) {
    public Input {
      Objects.requireNonNull(region, "region");
      uuids = Set.copyOf(uuids);
    }
  }

  /**
   * The writes for one region; empty values mean "leave as is".
   *
   * @param region the cache file
   * @param recentKernel new {@code recent_kernel}
   * @param utilizationSwitch new {@code utilization_switch}
   * @param blocked whether the region is blocked by a higher priority after the write
   */
  public record Decision(
      Path region, OptionalInt recentKernel, OptionalInt utilizationSwitch, boolean blocked) {
    public Decision {
      Objects.requireNonNull(region, "region");
      Objects.requireNonNull(recentKernel, "recentKernel");
      Objects.requireNonNull(utilizationSwitch, "utilizationSwitch");
    }

    public boolean writes() {
      return recentKernel.isPresent() || utilizationSwitch.isPresent();
    }
  }

  /** The highest priority (lowest number) HAMi defines; a lower value is read as this. */
  public static final int HIGHEST_PRIORITY = 0;

  /** The largest {@code recent_kernel} anyone writes legitimately (libvgpu, on each launch). */
  public static final int MAX_RECENT_KERNEL = 2;

  /** The smallest: the monitor's "blocked by a higher priority". */
  public static final int MIN_RECENT_KERNEL = -1;

  /**
   * The priority the loop acts on: the region's, never above {@link #HIGHEST_PRIORITY}. A tenant
   * writes its own region, so {@code priority = -2147483648} must not outrank every honest 0.
   */
  public static int effectivePriority(int priority) {
    return Math.max(HIGHEST_PRIORITY, priority);
  }

  /**
   * The {@code recent_kernel} the loop acts on, within what libvgpu and the monitor write: a value
   * of 2147483647 would otherwise count as "active" for 340 years of 5 s decrements.
   */
  public static int effectiveRecentKernel(int recentKernel) {
    return Math.clamp(recentKernel, MIN_RECENT_KERNEL, MAX_RECENT_KERNEL);
  }

  /**
   * The decisions for every input, in input order. Priorities and {@code recent_kernel} are read
   * through {@link #effectivePriority} and {@link #effectiveRecentKernel}; a value out of range is
   * rewritten to the decided one.
   */
  public static List<Decision> decide(List<Input> inputs) {
    int[] decayed = new int[inputs.size()];
    Map<String, Map<Integer, Integer>> active = new HashMap<>();
    for (int i = 0; i < inputs.size(); i++) {
      Input in = inputs.get(i);
      int recent = effectiveRecentKernel(in.recentKernel());
      decayed[i] = recent > 0 ? recent - 1 : recent;
      if (decayed[i] > 0) {
        for (String uuid : in.uuids()) {
          active
              .computeIfAbsent(uuid, u -> new HashMap<>())
              .merge(effectivePriority(in.priority()), 1, Integer::sum);
        }
      }
    }
    List<Decision> out = new ArrayList<>(inputs.size());
    for (int i = 0; i < inputs.size(); i++) {
      Input in = inputs.get(i);
      int priority = effectivePriority(in.priority());
      boolean higherActive = false;
      boolean samePriorityContention = false;
      for (String uuid : in.uuids()) {
        Map<Integer, Integer> byPriority = active.getOrDefault(uuid, Map.of());
        for (Map.Entry<Integer, Integer> e : byPriority.entrySet()) {
          if (e.getKey() < priority && e.getValue() > 0) {
            higherActive = true;
          }
        }
        if (byPriority.getOrDefault(priority, 0) > 1) {
          samePriorityContention = true;
        }
      }
      int recentKernel = higherActive ? -1 : (decayed[i] < 0 ? 0 : decayed[i]);
      int utilizationSwitch = higherActive || samePriorityContention ? 1 : 0;
      out.add(
          new Decision(
              in.region(),
              recentKernel != in.recentKernel()
                  ? OptionalInt.of(recentKernel)
                  : OptionalInt.empty(),
              utilizationSwitch != in.utilizationSwitch()
                  ? OptionalInt.of(utilizationSwitch)
                  : OptionalInt.empty(),
              higherActive));
    }
    return out;
  }
}

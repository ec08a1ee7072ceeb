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

  /** The decisions for every input, in input order. */
  public static List<Decision> decide(List<Input> inputs) {
    int[] decayed = new int[inputs.size()];
    Map<String, Map<Integer, Integer>> active = new HashMap<>();
    for (int i = 0; i < inputs.size(); i++) {
      Input in = inputs.get(i);
      decayed[i] = in.recentKernel() > 0 ? in.recentKernel() - 1 : in.recentKernel();
      if (decayed[i] > 0) {
        for (String uuid : in.uuids()) {
          active.computeIfAbsent(uuid, u -> new HashMap<>()).merge(in.priority(), 1, Integer::sum);
        }
      }
    }
    List<Decision> out = new ArrayList<>(inputs.size());
    for (int i = 0; i < inputs.size(); i++) {
      Input in = inputs.get(i);
      boolean higherActive = false;
      boolean samePriorityContention = false;
      for (String uuid : in.uuids()) {
        Map<Integer, Integer> byPriority = active.getOrDefault(uuid, Map.of());
        for (Map.Entry<Integer, Integer> e : byPriority.entrySet()) {
          if (e.getKey() < in.priority() && e.getValue() > 0) {
            higherActive = true;
          }
        }
        if (byPriority.getOrDefault(in.priority(), 0) > 1) {
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

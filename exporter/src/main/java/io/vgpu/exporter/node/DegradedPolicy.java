package io.vgpu.exporter.node;

import io.vgpu.exporter.discovery.DegradedMark;
import io.vgpu.regioncodec.ProcessSlot;
import io.vgpu.regioncodec.RegionSnapshot;
import java.util.ArrayList;
import java.util.List;

/**
 * Which of a container's {@code .degraded} side files still describe a running process. libvgpu
 * writes the file when a process degrades and never removes it, so a file outlives its process; it
 * is reported only until something shows that process is gone or the region works again:
 *
 * <ul>
 *   <li>the pod finished or is gone: nothing runs any more;
 *   <li>the recorded pid holds a live slot of the container's region: a degraded process stays
 *       degraded (and unregistered) until it exits, so that pid now belongs to a process that
 *       registered, and the degraded one is gone;
 *   <li>a readable libvgpu region of the container was created after the recorded time: the cause
 *       at the cache path was fixed and the region has been shared since (a process degrading again
 *       rewrites the file with a later time).
 * </ul>
 *
 * A malformed file is reported (as {@code malformed}) while the pod runs: it says nothing reliable,
 * so only the first rule applies.
 */
public final class DegradedPolicy {
  private DegradedPolicy() {}

  static List<DegradedMark> current(
      List<DegradedMark> marks, List<RegionSnapshot> regions, boolean podDone) {
    if (podDone || marks.isEmpty()) {
      return List.of();
    }
    List<DegradedMark> out = new ArrayList<>();
    for (DegradedMark m : marks) {
      if (m.malformed() || !superseded(m, regions)) {
        out.add(m);
      }
    }
    return out;
  }

  /**
   * Whether a well-formed mark is proven old by the container's regions (its pid holds a live slot,
   * or a libvgpu region was created after it).
   */
  public static boolean superseded(DegradedMark m, List<RegionSnapshot> regions) {
    for (RegionSnapshot s : regions) {
      for (ProcessSlot slot : s.processes()) {
        if (slot.pid() == m.pid()) {
          return true;
        }
      }
      if (s.extension().isPresent()
          && s.extension().get().createdNanos() / 1_000_000_000L > m.epochSeconds()) {
        return true;
      }
    }
    return false;
  }
}

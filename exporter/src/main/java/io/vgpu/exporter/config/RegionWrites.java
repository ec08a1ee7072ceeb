package io.vgpu.exporter.config;

import java.util.ArrayList;
import java.util.List;

/**
 * What the exporter writes on the node under a configuration, one entry per enabled writer with the
 * fields it changes. Empty when the exporter only reads. The start-up log, {@code /readyz} and the
 * status page all print this one list, so an operator never has to infer writes from flags.
 *
 * @param writers one line each: the flag that turned it on and what it writes
 */
public record RegionWrites(List<String> writers) {
  public RegionWrites {
    writers = List.copyOf(writers);
  }

  /** The writers {@code config} turns on. */
  public static RegionWrites of(ExporterConfig config) {
    List<String> out = new ArrayList<>();
    if (config.get(Flags.ATTRIBUTION_FEEDBACK)) {
      out.add(
          "--"
              + Flags.ATTRIBUTION_FEEDBACK.name()
              + ": writes recent_kernel and utilization_switch in the regions of pods with live"
              + " GPU processes (HAMi monitor's priority blocking)");
    }
    if (config.get(Flags.ATTRIBUTION_REPAIR_HOSTPID)) {
      out.add(
          "--"
              + Flags.ATTRIBUTION_REPAIR_HOSTPID.name()
              + ": writes the hostpid field of slots whose recorded host pid is wrong");
    }
    if (config.get(Flags.STALE_REMOVE)) {
      out.add(
          "--"
              + Flags.STALE_REMOVE.name()
              + ": deletes cache directories of pods gone longer than --"
              + Flags.STALE_GRACE_PERIOD.name());
    }
    return new RegionWrites(out);
  }

  /** Whether anything is written. */
  public boolean any() {
    return !writers.isEmpty();
  }

  /** One line: "read-only" or "writes: a; b". */
  public String summary() {
    return any() ? "writes: " + String.join("; ", writers) : "read-only (writes nothing)";
  }
}

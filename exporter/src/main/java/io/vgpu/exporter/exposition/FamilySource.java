package io.vgpu.exporter.exposition;

import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

/** Collects the families of one render, in exposition order (by name, as client_java orders). */
@FunctionalInterface
public interface FamilySource {
  /**
   * @throws UnsupportedFamilyException when the page holds something only client_java's writers
   *     write (the scrape then goes to client_java's handler)
   */
  List<? extends Family> families() throws UnsupportedFamilyException;

  /** Families of client_java snapshots (a registry's scrape, tests). */
  static FamilySource of(Supplier<MetricSnapshots> snapshots) {
    return () -> {
      MetricSnapshots s = snapshots.get();
      List<Family> out = new ArrayList<>(s.size());
      for (MetricSnapshot m : s) {
        out.add(Family.of(m));
      }
      return out;
    };
  }
}

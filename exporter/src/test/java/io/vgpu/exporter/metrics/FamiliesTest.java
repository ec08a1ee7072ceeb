package io.vgpu.exporter.metrics;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.prometheus.metrics.model.snapshots.DuplicateLabelsException;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.exposition.Family;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * A built family's points are in client_java's order and distinct, whatever order they were added
 * in and whatever the family's last build remembered: the render path writes them as they are,
 * without client_java sorting or validating them again.
 */
class FamiliesTest {
  private record Point(Labels labels, double value) {}

  @Provide
  Arbitrary<List<Labels>> labelSets() {
    Arbitrary<Labels> one =
        Arbitraries.of("a", "b", "", "a b", "ä")
            .list()
            .ofSize(3)
            .map(v -> Labels.of("container", v.get(0), "device", v.get(1), "pod", v.get(2)));
    return one.list().ofMinSize(0).ofMaxSize(40).uniqueElements();
  }

  /** The points of {@code f} as (labels, value) pairs. */
  private static List<Point> points(Family f) {
    List<Point> out = new ArrayList<>();
    for (int i = 0; i < f.size(); i++) {
      out.add(new Point(f.labels(i), f.value(i)));
    }
    return out;
  }

  private static List<Point> clientJavaOrder(List<Point> added) {
    List<GaugeSnapshot.GaugeDataPointSnapshot> ps = new ArrayList<>();
    for (Point p : added) {
      ps.add(new GaugeSnapshot.GaugeDataPointSnapshot(p.value(), p.labels(), null));
    }
    List<Point> out = new ArrayList<>();
    for (var p : new GaugeSnapshot(Families.metadata("g", "help"), ps).getDataPoints()) {
      out.add(new Point(p.getLabels(), p.getValue()));
    }
    return out;
  }

  private static Family build(Families families, List<Point> points) {
    Families.Gauge g = families.gauge("g", "help");
    for (Point p : points) {
      g.add(p.value(), p.labels());
    }
    return g.build();
  }

  @Property(tries = 300)
  void build_anyAddOrderAndAnyPreviousBuild_pointsInClientJavaOrder(
      @ForAll("labelSets") List<Labels> sets, @ForAll long seed) {
    Families families = new Families();
    Random random = new Random(seed);
    // Several builds of the same family: the same label objects in new orders, subsets and
    // repeats of an earlier order, so a remembered permutation is both reused and invalidated.
    List<Point> previous = List.of();
    for (int round = 0; round < 4; round++) {
      List<Point> added = new ArrayList<>();
      for (Labels l : sets) {
        added.add(new Point(l, random.nextInt(100)));
      }
      if (round == 2) {
        added = new ArrayList<>(previous); // exactly the last build's sequence again
      } else {
        Collections.shuffle(added, random);
        if (round == 3 && !added.isEmpty()) {
          added.remove(random.nextInt(added.size()));
        }
      }
      Family f = build(families, added);
      assertThat(points(f)).isEqualTo(clientJavaOrder(added));
      assertThat(f.toSnapshot().getDataPoints()).hasSize(added.size());
      previous = added;
    }
  }

  @Property(tries = 100)
  void build_twoEqualLabelSets_throwsAsClientJavaDoes(
      @ForAll("labelSets") List<Labels> sets, @ForAll long seed) {
    if (sets.isEmpty()) {
      return;
    }
    Families families = new Families();
    Random random = new Random(seed);
    List<Point> added = new ArrayList<>();
    for (Labels l : sets) {
      added.add(new Point(l, 1));
    }
    build(families, added); // remembered order without the duplicate
    Labels dup = sets.get(random.nextInt(sets.size()));
    // An equal but distinct object: identity with the remembered order fails, equality catches it.
    added.add(random.nextInt(added.size() + 1), new Point(Labels.of(names(dup), values(dup)), 2));
    List<Point> withDuplicate = added;
    assertThatThrownBy(() -> build(families, withDuplicate))
        .isInstanceOf(DuplicateLabelsException.class);
    assertThatThrownBy(() -> clientJavaOrder(withDuplicate))
        .isInstanceOf(DuplicateLabelsException.class);
  }

  private static String[] names(Labels l) {
    String[] out = new String[l.size()];
    for (int i = 0; i < l.size(); i++) {
      out[i] = l.getName(i);
    }
    return out;
  }

  private static String[] values(Labels l) {
    String[] out = new String[l.size()];
    for (int i = 0; i < l.size(); i++) {
      out[i] = l.getValue(i);
    }
    return out;
  }
}

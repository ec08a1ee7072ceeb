package io.vgpu.exporter.exposition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.prometheus.metrics.expositionformats.ExpositionFormatWriter;
import io.prometheus.metrics.expositionformats.OpenMetricsTextFormatWriter;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.CounterSnapshot.CounterDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.Exemplar;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot.GaugeDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.HistogramSnapshot;
import io.prometheus.metrics.model.snapshots.InfoSnapshot;
import io.prometheus.metrics.model.snapshots.InfoSnapshot.InfoDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricMetadata;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import io.prometheus.metrics.model.snapshots.Unit;
import io.vgpu.exporter.testing.TestNode;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * The fast encoder against client_java's own writers: for every snapshot it accepts, the bytes must
 * be identical in both formats, on the first render and on later ones (cached label sets).
 */
class TextEncoderTest {

  static byte[] clientJava(MetricSnapshots s, ExpositionFormat f) throws IOException {
    ExpositionFormatWriter w =
        f == ExpositionFormat.OPENMETRICS
            ? OpenMetricsTextFormatWriter.create()
            : PrometheusTextFormatWriter.create();
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    w.write(out, s);
    return out.toByteArray();
  }

  static byte[] ours(TextEncoder encoder, MetricSnapshots s, ExpositionFormat f)
      throws UnsupportedFamilyException {
    ExpositionBuffer b = new ExpositionBuffer(16);
    encoder.encode(s, f, b);
    return b.toByteArray();
  }

  static void assertSameAsClientJava(MetricSnapshots s) throws Exception {
    TextEncoder encoder = new TextEncoder();
    for (int round = 0; round < 2; round++) {
      for (ExpositionFormat f : ExpositionFormat.values()) {
        assertThat(new String(ours(encoder, s, f), StandardCharsets.UTF_8))
            .as("%s, render %d", f, round + 1)
            .isEqualTo(new String(clientJava(s, f), StandardCharsets.UTF_8));
        assertThat(ours(encoder, s, f)).isEqualTo(clientJava(s, f));
      }
    }
  }

  // ---- generated snapshots

  @Property(tries = 400)
  void generatedSnapshots_encodeExactlyAsClientJava(@ForAll("families") List<MetricSnapshot> fs)
      throws Exception {
    Set<String> names = new HashSet<>();
    List<MetricSnapshot> unique = new ArrayList<>();
    for (MetricSnapshot f : fs) {
      if (names.add(f.getMetadata().getName())) {
        unique.add(f);
      }
    }
    assertSameAsClientJava(new MetricSnapshots(unique));
  }

  /**
   * One encoder across pages whose families keep their names while their points come and go,
   * reorder and change value, with label objects that recur (as the exporter's cached label sets
   * do) and fresh ones: every page must still be exactly client_java's, whether a point finds its
   * label set at its own position from the last render, elsewhere, or nowhere.
   */
  @Property(tries = 300)
  void changingPages_oneEncoder_eachExactlyAsClientJava(
      @ForAll("labelPool") List<Labels> pool, @ForAll("pagePlans") List<List<List<Integer>>> pages)
      throws Exception {
    TextEncoder encoder = new TextEncoder();
    int page = 0;
    for (List<List<Integer>> plan : pages) {
      List<MetricSnapshot> families = new ArrayList<>();
      for (int f = 0; f < plan.size(); f++) {
        Map<Labels, Double> points = new LinkedHashMap<>();
        for (int pick : plan.get(f)) {
          Labels l =
              pick < 0 ? Labels.of("fresh", "p" + page + "-" + pick) : pool.get(pick % pool.size());
          points.putIfAbsent(l, (double) (pick * 1_000_003L + page));
        }
        List<GaugeDataPointSnapshot> ps = new ArrayList<>();
        points.forEach((l, v) -> ps.add(new GaugeDataPointSnapshot(v, l, null)));
        families.add(new GaugeSnapshot(new MetricMetadata("family_" + f, "h"), ps));
      }
      MetricSnapshots s = new MetricSnapshots(families);
      for (ExpositionFormat format : ExpositionFormat.values()) {
        assertThat(new String(ours(encoder, s, format), StandardCharsets.UTF_8))
            .as("page %d, %s", page, format)
            .isEqualTo(new String(clientJava(s, format), StandardCharsets.UTF_8));
      }
      page++;
    }
  }

  @Provide
  Arbitrary<List<Labels>> labelPool() {
    return labels().list().ofMinSize(1).ofMaxSize(8);
  }

  /** Pages of up to 3 families, each a list of pool indices (negative: a fresh label set). */
  @Provide
  Arbitrary<List<List<List<Integer>>>> pagePlans() {
    return Arbitraries.integers()
        .between(-2, 9)
        .list()
        .ofMaxSize(8)
        .list()
        .ofMinSize(1)
        .ofMaxSize(3)
        .list()
        .ofMinSize(2)
        .ofMaxSize(6);
  }

  @Provide
  Arbitrary<List<MetricSnapshot>> families() {
    return family().list().ofMaxSize(6);
  }

  static Arbitrary<String> legacyName() {
    return Combinators.combine(
            Arbitraries.strings().withCharRange('a', 'z').withChars('_', 'A', 'Z').ofLength(1),
            Arbitraries.strings()
                .withCharRange('a', 'z')
                .withCharRange('0', '9')
                .withChars('_', 'Q')
                .ofMaxLength(12))
        .as((a, b) -> a + b)
        .filter(n -> !n.startsWith("__"));
  }

  /** Label values and help text: ASCII with every escaped character, and any Unicode. */
  static Arbitrary<String> text() {
    return Arbitraries.oneOf(
        Arbitraries.strings()
            .withCharRange(' ', '~')
            .withChars('\\', '"', '\n', '\t', '\r')
            .ofMaxLength(20),
        Arbitraries.strings().all().ofMaxLength(12),
        Arbitraries.of("", "a\\\"b\nc", "GPU-0a1b", "zone\u00e9\u4e2d\ud83d\ude80", "\ud800x"));
  }

  static Arbitrary<Labels> labels() {
    return Arbitraries.maps(legacyName(), text())
        .ofMaxSize(4)
        .map(
            m -> {
              if (m.isEmpty()) {
                return Labels.EMPTY;
              }
              Labels.Builder b = Labels.builder();
              m.forEach(b::label);
              return b.build();
            });
  }

  static Arbitrary<Double> values() {
    return Arbitraries.oneOf(
        Arbitraries.doubles(),
        Arbitraries.longs().between(0, 1L << 40).map(Long::doubleValue),
        Arbitraries.of(
            0.0, -0.0, Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, 1e7, 0.25));
  }

  static Arbitrary<MetricSnapshot> family() {
    Arbitrary<Unit> unit = Arbitraries.of(Unit.BYTES, Unit.SECONDS, Unit.RATIO).injectNull(0.5);
    Arbitrary<String> help = text().injectNull(0.2);
    Arbitrary<Integer> kind = Arbitraries.integers().between(0, 2);
    Arbitrary<List<Labels>> points = labels().list().ofMaxSize(5);
    Arbitrary<List<Double>> vals = values().list().ofSize(5);
    return Combinators.combine(legacyName(), unit, help, kind, points, vals)
        .as(TextEncoderTest::build)
        .filter(s -> s != null);
  }

  /** Null where client_java rejects the combination (its validation is not under test). */
  static MetricSnapshot build(
      String base, Unit unit, String help, int kind, List<Labels> labels, List<Double> vals) {
    Map<Labels, Double> points = new LinkedHashMap<>();
    for (int i = 0; i < labels.size(); i++) {
      points.putIfAbsent(labels.get(i), vals.get(i));
    }
    String name = unit == null ? base : base + "_" + unit;
    try {
      MetricMetadata m =
          unit == null ? new MetricMetadata(name, help) : new MetricMetadata(name, help, unit);
      return switch (kind) {
        case 0 -> {
          List<GaugeDataPointSnapshot> ps = new ArrayList<>();
          points.forEach((l, v) -> ps.add(new GaugeDataPointSnapshot(v, l, null)));
          yield new GaugeSnapshot(m, ps);
        }
        case 1 -> {
          List<CounterDataPointSnapshot> ps = new ArrayList<>();
          points.forEach(
              (l, v) ->
                  ps.add(
                      new CounterDataPointSnapshot(
                          Double.isNaN(v) ? v : Math.abs(v), l, null, 0L)));
          yield new CounterSnapshot(m, ps);
        }
        default -> {
          List<InfoDataPointSnapshot> ps = new ArrayList<>();
          points.keySet().forEach(l -> ps.add(new InfoDataPointSnapshot(l)));
          yield new InfoSnapshot(new MetricMetadata(base, help), ps);
        }
      };
    } catch (IllegalArgumentException rejected) {
      return null;
    }
  }

  // ---- the exporter's own page

  @Example
  void exporterNode_bothFormats_identicalToClientJava() throws Exception {
    Path root = Files.createTempDirectory("vgpu-enc-");
    try (TestNode node = new TestNode(root)) {
      MetricSnapshots s = node.registry().scrape();
      assertThat(s.size()).isGreaterThan(20);
      assertSameAsClientJava(s);
    } finally {
      try (var w = Files.walk(root)) {
        w.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  // ---- what is left to client_java

  static void encodeText(MetricSnapshots s) throws UnsupportedFamilyException {
    new TextEncoder().encode(s, ExpositionFormat.PROMETHEUS_TEXT, new ExpositionBuffer(64));
  }

  @Example
  void encode_histogram_isUnsupported() {
    var h =
        HistogramSnapshot.builder()
            .name("h_seconds")
            .dataPoint(
                HistogramSnapshot.HistogramDataPointSnapshot.builder()
                    .classicHistogramBuckets(
                        io.prometheus.metrics.model.snapshots.ClassicHistogramBuckets.of(
                            new double[] {1, Double.POSITIVE_INFINITY}, new long[] {1, 2}))
                    .sum(2)
                    .build())
            .build();
    assertThatThrownBy(() -> encodeText(new MetricSnapshots(h)))
        .isInstanceOf(UnsupportedFamilyException.class)
        .hasMessageContaining("HistogramSnapshot");
  }

  @Example
  void encode_exemplarOrTimestamps_areUnsupported() {
    var withExemplar =
        new CounterSnapshot(
            new MetricMetadata("c", "h"),
            List.of(
                new CounterDataPointSnapshot(
                    1, Labels.EMPTY, Exemplar.builder().value(1).traceId("t").build(), 0L)));
    assertThatThrownBy(() -> encodeText(new MetricSnapshots(withExemplar)))
        .isInstanceOf(UnsupportedFamilyException.class)
        .hasMessageContaining("exemplar");
    var created =
        new CounterSnapshot(
            new MetricMetadata("c", "h"),
            List.of(new CounterDataPointSnapshot(1, Labels.EMPTY, null, 1_700_000_000_000L)));
    assertThatThrownBy(() -> encodeText(new MetricSnapshots(created)))
        .isInstanceOf(UnsupportedFamilyException.class)
        .hasMessageContaining("timestamps");
  }

  @Example
  void encode_utf8MetricName_isUnsupported() {
    var g =
        new GaugeSnapshot(
            new MetricMetadata("gpu.memory", "h"),
            List.of(new GaugeDataPointSnapshot(1, Labels.EMPTY, null)));
    assertThatThrownBy(() -> encodeText(new MetricSnapshots(g)))
        .isInstanceOf(UnsupportedFamilyException.class)
        .hasMessageContaining("gpu.memory");
  }

  @Example
  void encode_utf8LabelName_isUnsupported() {
    var g =
        new GaugeSnapshot(
            new MetricMetadata("g", "h"),
            List.of(new GaugeDataPointSnapshot(1, Labels.of("k8s.pod", "x"), null)));
    assertThatThrownBy(
            () ->
                new TextEncoder()
                    .encode(
                        new MetricSnapshots(g),
                        ExpositionFormat.PROMETHEUS_TEXT,
                        new ExpositionBuffer(64)))
        .isInstanceOf(UnsupportedFamilyException.class)
        .hasMessageContaining("k8s.pod");
  }

  @Example
  void labelSetCache_forgetsSetsNoLongerScraped() throws Exception {
    TextEncoder encoder = new TextEncoder();
    for (int round = 0; round < 50; round++) {
      List<GaugeDataPointSnapshot> ps = new ArrayList<>();
      for (int i = 0; i < 100; i++) {
        // Fresh label objects each round, as a collector that builds its labels per scrape makes.
        ps.add(new GaugeDataPointSnapshot(i, Labels.of("pod", "p" + round + "-" + i), null));
      }
      ours(
          encoder,
          new MetricSnapshots(new GaugeSnapshot(new MetricMetadata("g", "h"), ps)),
          ExpositionFormat.PROMETHEUS_TEXT);
      assertThat(encoder.cachedLabelSets()).isLessThanOrEqualTo(2 * 100 + 64 + 100);
    }
  }

  @Example
  void emptyFamilies_areSkipped_andOpenMetricsEndsWithEof() throws Exception {
    var empty = new GaugeSnapshot(new MetricMetadata("empty", "h"), List.of());
    var one =
        new GaugeSnapshot(
            new MetricMetadata("one_bytes", "h", Unit.BYTES),
            List.of(new GaugeDataPointSnapshot(5, Labels.EMPTY, null)));
    MetricSnapshots s = new MetricSnapshots(empty, one);
    assertSameAsClientJava(s);
    String om =
        new String(
            ours(new TextEncoder(), s, ExpositionFormat.OPENMETRICS), StandardCharsets.UTF_8);
    assertThat(om).doesNotContain("empty").endsWith("one_bytes 5.0\n# EOF\n");
  }
}

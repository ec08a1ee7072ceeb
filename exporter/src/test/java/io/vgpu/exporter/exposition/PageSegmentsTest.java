package io.vgpu.exporter.exposition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.CounterSnapshot.CounterDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot.GaugeDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricMetadata;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import io.prometheus.metrics.model.snapshots.Unit;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.zip.CRC32;
import java.util.zip.GZIPInputStream;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * Pages made of deflated segments that are replayed from earlier pages: the CRC arithmetic, the
 * compressor's segment boundaries, and the encoder's judgment of which families are unchanged.
 * Every page is checked the way a scraper reads it: gunzipped by {@link GZIPInputStream} (which
 * checks the CRC and length of the member) and compared with client_java's own writer.
 */
class PageSegmentsTest {

  private static int crc(byte[] b, int from, int to) {
    CRC32 c = new CRC32();
    c.update(b, from, to - from);
    return (int) c.getValue();
  }

  @Property(tries = 500)
  void combinedCrc_isTheCrcOfTheConcatenation(
      @ForAll @Size(max = 300) byte[] bytes, @ForAll @IntRange(max = 300) int cut) {
    int at = Math.min(cut, bytes.length);
    assertThat(
            Crc32Combine.combine(
                crc(bytes, 0, at), crc(bytes, at, bytes.length), bytes.length - at))
        .isEqualTo(crc(bytes, 0, bytes.length));
  }

  @Example
  void combinedCrc_longSecondParts_andEmptyOnes() {
    byte[] head = "vgpu_container_memory_used_bytes".getBytes(StandardCharsets.US_ASCII);
    for (int n : new int[] {0, 1, 4095, 65_536, 3_000_001, 20_000_000}) {
      byte[] all = Arrays.copyOf(head, head.length + n); // head, then n zero bytes
      all[all.length - 1] ^= (byte) (n == 0 ? 0 : 0x5a);
      int expected = crc(all, 0, all.length);
      assertThat(
              Crc32Combine.combine(crc(all, 0, head.length), crc(all, head.length, all.length), n))
          .as("%d bytes after", n)
          .isEqualTo(expected);
    }
    assertThat(Crc32Combine.combine(0x12345678, 0, 0)).isEqualTo(0x12345678);
    assertThatThrownBy(() -> Crc32Combine.combine(0, 0, -1))
        .isInstanceOf(IllegalArgumentException.class);
  }

  private static byte[] gunzip(PageCompressor c) throws IOException {
    try (GZIPInputStream in =
        new GZIPInputStream(new ByteArrayInputStream(c.array(), 0, c.length()))) {
      return in.readAllBytes();
    }
  }

  /**
   * Random pages of raw runs, segments and replays of segments from earlier pages, in any order:
   * each gunzips (CRC and length checked) to exactly what was written and replayed.
   */
  @Property(tries = 300)
  void compressor_runsSegmentsAndReplays_gunzipToTheirBytes(@ForAll long seed) throws IOException {
    Random r = new Random(seed);
    PageCompressor c = new PageCompressor();
    List<PageCompressor.Segment> kept = new ArrayList<>();
    List<byte[]> keptRaw = new ArrayList<>();
    for (int page = 0; page < 4; page++) {
      c.start(new byte[r.nextInt(40) + 18], Long.MAX_VALUE);
      ByteArrayOutputStream expected = new ByteArrayOutputStream();
      int replays = 0;
      for (int op = r.nextInt(8); op >= 0; op--) {
        switch (r.nextInt(3)) {
          case 0 -> {
            byte[] raw = text(r);
            c.write(raw, 0, raw.length);
            expected.write(raw);
          }
          case 1 -> {
            c.beginSegment();
            byte[] raw = text(r);
            for (int at = 0; at < raw.length; ) { // in pieces, as the encoder's chunks come
              int n = Math.min(raw.length - at, 1 + r.nextInt(5000));
              c.write(raw, at, n);
              at += n;
            }
            kept.add(c.endSegment());
            keptRaw.add(raw);
            expected.write(raw);
          }
          default -> {
            if (!kept.isEmpty()) {
              int i = r.nextInt(kept.size());
              c.replay(kept.get(i));
              expected.write(keptRaw.get(i));
              replays++;
            }
          }
        }
      }
      c.finish();
      assertThat(gunzip(c)).as("page %d", page).isEqualTo(expected.toByteArray());
      assertThat(c.rawSize()).isEqualTo(expected.size());
      assertThat(c.replayed()).isEqualTo(replays);
    }
  }

  /** Exposition-like text: repetitive lines (long matches) with varying numbers. */
  private static byte[] text(Random r) {
    StringBuilder b = new StringBuilder();
    for (int lines = r.nextInt(r.nextBoolean() ? 3 : 2000); lines >= 0; lines--) {
      b.append("vgpu_container_memory_used_bytes{pod=\"p")
          .append(r.nextInt(50))
          .append("\",device=\"GPU-")
          .append(r.nextInt(8))
          .append("\"} ")
          .append(r.nextLong())
          .append('\n');
    }
    return b.toString().getBytes(StandardCharsets.US_ASCII);
  }

  @Example
  void endWithoutBegin_isRefused() {
    PageCompressor c = new PageCompressor();
    c.start(new byte[64], Long.MAX_VALUE);
    assertThatThrownBy(c::endSegment).isInstanceOf(IllegalStateException.class);
  }

  // ---- the encoder over a compressor: which families it replays, and that pages stay exact ----

  private final TextEncoder encoder = new TextEncoder();
  private final PageCompressor compressor = new PageCompressor();
  private int chunk = 4096;

  /** One render as ExpositionCache makes it; returns the page as a scraper gunzips it. */
  private byte[] render(List<MetricSnapshot> families, ExpositionFormat format) throws Exception {
    compressor.start(new byte[64], Long.MAX_VALUE);
    ExpositionBuffer chunks = ExpositionBuffer.streamingTo(compressor, chunk);
    List<Family> fs = new ArrayList<>();
    for (MetricSnapshot s : families) {
      fs.add(Family.of(s));
    }
    encoder.encode(fs, format, chunks, compressor);
    chunks.flush();
    compressor.finish();
    byte[] page = gunzip(compressor);
    assertThat(new String(page, StandardCharsets.UTF_8))
        .isEqualTo(
            new String(
                TextEncoderTest.clientJava(new MetricSnapshots(families), format),
                StandardCharsets.UTF_8));
    return page;
  }

  private static final List<Labels> POOL = new ArrayList<>();

  static {
    for (int i = 0; i < 120; i++) {
      POOL.add(Labels.of("container", "c" + (i / 8), "device", "GPU-" + (i % 8)));
    }
  }

  private static GaugeSnapshot gauge(String name, int points, double base) {
    List<GaugeDataPointSnapshot> ps = new ArrayList<>();
    for (int i = 0; i < points; i++) {
      ps.add(new GaugeDataPointSnapshot(base + i, POOL.get(i), null));
    }
    return new GaugeSnapshot(new MetricMetadata(name, "help of " + name), ps);
  }

  private static GaugeSnapshot withFirst(GaugeSnapshot g, double first) {
    List<GaugeDataPointSnapshot> ps = new ArrayList<>(g.getDataPoints());
    ps.set(0, new GaugeDataPointSnapshot(first, ps.get(0).getLabels(), null));
    return new GaugeSnapshot(g.getMetadata(), ps);
  }

  @Example
  void unchangedPage_replaysEveryLargeFamily() throws Exception {
    List<MetricSnapshot> page =
        List.of(
            gauge("a_bytes", 40, 1),
            gauge("b_small", TextEncoder.MIN_SEGMENT_POINTS - 1, 2),
            gauge("c_ratio", TextEncoder.MIN_SEGMENT_POINTS, 3));
    byte[] first = render(page, ExpositionFormat.OPENMETRICS);
    assertThat(compressor.replayed()).isZero();
    assertThat(render(page, ExpositionFormat.OPENMETRICS)).isEqualTo(first);
    assertThat(compressor.replayed())
        .as("a_bytes and c_ratio; b_small is below the floor")
        .isEqualTo(2);
  }

  @Example
  void oneValueChanged_thatFamilyIsEncodedAgain() throws Exception {
    render(
        List.of(gauge("a_bytes", 40, 1), gauge("c_ratio", 40, 3)),
        ExpositionFormat.PROMETHEUS_TEXT);
    render(
        List.of(gauge("a_bytes", 40, 1.5), gauge("c_ratio", 40, 3)),
        ExpositionFormat.PROMETHEUS_TEXT);
    assertThat(compressor.replayed()).isEqualTo(1);
    // zero and negative zero print differently: their bits differ, so no replay
    render(
        List.of(gauge("a_bytes", 40, 1.5), gauge("c_ratio", 40, 3)),
        ExpositionFormat.PROMETHEUS_TEXT);
    assertThat(compressor.replayed()).isEqualTo(2);
    render(
        List.of(withFirst(gauge("a_bytes", 40, 1.5), -0.0), gauge("c_ratio", 40, 3)),
        ExpositionFormat.PROMETHEUS_TEXT);
    render(
        List.of(withFirst(gauge("a_bytes", 40, 1.5), 0.0), gauge("c_ratio", 40, 3)),
        ExpositionFormat.PROMETHEUS_TEXT);
    assertThat(compressor.replayed()).isEqualTo(1);
  }

  @Example
  void formatHelpUnitOrKindChanged_noReplay() throws Exception {
    List<MetricSnapshot> page = List.of(gauge("a_bytes", 40, 1));
    render(page, ExpositionFormat.PROMETHEUS_TEXT);
    render(page, ExpositionFormat.OPENMETRICS);
    assertThat(compressor.replayed()).isZero();
    List<GaugeDataPointSnapshot> points = ((GaugeSnapshot) page.get(0)).getDataPoints();
    render(
        List.of(new GaugeSnapshot(new MetricMetadata("a_bytes", "other help"), points)),
        ExpositionFormat.OPENMETRICS);
    assertThat(compressor.replayed()).isZero();
    render(
        List.of(new GaugeSnapshot(new MetricMetadata("a_bytes", "other help", Unit.BYTES), points)),
        ExpositionFormat.OPENMETRICS);
    assertThat(compressor.replayed()).isZero();
    List<CounterDataPointSnapshot> counted = new ArrayList<>();
    for (GaugeDataPointSnapshot p : points) {
      counted.add(new CounterDataPointSnapshot(p.getValue(), p.getLabels(), null, 0));
    }
    render(
        List.of(
            new CounterSnapshot(new MetricMetadata("a_bytes", "other help", Unit.BYTES), counted)),
        ExpositionFormat.OPENMETRICS);
    assertThat(compressor.replayed()).isZero();
  }

  /**
   * A render without segments (a streamed page) moves the family's values on but makes no segment:
   * the kept segment must not survive it, or the next render would replay the older values.
   */
  @Example
  void renderWithoutSegments_betweenTwo_forgetsTheSegment() throws Exception {
    render(List.of(gauge("a_bytes", 40, 1)), ExpositionFormat.PROMETHEUS_TEXT);
    ExpositionBuffer plain = new ExpositionBuffer(64);
    encoder.encode(
        List.of(Family.of(gauge("a_bytes", 40, 2))), ExpositionFormat.PROMETHEUS_TEXT, plain);
    byte[] page = render(List.of(gauge("a_bytes", 40, 2)), ExpositionFormat.PROMETHEUS_TEXT);
    assertThat(new String(page, StandardCharsets.UTF_8))
        .contains("a_bytes{container=\"c0\",device=\"GPU-0\"} 2.0");
  }

  /**
   * A render that fails inside a family (a label name only client_java may write, on the point
   * sorted last) has moved the values of the points before it: its segment must go too, or a page
   * whose values are the moved ones would get the older segment.
   */
  @Example
  void renderFailingInsideAFamily_forgetsItsSegment() throws Exception {
    render(List.of(gauge("a_bytes", 40, 1)), ExpositionFormat.PROMETHEUS_TEXT);
    List<GaugeDataPointSnapshot> ps = new ArrayList<>(gauge("a_bytes", 40, 2).getDataPoints());
    ps.set(39, new GaugeDataPointSnapshot(40, Labels.of("zz.bad", "y"), null));
    MetricMetadata meta = new MetricMetadata("a_bytes", "help of a_bytes");
    compressor.start(new byte[64], Long.MAX_VALUE);
    ExpositionBuffer chunks = ExpositionBuffer.streamingTo(compressor, chunk);
    assertThatThrownBy(
            () ->
                encoder.encode(
                    List.of(Family.of(new GaugeSnapshot(meta, ps))),
                    ExpositionFormat.PROMETHEUS_TEXT,
                    chunks,
                    compressor))
        .isInstanceOf(UnsupportedFamilyException.class);
    // points 0-38 as the failed render moved them, point 39 as the first render left it
    List<GaugeDataPointSnapshot> moved = new ArrayList<>(gauge("a_bytes", 40, 2).getDataPoints());
    moved.set(39, new GaugeDataPointSnapshot(40, POOL.get(39), null));
    byte[] page = render(List.of(new GaugeSnapshot(meta, moved)), ExpositionFormat.PROMETHEUS_TEXT);
    assertThat(compressor.replayed()).isZero();
    assertThat(new String(page, StandardCharsets.UTF_8))
        .contains("a_bytes{container=\"c0\",device=\"GPU-0\"} 2.0");
  }

  @Example
  void segmentsNeedABufferStreamingToTheirCompressor() {
    assertThatThrownBy(
            () ->
                encoder.encode(
                    List.of(Family.of(gauge("a_bytes", 40, 1))),
                    ExpositionFormat.PROMETHEUS_TEXT,
                    new ExpositionBuffer(64),
                    compressor))
        .isInstanceOf(IllegalArgumentException.class);
  }

  /**
   * Pages that evolve as a node's do, render after render through one encoder and compressor:
   * families that stay, change a value (to -0.0, NaN, another number), swap a label set for an
   * equal new object, gain or lose points, change help, disappear and return, in either format and
   * with chunk sizes that cut lines anywhere. Every page is exactly client_java's, and each is
   * rendered twice: the second time every family of at least {@link TextEncoder#MIN_SEGMENT_POINTS}
   * points is replayed.
   */
  @Property(tries = 200)
  void evolvingPages_segmentedAndReplayed_eachExactlyAsClientJava(
      @ForAll long seed, @ForAll("chunkSizes") int chunkSize) throws Exception {
    Random r = new Random(seed);
    chunk = chunkSize;
    int families = 1 + r.nextInt(4);
    List<List<GaugeDataPointSnapshot>> points = new ArrayList<>();
    List<String> helps = new ArrayList<>();
    for (int f = 0; f < families; f++) {
      int n = r.nextInt(3) == 0 ? r.nextInt(8) : 28 + r.nextInt(12);
      List<GaugeDataPointSnapshot> ps = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        ps.add(new GaugeDataPointSnapshot(r.nextInt(1000), POOL.get(i), null));
      }
      points.add(ps);
      helps.add("h" + f);
    }
    for (int page = 0; page < 8; page++) {
      List<MetricSnapshot> snapshots = new ArrayList<>();
      for (int f = 0; f < families; f++) {
        List<GaugeDataPointSnapshot> ps = points.get(f);
        switch (r.nextInt(10)) {
          case 0 -> change(ps, r, r.nextBoolean() ? -0.0 : Double.NaN);
          case 1 -> change(ps, r, r.nextInt(1000) / 7.0);
          case 2 -> { // an equal label set, a new object
            if (!ps.isEmpty()) {
              int i = r.nextInt(ps.size());
              GaugeDataPointSnapshot p = ps.get(i);
              ps.set(
                  i,
                  new GaugeDataPointSnapshot(
                      p.getValue(),
                      Labels.of(
                          p.getLabels().getName(0),
                          p.getLabels().getValue(0),
                          p.getLabels().getName(1),
                          p.getLabels().getValue(1)),
                      null));
            }
          }
          case 3 -> { // a point more or less, at the end (points stay in label order)
            if (!ps.isEmpty() && r.nextBoolean()) {
              ps.remove(ps.size() - 1);
            } else if (ps.size() < POOL.size()) {
              ps.add(new GaugeDataPointSnapshot(1, POOL.get(ps.size()), null));
            }
          }
          case 4 -> helps.set(f, "h" + f + "-" + page);
          default -> {}
        }
        if (r.nextInt(8) != 0) { // now and then a family is missing from a page
          snapshots.add(
              new GaugeSnapshot(
                  new MetricMetadata("family_" + f, helps.get(f)), new ArrayList<>(ps)));
        }
      }
      ExpositionFormat format =
          r.nextInt(4) == 0 ? ExpositionFormat.PROMETHEUS_TEXT : ExpositionFormat.OPENMETRICS;
      byte[] once = render(snapshots, format);
      assertThat(render(snapshots, format)).isEqualTo(once);
      assertThat(compressor.replayed())
          .as("page %d rendered again", page)
          .isEqualTo(
              (int)
                  snapshots.stream()
                      .filter(s -> s.getDataPoints().size() >= TextEncoder.MIN_SEGMENT_POINTS)
                      .count());
    }
  }

  private static void change(List<GaugeDataPointSnapshot> ps, Random r, double value) {
    if (!ps.isEmpty()) {
      int i = r.nextInt(ps.size());
      ps.set(i, new GaugeDataPointSnapshot(value, ps.get(i).getLabels(), null));
    }
  }

  @Provide
  Arbitrary<Integer> chunkSizes() {
    return Arbitraries.of(64, 100, 997, 4096, 65_536);
  }
}

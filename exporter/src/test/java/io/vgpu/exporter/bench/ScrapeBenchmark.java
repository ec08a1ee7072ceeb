package io.vgpu.exporter.bench;

import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.discovery.CacheDiscovery;
import io.vgpu.exporter.discovery.ParseErrors;
import io.vgpu.exporter.exposition.ExpositionBuffer;
import io.vgpu.exporter.exposition.ExpositionCache;
import io.vgpu.exporter.exposition.ExpositionFormat;
import io.vgpu.exporter.exposition.Family;
import io.vgpu.exporter.exposition.FamilySource;
import io.vgpu.exporter.exposition.Rendition;
import io.vgpu.exporter.exposition.TextEncoder;
import io.vgpu.exporter.exposition.UnsupportedFamilyException;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.k8s.StaticMetadataSource;
import io.vgpu.exporter.metrics.BuildInfo;
import io.vgpu.exporter.metrics.CollectorContext;
import io.vgpu.exporter.metrics.CollectorStats;
import io.vgpu.exporter.metrics.Collectors;
import io.vgpu.exporter.node.NodeStateProvider;
import io.vgpu.exporter.testing.TestNode;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.InstantSource;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * One scrape of a node with 100 containers x 8 devices x 4 processes: every region read, every
 * collector (ours and HAMi compat), text encoding (into a discarding stream, as a socket would take
 * it). Goals: p99 under 10 ms, under 2 MB allocated per scrape ({@code -prof gc}).
 *
 * <p>{@code renderOpenMetrics}, {@code renderText} and {@code renderOpenMetricsGzip} are what a
 * /metrics request costs when it has to render (the exposition cache with max age 0, as deployed:
 * collect, encode with {@link TextEncoder}, gzip for the last); {@code cachedPage} is a scrape
 * served from a page rendered earlier (a concurrent scraper or a max age above 0). {@code
 * scrapeText} is the same scrape through client_java's own text writer, for comparison.
 *
 * <pre>
 * ./mvnw -B -ntp -o -pl exporter test-compile dependency:build-classpath -Dmdep.outputFile=/tmp/cp.txt -Dmdep.includeScope=test
 * java -cp exporter/target/test-classes:exporter/target/classes:$(cat /tmp/cp.txt) \
 *   org.openjdk.jmh.Main ScrapeBenchmark.scrapeText -bm sample -tu ms -prof gc
 * </pre>
 *
 * {@code collectOnly} and {@code encodeOnly} split a render into the exporter's collect step and
 * its encoding; {@code snapshotsOnly} and {@code writeOnly} are the same halves of client_java's
 * path, to see which half a change moved.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(
    value = 1,
    jvmArgsAppend = {"-XX:+UseSerialGC", "-Xmx256m", "--enable-native-access=ALL-UNNAMED"})
public class ScrapeBenchmark {
  static final int CONTAINERS = 100;
  static final int DEVICES = 8;
  static final int PROCESSES = 4;

  private Path root;
  private CacheDiscovery discovery;
  private PrometheusRegistry registry;
  private FamilySource page;
  private final OutputStream sink = OutputStream.nullOutputStream();
  private MetricSnapshots collected;
  private List<? extends Family> families;
  private NodeStateProvider states;
  private ExpositionCache renderEveryTime;
  private ExpositionCache renderedOnce;
  private final TextEncoder encoder = new TextEncoder();
  private final ExpositionBuffer buffer = new ExpositionBuffer(4 << 20);

  @Setup(Level.Trial)
  public void setUp() throws IOException, UnsupportedFamilyException {
    Path base =
        Files.isDirectory(Path.of("/dev/shm"))
            ? Path.of("/dev/shm")
            : Path.of(System.getProperty("java.io.tmpdir"));
    root = Files.createTempDirectory(base, "vgpu-bench-");
    List<PodMeta> pods = BenchNode.write(root, CONTAINERS, DEVICES, PROCESSES);
    StaticMetadataSource meta = StaticMetadataSource.of(pods, NodeMeta.unknown());
    discovery =
        new CacheDiscovery(
            root, Duration.ofHours(1), InstantSource.system(), false, new ParseErrors());
    discovery.rescan();
    states =
        new NodeStateProvider(
            "node-a", discovery::current, meta, InstantSource.system(), Duration.ofMinutes(5));
    registry = new PrometheusRegistry();
    page =
        Collectors.register(
            CollectorContext.regionsOnly(
                ExporterConfig.defaults(),
                states,
                new ParseErrors(),
                new CollectorStats(),
                new BuildInfo("b", "r")),
            registry,
            TestNode.OWN_COLLECTORS::contains);
    collected = registry.scrape();
    families = page.families();
    renderEveryTime = new ExpositionCache(page, Duration.ZERO, System::nanoTime);
    renderedOnce = new ExpositionCache(page, Duration.ofDays(1), System::nanoTime);
  }

  @TearDown(Level.Trial)
  public void tearDown() throws IOException {
    discovery.close();
    try (Stream<Path> w = Files.walk(root)) {
      w.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }

  @Benchmark
  public void scrapeText() throws IOException {
    PrometheusTextFormatWriter.create().write(sink, registry.scrape());
  }

  /** A /metrics render as Prometheus asks for it (OpenMetrics), without gzip. */
  @Benchmark
  public void renderOpenMetrics() throws IOException {
    send(renderEveryTime, ExpositionFormat.OPENMETRICS, false);
  }

  /** A /metrics render in Prometheus text (curl, Prometheus before 2.5). */
  @Benchmark
  public void renderText() throws IOException {
    send(renderEveryTime, ExpositionFormat.PROMETHEUS_TEXT, false);
  }

  /** A /metrics render as Prometheus asks for it by default: OpenMetrics, gzip. */
  @Benchmark
  public void renderOpenMetricsGzip() throws IOException {
    send(renderEveryTime, ExpositionFormat.OPENMETRICS, true);
  }

  /** A scrape answered from a page already rendered. */
  @Benchmark
  public void cachedPage() throws IOException {
    send(renderedOnce, ExpositionFormat.OPENMETRICS, false);
  }

  private void send(ExpositionCache cache, ExpositionFormat format, boolean gzip)
      throws IOException {
    Rendition r = (Rendition) cache.acquire(format);
    try {
      if (gzip) {
        sink.write(r.gzipped(), 0, r.gzippedLength());
      } else {
        r.writeTo(sink);
      }
    } finally {
      r.release();
    }
  }

  /**
   * The encode half of a render alone, with this project's encoder over one render's families
   * (label sets cached across calls).
   */
  @Benchmark
  public int encodeOnly() throws UnsupportedFamilyException {
    buffer.reset();
    encoder.encode(families, ExpositionFormat.OPENMETRICS, buffer);
    return buffer.size();
  }

  /** The collect half of a render alone: regions read, families built (the exporter's own cost). */
  @Benchmark
  public List<? extends Family> collectOnly() throws UnsupportedFamilyException {
    return page.families();
  }

  /**
   * What client_java's handler collects for the scrapes it serves (protobuf, {@code name[]}): the
   * same families as client_java snapshots, which client_java sorts and validates.
   */
  @Benchmark
  public MetricSnapshots snapshotsOnly() {
    return registry.scrape();
  }

  /** Reading and joining every region (the NodeState all collectors of a scrape share). */
  @Benchmark
  public Object nodeStateOnly() {
    return states.build();
  }

  /** The encode half alone: client_java's text writer over one scrape's snapshots. */
  @Benchmark
  public void writeOnly() throws IOException {
    PrometheusTextFormatWriter.create().write(sink, collected);
  }
}

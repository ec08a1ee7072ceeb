package io.vgpu.exporter.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.ExporterApp;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.config.Flags;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.k8s.StaticMetadataSource;
import io.vgpu.exporter.nvml.FakeNvml;
import io.vgpu.exporter.testing.TestNode;
import io.vgpu.exporter.testing.TestRegions;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The cardinality guard. A node's series count with the default collectors is exactly {@code fixed
 * + perGpu x GPUs + perContainer x containers + perContainerGpu x containers x GPUs used}, and each
 * term stays within the budget docs/fleet.md documents, which the fleet's Prometheus sizing is
 * built on. Pod churn must leave nothing behind: after 500 pods came and went, the scrape has
 * exactly the series it had before. Scrapes go through the real exporter (serve's wiring with NVML
 * on, through the repository's fake libnvidia-ml; HTTP /metrics).
 */
class SeriesBudgetTest {
  private static final HttpClient HTTP = HttpClient.newHttpClient();
  private static final Pattern BUDGET_ROW =
      Pattern.compile(
          "^\\| series budget: (fixed per node|per GPU|per container|per container × GPU|per MIG"
              + " device) \\| (\\d+) \\|",
          Pattern.MULTILINE);
  private static final Duration SETTLE = Duration.ofSeconds(40);

  @TempDir Path tmp;

  /**
   * A running exporter over {@code root} whose pods are whatever {@code pods} holds, on a node
   * whose NVML (the fake) reports {@code gpus} H100s.
   */
  private ExporterApp exporter(Path root, StaticMetadataSource pods, int gpus, String... extraNvml)
      throws IOException {
    Path nvmlDir = Files.createTempDirectory(tmp, "nvml");
    String[] devices = java.util.Arrays.copyOf(extraNvml, 2 * gpus + extraNvml.length);
    for (int g = 0; g < gpus; g++) {
      devices[extraNvml.length + 2 * g] =
          "device %d uuid=%s name=NVIDIA_H100_80GB_HBM3 total=85899345920 used=0 util=0 memutil=0"
              .formatted(g, TestRegions.uuid(g));
      // An H100's health: every reading supported (ECC on, row remapper, XID events).
      devices[extraNvml.length + 2 * g + 1] =
          "health %d power=70000 temp=31 clocks=0x1 ecc=0,0,0,0 remap=0,0,0,0 events=1"
              .formatted(g);
    }
    FakeNvml.in(nvmlDir).write(devices);
    ExporterConfig config =
        ExporterConfig.defaults()
            .with(Flags.CACHE_ROOT, root)
            .with(Flags.WEB_LISTEN_PORT, 0)
            .with(Flags.WEB_LISTEN_ADDRESS, "127.0.0.1")
            .with(Flags.KUBERNETES, false)
            .with(Flags.NVML, true)
            .with(Flags.NVML_LIBRARY, FakeNvml.library().toString())
            .with(Flags.NVML_SAMPLE_INTERVAL, Duration.ofMillis(200))
            .with(Flags.NODE_NAME, "budget-node")
            .with(Flags.RESCAN_INTERVAL, Duration.ofHours(1))
            // Evidence passes every 2 s (15 s by default): settling waits for one after the
            // candidate scrape.
            .with(Flags.WEB_STATUS_MAX_AGE, Duration.ofSeconds(2))
            .with(Flags.STALE_GRACE_PERIOD, Duration.ZERO)
            .with(Flags.USAGE_GRACE_PERIOD, Duration.ZERO);
    return ExporterApp.builder(config).metadata(pods).build().start();
  }

  private static StaticMetadataSource noPods() {
    return noPods(8);
  }

  /** A node whose HAMi registration lists {@code registered} devices. */
  private static StaticMetadataSource noPods(int registered) {
    return StaticMetadataSource.of(
        List.of(),
        new NodeMeta(
            true,
            Optional.of(Instant.now()),
            Optional.of("Reported_x"),
            OptionalInt.of(registered),
            false));
  }

  /** Series identities (name and labels) of one scrape. */
  private static Set<String> scrape(ExporterApp app) throws IOException, InterruptedException {
    HttpResponse<String> r =
        HTTP.send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + app.port() + "/metrics"))
                .header("Accept", "text/plain; version=0.0.4")
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).isEqualTo(200);
    Set<String> series = new TreeSet<>();
    for (String line : r.body().lines().toList()) {
      if (!line.isEmpty() && !line.startsWith("#")) {
        series.add(line.substring(0, line.lastIndexOf(' ')));
      }
    }
    return series;
  }

  private static long count(Set<String> series, String family) {
    return series.stream().filter(s -> s.startsWith(family + "{")).count();
  }

  /**
   * Rescans, then scrapes until NVML reports every GPU, a background attribution pass that started
   * after the rescan has published (two agreeing scrapes alone settled before it under load, and
   * counted the new containers without their attribution series), and two scrapes in a row agree;
   * then confirms the candidate with one more scrape after the next attribution and evidence passes
   * (two scrapes 250 ms apart can both fall inside one pass's period and agree on a state the next
   * pass changes: the churn and linearity checks then saw a series come or go).
   */
  private static Set<String> settledScrape(ExporterApp app, int gpus, int running)
      throws Exception {
    app.discovery().rescan();
    Instant rescanned = Instant.now();
    long deadline = System.nanoTime() + SETTLE.toNanos();
    Set<String> last = Set.of();
    while (System.nanoTime() < deadline) {
      // Settled means an attribution pass AND an evidence pass after the rescan that saw NVML up:
      // the judgment's node findings (registration against NVML's GPUs, nvml-errors) come from
      // the evidence pass, which can stay unchanged over two scrapes and change on its next round
      // (one that ran before the sampler's first poll judged NVML "not polled yet").
      Set<String> now = scrape(app);
      if (passesAfter(app, rescanned)
          && now.equals(last)
          && count(now, "vgpu_gpu_memory_total_bytes") == gpus
          && count(now, "vgpu_container_memory_idle_seconds") == running) {
        Instant candidate = Instant.now();
        while (!passesAfter(app, candidate) && System.nanoTime() < deadline) {
          Thread.sleep(100);
        }
        Set<String> confirmed = scrape(app);
        if (confirmed.equals(now)) {
          return now;
        }
        now = confirmed;
      }
      last = now;
      Thread.sleep(250);
    }
    throw new AssertionError(
        "scrape did not settle within %s (%d GPUs, %d containers expected): %s"
            .formatted(SETTLE, gpus, running, last));
  }

  /** An attribution pass and an evidence pass (with NVML up) have both begun after {@code t}. */
  private static boolean passesAfter(ExporterApp app, Instant t) {
    return app.attribution().orElseThrow().latest().at().isAfter(t)
        && app.evidence()
            .latest()
            .map(p -> p.evidence().now().isAfter(t) && p.evidence().nvml().status().up())
            .orElse(false);
  }

  private static String addPod(
      Path root, StaticMetadataSource pods, int n, int devices, String prefix) throws IOException {
    String uid =
        UUID.nameUUIDFromBytes((prefix + n).getBytes(java.nio.charset.StandardCharsets.UTF_8))
            .toString();
    TestRegions.write(
        root,
        uid,
        "main",
        "r.cache",
        TestRegions.spec(devices, 4096, 50, new int[] {100_000 + n}, 512, 20, true));
    pods.put(TestNode.pod(uid, "ns-" + n % 7, prefix + "-" + n, "Running", "main"));
    return uid;
  }

  private static void deleteTree(Path dir) throws IOException {
    try (Stream<Path> walk = Files.walk(dir)) {
      for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    }
  }

  /**
   * Series count of a node with {@code gpus} GPUs and {@code containers} running containers using
   * {@code devices} of them each.
   */
  private long seriesOf(int gpus, int containers, int devices) throws Exception {
    Path root = tmp.resolve("node-" + gpus + "-" + containers + "x" + devices);
    Files.createDirectories(root);
    StaticMetadataSource pods = noPods();
    for (int i = 0; i < containers; i++) {
      addPod(root, pods, i, devices, "budget");
    }
    try (ExporterApp app = exporter(root, pods, gpus)) {
      Set<String> series = settledScrape(app, gpus, containers);
      scrapes.put(gpus + " GPUs " + containers + "x" + devices, series);
      return series.size();
    }
  }

  /** The budget rows of docs/fleet.md: fixed per node, per container, per container × GPU. */
  static Map<String, Long> documentedBudget() throws IOException {
    String fleet = Files.readString(HelmChart.repoRoot().resolve("docs/fleet.md"));
    assertThat(fleet).as("docs/fleet.md is the Fleet document").startsWith("# Fleet\n");
    Matcher m = BUDGET_ROW.matcher(fleet);
    Map<String, Long> budget = new LinkedHashMap<>();
    while (m.find()) {
      budget.put(m.group(1), Long.parseLong(m.group(2)));
    }
    assertThat(budget)
        .as("docs/fleet.md budget rows")
        .containsOnlyKeys(
            "fixed per node", "per GPU", "per container", "per container × GPU", "per MIG device");
    return budget;
  }

  /** Every scrape {@link #seriesOf} settled on, by node shape, for failure messages. */
  private final Map<String, Set<String>> scrapes = new LinkedHashMap<>();

  /** Series per family in each scrape: the family that broke linearity shows in a failure. */
  private String familyCounts() {
    Map<String, Map<String, Long>> byFamily = new java.util.TreeMap<>();
    scrapes.forEach(
        (shape, series) ->
            series.forEach(
                s ->
                    byFamily
                        .computeIfAbsent(s.replaceFirst("\\{.*", ""), f -> new LinkedHashMap<>())
                        .merge(shape, 1L, Long::sum)));
    StringBuilder b = new StringBuilder("\nseries per family (" + scrapes.keySet() + "):");
    byFamily.forEach(
        (family, counts) -> b.append("\n  ").append(family).append(' ').append(counts));
    return b.toString();
  }

  @Test
  void seriesCount_isLinearInGpusContainersAndDevices_andWithinTheDocumentedBudget()
      throws Exception {
    long s41 = seriesOf(2, 4, 1);
    long s81 = seriesOf(2, 8, 1);
    long s42 = seriesOf(2, 4, 2);
    long s82 = seriesOf(2, 8, 2);
    long g4 = seriesOf(4, 4, 1);
    long perGpu = (g4 - s41) / 2;
    long perContainerDevice = (s42 - s41) / 4;
    long perContainer = (s81 - s41) / 4 - perContainerDevice;
    long fixed = s41 - 2 * perGpu - 4 * (perContainer + perContainerDevice);
    String what =
        ("measured: fixed %d + %d per GPU + %d per container + %d per container x GPU (2 GPUs"
                    + " 4x1: %d, 8x1: %d, 4x2: %d, 8x2: %d; 4 GPUs 4x1: %d series)")
                .formatted(fixed, perGpu, perContainer, perContainerDevice, s41, s81, s42, s82, g4)
            + familyCounts();
    // Exactly linear: no family grows with pairs of containers, processes or time.
    assertThat(s82)
        .as(what)
        .isEqualTo(fixed + 2 * perGpu + 8 * perContainer + 16 * perContainerDevice);
    assertThat((s42 - s41) % 4).as(what).isZero();
    assertThat((s81 - s41) % 4).as(what).isZero();
    assertThat((g4 - s41) % 2).as(what).isZero();

    Map<String, Long> budget = documentedBudget();
    assertThat(perContainerDevice)
        .as(
            "series per container x GPU (docs/fleet.md budget; raise it there only on purpose) %s",
            what)
        .isLessThanOrEqualTo(budget.get("per container × GPU"));
    assertThat(perGpu)
        .as("series per GPU (docs/fleet.md budget) %s", what)
        .isLessThanOrEqualTo(budget.get("per GPU"));
    assertThat(perContainer)
        .as("series per container (docs/fleet.md budget) %s", what)
        .isLessThanOrEqualTo(budget.get("per container"));
    assertThat(fixed)
        .as("fixed series per node (docs/fleet.md budget) %s", what)
        .isLessThanOrEqualTo(budget.get("fixed per node"));
  }

  /**
   * Series of a one-GPU node (an H100 with GPM) partitioned into {@code migs} MIG devices, no
   * containers.
   */
  private long migNodeSeries(int migs) throws Exception {
    Path root = tmp.resolve("mig-" + migs);
    Files.createDirectories(root);
    String[] lines = new String[migs];
    for (int j = 0; j < migs; j++) {
      lines[j] =
          "mig 0 %d uuid=MIG-%d name=NVIDIA_H100_MIG_1g.10gb gi=%d sm=%d total=10737418240 used=0"
              .formatted(j, j, j + 1, 10 * j);
    }
    try (ExporterApp app = exporter(root, noPods(), 1, lines)) {
      Set<String> series = settledScrape(app, 1 + migs, 0);
      scrapes.put("1 GPU, " + migs + " MIG devices", series);
      return series.size();
    }
  }

  @Test
  void seriesPerMigDevice_isLinear_andWithinTheDocumentedBudget() throws Exception {
    long one = migNodeSeries(1);
    long three = migNodeSeries(3);
    String what =
        "measured: %d series with 1 MIG device, %d with 3".formatted(one, three) + familyCounts();
    assertThat((three - one) % 2).as(what).isZero();
    assertThat((three - one) / 2)
        .as("series per MIG device (docs/fleet.md budget) %s", what)
        .isLessThanOrEqualTo(documentedBudget().get("per MIG device"));
  }

  @Test
  void podChurn_500PodsComeAndGo_leavesTheSeriesExactlyAsBefore() throws Exception {
    Path root = tmp.resolve("churn");
    Files.createDirectories(root);
    // Registration as NVML sees the node (2 GPUs): otherwise the judgment's registration finding
    // appears whenever an evidence pass has NVML up, which "before" may or may not have caught.
    StaticMetadataSource pods = noPods(2);
    for (int i = 0; i < 4; i++) {
      addPod(root, pods, i, 2, "resident");
    }
    try (ExporterApp app = exporter(root, pods, 2)) {
      Set<String> before = settledScrape(app, 2, 4);
      int churned = 0;
      // 10 waves of 50 pods: they start and are scraped, are deleted and scraped again (their
      // directories stay a while: stale series), then their directories go. Half use two GPUs.
      for (int wave = 0; wave < 10; wave++) {
        Map<String, Path> wavePods = new LinkedHashMap<>();
        for (int i = 0; i < 50; i++) {
          int n = wave * 50 + i;
          String uid = addPod(root, pods, n, 1 + n % 2, "churn");
          wavePods.put(uid, root.resolve(uid + "_main"));
          churned++;
        }
        app.discovery().rescan();
        Set<String> running = scrape(app);
        String firstOfWave = "pod=\"churn-" + wave * 50 + "\"";
        assertThat(running.stream().filter(s -> s.contains(firstOfWave)))
            .as("wave %d is exported while running", wave)
            .isNotEmpty();
        wavePods.keySet().forEach(pods::remove);
        app.discovery().rescan();
        scrape(app);
        for (Path dir : wavePods.values()) {
          deleteTree(dir);
        }
      }
      assertThat(churned).isEqualTo(500);
      Set<String> after = settledScrape(app, 2, 4);
      Set<String> left = new TreeSet<>(after);
      left.removeAll(before);
      Set<String> lost = new TreeSet<>(before);
      lost.removeAll(after);
      assertThat(left).as("series left behind by 500 pods that came and went").isEmpty();
      assertThat(lost).as("series of the resident pods lost during the churn").isEmpty();
    }
  }
}

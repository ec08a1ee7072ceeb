package io.vgpu.exporter.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assumptions.assumeThat;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * Every query of grafana/vgpu-exporter.json, run against a real Prometheus (Debian's, on 127.0.0.1)
 * that scrapes {@code vgpu-exporter demo}: each must be valid PromQL and return data. The demo gets
 * GPUs through the repository's fake libnvidia-ml (libvgpu/build/fake), scripted here with the
 * demo's own GPU UUIDs and child processes, plus one process of no container, so the GPU and
 * attribution panels have something to show.
 */
class DashboardQueryTest {
  private static final JsonMapper JSON = JsonMapper.builder().build();
  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
  private static final Pattern DEVICE =
      Pattern.compile("device_index=\"(\\d+)\",device_uuid=\"(GPU-[^\"]+)\"");
  private static final Duration DEADLINE = Duration.ofSeconds(90);

  private final List<Process> started = new ArrayList<>();
  private ScheduledExecutorService nvmlScript;

  @AfterEach
  void stop() throws InterruptedException {
    if (nvmlScript != null) {
      nvmlScript.shutdownNow();
    }
    for (Process p : started) {
      p.descendants().forEach(ProcessHandle::destroy);
      p.destroy();
      if (!p.waitFor(10, TimeUnit.SECONDS)) {
        p.descendants().forEach(ProcessHandle::destroyForcibly);
        p.destroyForcibly();
      }
    }
  }

  static final Set<String> ABSENT_WHILE_HEALTHY =
      Set.of(
          "vgpu_container_region_unreadable",
          "vgpu_container_region_degraded",
          "vgpu_node_findings",
          "vgpu_container_findings",
          "vgpu_container_unslotted_processes");

  /** A panel query with where it came from, variables replaced by match-all values. */
  record Query(String where, String expr) {}

  static List<Query> dashboardQueries(JsonNode dashboard) {
    List<Query> out = new ArrayList<>();
    for (JsonNode panel : dashboard.get("panels")) {
      for (JsonNode target : panel.path("targets")) {
        out.add(
            new Query(
                "panel \"" + panel.get("title").asString() + "\" " + target.get("refId").asString(),
                substitute(target.get("expr").asString())));
      }
    }
    return out;
  }

  static String substitute(String expr) {
    return expr.replace("$node", ".*")
        .replace("$namespace", ".*")
        .replace("$pod", ".*")
        .replace("$__rate_interval", "15s")
        .replace("$__range", "1m")
        .replaceAll("\\$price_[a-z_]+", "1.5");
  }

  @ParameterizedTest
  @ValueSource(strings = {"grafana/vgpu-exporter.json", "grafana/vgpu-usage-cost.json"})
  void dashboard_everyPanelQueryAgainstPrometheusScrapingTheDemo_returnsData(
      String file, @TempDir Path tmp) throws Exception {
    Path root = HelmChart.repoRoot();
    Path fakeNvml = root.resolve("libvgpu/build/fake/libnvidia-ml.so.1");
    assumeThat(Files.isRegularFile(fakeNvml))
        .as("fake NVML not built (run `make libvgpu`): %s", fakeNvml)
        .isTrue();
    assumeThat(Files.isExecutable(Path.of("/usr/bin/prometheus")))
        .as("Debian's prometheus is not installed (run `make deps`)")
        .isTrue();
    JsonNode dashboard = JSON.readTree(root.resolve(file).toFile());
    List<Query> queries = dashboardQueries(dashboard);
    assertThat(queries).hasSizeGreaterThan(file.endsWith("usage-cost.json") ? 12 : 20);

    int exporterPort = freePort();
    Path nvmlConfig = tmp.resolve("nvml.conf");
    Process demo = startDemo(fakeNvml, nvmlConfig, exporterPort, tmp.resolve("demo.log"));
    String metrics = waitForMetrics(exporterPort, demo, tmp.resolve("demo.log"));
    Map<Integer, String> gpus = new TreeMap<>();
    Matcher m = DEVICE.matcher(metrics);
    while (m.find()) {
      gpus.put(Integer.parseInt(m.group(1)), m.group(2));
    }
    assertThat(gpus).as("the demo's containers name their GPUs").isNotEmpty();
    nvmlScript = Executors.newSingleThreadScheduledExecutor();
    ScheduledFuture<?> script =
        nvmlScript.scheduleAtFixedRate(
            () -> writeNvmlScript(nvmlConfig, gpus, demo.toHandle()),
            0,
            500,
            TimeUnit.MILLISECONDS);

    int promPort = freePort();
    startPrometheus(tmp, exporterPort, promPort);
    URI prometheus = URI.create("http://127.0.0.1:" + promPort);

    // Queries over families the demo does not serve at all (e.g. attribution metrics while the
    // demo runs without the attribution service) cannot be checked; they are reported, and the
    // test is then aborted (skipped) with that list after checking everything else strictly.
    Thread.sleep(3000); // a few ticks of the demo and the NVML script
    Set<String> served =
        servedFamilies(waitForMetrics(exporterPort, demo, tmp.resolve("demo.log")));
    // Families that are absent while nothing is wrong (the alert series): a healthy demo serves
    // none of them, so their panels must still answer, with a 0 fallback (`... or 0 * ...`); they
    // are checked like every other query, not left unchecked.
    served.addAll(ABSENT_WHILE_HEALTHY);
    Map<String, String> unchecked = new LinkedHashMap<>();
    List<Query> checked = new ArrayList<>();
    for (Query q : queries) {
      List<String> missing =
          referencedSeries(q.expr()).stream().filter(n -> !served.contains(n)).toList();
      if (missing.isEmpty()) {
        checked.add(q);
      } else {
        unchecked.put(q.where(), String.join(", ", missing));
      }
    }
    assertThat(checked).as("queries the demo can answer").hasSizeGreaterThan(queries.size() / 3);

    Map<String, String> empty = new LinkedHashMap<>();
    long deadline = System.nanoTime() + DEADLINE.toNanos();
    do {
      empty.clear();
      for (Query q : checked) {
        JsonNode result = query(prometheus, q);
        if (result.isEmpty()) {
          empty.put(q.where(), q.expr());
        }
      }
      for (var u : unchecked.keySet()) {
        Query q = queries.stream().filter(x -> x.where().equals(u)).findFirst().orElseThrow();
        query(prometheus, q); // still valid PromQL
      }
      for (JsonNode variable : dashboard.get("templating").get("list")) {
        if (variable.get("type").asString().equals("query")
            && labelValues(prometheus, variable.get("query").get("query").asString()).isEmpty()) {
          empty.put(
              "variable $" + variable.get("name").asString(), variable.get("query").toString());
        }
      }
      if (empty.isEmpty()) {
        break;
      }
      Thread.sleep(1000);
    } while (System.nanoTime() < deadline);

    if (script.isDone()) {
      script.get(); // the NVML script writer died: surface why
    }
    assertThat(empty)
        .as(
            "dashboard queries with no data after %ds of scraping the demo (demo log: %s)",
            DEADLINE.toSeconds(), tmp.resolve("demo.log"))
        .isEmpty();
    assumeThat(unchecked)
        .as(
            "%d of %d dashboard queries checked and returning data; these read families that"
                + " `vgpu-exporter demo` does not serve yet, so they were not checked",
            checked.size(), queries.size())
        .isEmpty();
  }

  /** Families present in an exposition (sample names, counters with _total). */
  static Set<String> servedFamilies(String exposition) {
    Set<String> names = new TreeSet<>();
    for (String line : exposition.lines().toList()) {
      if (!line.isEmpty() && !line.startsWith("#")) {
        int end = line.indexOf('{');
        names.add(line.substring(0, end >= 0 ? end : line.indexOf(' ')));
      }
    }
    return names;
  }

  /** The vgpu_* series a PromQL expression reads (up{} is scraped by Prometheus itself). */
  static Set<String> referencedSeries(String expr) {
    Set<String> names = new TreeSet<>();
    Matcher m = Pattern.compile("\\b(vgpu_[a-z0-9_]+)\\b").matcher(expr);
    while (m.find()) {
      names.add(m.group(1));
    }
    return names;
  }

  private Process startDemo(Path fakeNvml, Path nvmlConfig, int port, Path log) throws IOException {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    ProcessBuilder pb =
        new ProcessBuilder(
                java,
                "--enable-native-access=ALL-UNNAMED",
                "-XX:+UseSerialGC",
                "-Xmx128m",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                System.getProperty("java.class.path"),
                "io.vgpu.exporter.Main",
                "demo",
                "--port=" + port,
                "--bind=127.0.0.1",
                "--duration=300s",
                "--nvml=true",
                "--nvml.library=" + fakeNvml,
                "--nvml.sample-interval=200ms")
            .redirectErrorStream(true)
            .redirectOutput(log.toFile());
    pb.environment().put("FAKE_NVML_CONFIG", nvmlConfig.toString());
    Process p = pb.start();
    started.add(p);
    return p;
  }

  private static String waitForMetrics(int port, Process demo, Path log) throws Exception {
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (System.nanoTime() < deadline) {
      if (!demo.isAlive()) {
        throw new AssertionError("demo exited " + demo.exitValue() + ":\n" + Files.readString(log));
      }
      try {
        HttpResponse<String> r =
            HTTP.send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/metrics")).build(),
                HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() == 200 && r.body().contains("vgpu_container_memory_limit_bytes")) {
          return r.body();
        }
      } catch (IOException notYet) {
        // not listening yet
      }
      Thread.sleep(300);
    }
    throw new AssertionError(
        "demo did not serve container metrics in 60 s:\n" + Files.readString(log));
  }

  /**
   * GPUs with the demo's UUIDs, each demo child process busy on one of them, and one process of
   * this test JVM (in no container): what the exporter reconciles against.
   */
  private static void writeNvmlScript(Path file, Map<Integer, String> gpus, ProcessHandle demo) {
    long nowMicros = System.currentTimeMillis() * 1000;
    StringBuilder s = new StringBuilder();
    for (var g : gpus.entrySet()) {
      s.append(
          "device %d uuid=%s name=NVIDIA_H100_80GB_HBM3 total=85520809984 used=%d util=%d memutil=20"
                  .formatted(g.getKey(), g.getValue(), 12L << 30, 55 + g.getKey())
              + " energy=%d%n".formatted(nowMicros / 1000 * 300)); // 300 W
    }
    List<Long> pids = demo.descendants().map(ProcessHandle::pid).toList();
    int n = gpus.size();
    List<Integer> indexes = List.copyOf(gpus.keySet());
    for (int i = 0; i < pids.size(); i++) {
      int dev = indexes.get(i % n);
      s.append("process %d pid=%d used=%d%n".formatted(dev, pids.get(i), 512L << 20));
      s.append(
          "sample %d pid=%d sm=%d mem=5 ts=%d%n"
              .formatted(dev, pids.get(i), 10 + i % 30, nowMicros));
    }
    long self = ProcessHandle.current().pid();
    s.append("process %d pid=%d used=%d%n".formatted(indexes.getFirst(), self, 1L << 30));
    s.append("sample %d pid=%d sm=7 mem=1 ts=%d%n".formatted(indexes.getFirst(), self, nowMicros));
    try {
      Path next = file.resolveSibling(file.getFileName() + ".next");
      Files.writeString(next, s);
      Files.move(next, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  private void startPrometheus(Path tmp, int exporterPort, int promPort) throws Exception {
    Path config = tmp.resolve("prometheus.yml");
    Files.writeString(
        config,
        """
        global:
          scrape_interval: 1s
          evaluation_interval: 1s
        scrape_configs:
          - job_name: vgpu-exporter
            static_configs:
              - targets: ['127.0.0.1:%d']
        """
            .formatted(exporterPort));
    Process p =
        new ProcessBuilder(
                "/usr/bin/prometheus",
                "--config.file=" + config,
                "--storage.tsdb.path=" + tmp.resolve("tsdb"),
                "--web.listen-address=127.0.0.1:" + promPort,
                "--log.level=warn")
            .redirectErrorStream(true)
            .redirectOutput(tmp.resolve("prometheus.log").toFile())
            .start();
    started.add(p);
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (System.nanoTime() < deadline) {
      try {
        HttpResponse<String> r =
            HTTP.send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + promPort + "/-/ready"))
                    .build(),
                HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() == 200) {
          return;
        }
      } catch (IOException notYet) {
        // starting
      }
      Thread.sleep(200);
    }
    throw new AssertionError(
        "prometheus not ready:\n" + Files.readString(tmp.resolve("prometheus.log")));
  }

  /** The result array of an instant query; a PromQL error fails the test at once. */
  private static JsonNode query(URI prometheus, Query q) throws Exception {
    JsonNode body =
        get(
            prometheus,
            "/api/v1/query?query=" + URLEncoder.encode(q.expr(), StandardCharsets.UTF_8));
    assertThat(body.get("status").asString())
        .as("%s is not valid PromQL: %s\n%s", q.where(), body.path("error").asString(), q.expr())
        .isEqualTo("success");
    return body.get("data").get("result");
  }

  /** Values of a Grafana {@code label_values(selector, label)} variable query. */
  private static JsonNode labelValues(URI prometheus, String variableQuery) throws Exception {
    Matcher m = Pattern.compile("label_values\\((.*),\\s*(\\w+)\\)").matcher(variableQuery);
    assertThat(m.matches()).as("variable query %s", variableQuery).isTrue();
    String selector = substitute(m.group(1));
    JsonNode body =
        get(
            prometheus,
            "/api/v1/label/"
                + m.group(2)
                + "/values?match[]="
                + URLEncoder.encode(selector, StandardCharsets.UTF_8));
    assertThat(body.get("status").asString())
        .as("variable query %s", variableQuery)
        .isEqualTo("success");
    return body.get("data");
  }

  private static JsonNode get(URI base, String pathAndQuery) throws Exception {
    HttpResponse<String> r =
        HTTP.send(
            HttpRequest.newBuilder(URI.create(base + pathAndQuery))
                .timeout(Duration.ofSeconds(10))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    return JSON.readTree(r.body());
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }
}

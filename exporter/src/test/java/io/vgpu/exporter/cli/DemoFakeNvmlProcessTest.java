package io.vgpu.exporter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * {@code vgpu-exporter demo} as {@code make demo} runs it: its own JVM (the fake libnvidia-ml holds
 * process-wide state, so it cannot share the test's), from the repository with the fake NVML found
 * automatically ({@code --fake-nvml auto}, the default). Over real HTTP: per-container SM
 * utilization, the attribution families and the host GPU families carry data, the status page shows
 * SM utilization per container and who shares each GPU, and nothing of this machine (a real process
 * or pod) shows up: only the demo's containers.
 */
class DemoFakeNvmlProcessTest {
  static final int CONTAINERS = 3;
  static final JsonMapper JSON = JsonMapper.builder().build();
  static final Pattern SERIES =
      Pattern.compile("(?m)^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\\{([^}]*)\\})? ([^ \\n]+)$");
  static final Pattern POD_UID = Pattern.compile("pod_uid=\"([^\"]*)\"");

  @TempDir Path tmp;
  private Process demo;

  @AfterEach
  void stop() throws InterruptedException {
    if (demo != null && demo.isAlive()) {
      demo.destroy(); // SIGTERM: the demo's shutdown hook removes its temp tree
      if (!demo.waitFor(10, TimeUnit.SECONDS)) {
        demo.destroyForcibly();
      }
    }
  }

  record Sample(String name, String labels, double value) {}

  static List<Sample> samples(String exposition) {
    List<Sample> out = new ArrayList<>();
    Matcher m = SERIES.matcher(exposition);
    while (m.find()) {
      out.add(
          new Sample(
              m.group(1), m.group(2) == null ? "" : m.group(2), Double.parseDouble(m.group(3))));
    }
    return out;
  }

  static List<Sample> named(List<Sample> all, String name) {
    return all.stream().filter(s -> s.name().equals(name)).toList();
  }

  static boolean anyPositive(List<Sample> all, String name) {
    return named(all, name).stream().anyMatch(s -> s.value() > 0);
  }

  /** The repository root: where {@code make demo} runs and the fake library is built. */
  static Path repositoryRoot() {
    for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
      if (Files.exists(p.resolve("libvgpu/test/fake/fake_nvml.c"))) {
        return p;
      }
    }
    throw new IllegalStateException("not inside the repository");
  }

  static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }

  @Test
  void demo_childJvmWithAutomaticFakeNvml_servesUtilizationAttributionAndHostGpuData()
      throws Exception {
    Path root = repositoryRoot();
    // make test and make demo build it (make -C libvgpu all); a bare mvn run builds it the same
    // way.
    if (!Files.isRegularFile(root.resolve(DemoCommand.FAKE_LIBRARY))) {
      Process make =
          new ProcessBuilder("make", "-s", "-C", root.resolve("libvgpu").toString(), "fakes")
              .redirectErrorStream(true)
              .redirectOutput(tmp.resolve("make.log").toFile())
              .start();
      assertThat(make.waitFor(120, TimeUnit.SECONDS)).as("make -C libvgpu fakes").isTrue();
    }
    assertThat(root.resolve(DemoCommand.FAKE_LIBRARY))
        .as("the fake NVML make builds (make -C libvgpu all)")
        .isRegularFile();
    int port = freePort();
    Path log = tmp.resolve("demo.log");
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    ProcessBuilder pb =
        new ProcessBuilder(
                java,
                "-cp",
                System.getProperty("java.class.path"),
                "io.vgpu.exporter.Main",
                "demo",
                "--port",
                Integer.toString(port),
                "--containers",
                Integer.toString(CONTAINERS),
                "--gpus",
                "2",
                "--pid-namespaces",
                "false",
                "--duration",
                "90s")
            .directory(root.toFile())
            .redirectErrorStream(true)
            .redirectOutput(log.toFile());
    pb.environment().remove("FAKE_NVML_CONFIG");
    demo = pb.start();

    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    String base = "http://127.0.0.1:" + port;
    // The demo starts real processes for its problem pods too (some killed and reaped): allow a
    // loaded machine time.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    List<Sample> metrics = List.of();
    while (System.nanoTime() < deadline && demo.isAlive()) {
      try {
        metrics = samples(get(http, base + "/metrics"));
        if (anyPositive(metrics, "vgpu_container_sm_utilization_ratio")
            && anyPositive(metrics, "vgpu_gpu_utilization_ratio")
            && anyPositive(metrics, "vgpu_gpu_containers")
            // the fake kubelet answered: the pods without a region are there
            && named(metrics, "vgpu_container_device_info").stream()
                .anyMatch(s -> s.labels().contains("sharing=\"timeslice\""))) {
          break;
        }
      } catch (IOException e) {
        // not listening yet
      }
      Thread.sleep(200);
    }
    assertThat(demo.isAlive())
        .as("demo still running; its output:\n" + Files.readString(log))
        .isTrue();

    // Per-container SM utilization from NVML (the fake's per-process samples), not unknown.
    assertThat(anyPositive(metrics, "vgpu_container_sm_utilization_ratio"))
        .as("per-container SM utilization; demo output:\n" + Files.readString(log))
        .isTrue();
    assertThat(named(metrics, "vgpu_container_sm_utilization_unknown"))
        .noneMatch(s -> s.labels().contains("reason=\"nvml_unavailable\""));
    // Attribution families.
    assertThat(anyPositive(metrics, "vgpu_gpu_containers")).isTrue();
    assertThat(anyPositive(metrics, "vgpu_gpu_processes")).isTrue();
    assertThat(anyPositive(metrics, "vgpu_container_nvml_memory_used_bytes")).isTrue();
    // Host GPU families (vgpu_gpu_* and HAMi's hami_host_gpu_*).
    assertThat(anyPositive(metrics, "vgpu_gpu_utilization_ratio")).isTrue();
    assertThat(anyPositive(metrics, "vgpu_gpu_memory_used_bytes")).isTrue();
    assertThat(anyPositive(metrics, "vgpu_gpu_memory_total_bytes")).isTrue();
    // The vGPU pods' 2 GPUs and the other sharing kinds' 3 (whole, MIG-partitioned, time-sliced),
    // and the MIG-partitioned GPU's 2 MIG devices, which NVML lists beside it.
    assertThat(named(metrics, "vgpu_gpu_memory_total_bytes"))
        .filteredOn(s -> s.labels().contains("device_uuid=\"GPU-"))
        .hasSize(2 + 3);
    assertThat(named(metrics, "vgpu_gpu_memory_total_bytes"))
        .filteredOn(s -> s.labels().contains("device_uuid=\"MIG-"))
        .hasSize(2);

    // Only the demo's containers: every pod_uid in /api and /metrics names a directory the demo
    // made under its cache root (a real process or pod of this machine would add another).
    Matcher cacheRoot = Pattern.compile("cache root (\\S+)").matcher(Files.readString(log));
    assertThat(cacheRoot.find()).as("the demo prints its cache root").isTrue();
    Set<String> demoUids = new TreeSet<>();
    try (var dirs = Files.list(Path.of(cacheRoot.group(1)))) {
      dirs.map(d -> d.getFileName().toString())
          .filter(n -> n.contains("_"))
          .forEach(n -> demoUids.add(n.substring(0, n.indexOf('_'))));
    }
    JsonNode api = JSON.readTree(get(http, base + "/api/v1/containers"));
    Set<String> apiUids = new TreeSet<>();
    for (JsonNode c : api.get("containers")) {
      apiUids.add(c.get("pod_uid").asString());
    }
    assertThat(apiUids).hasSizeGreaterThanOrEqualTo(CONTAINERS);
    assertThat(demoUids).containsAll(apiUids);
    Set<String> metricUids = new TreeSet<>();
    for (Sample s : metrics) {
      Matcher m = POD_UID.matcher(s.labels());
      if (m.find()) {
        metricUids.add(m.group(1));
      }
    }
    // Beside them the pods that hold a GPU without a region (no directory, not in /api).
    Set<String> holderUids = new TreeSet<>();
    io.vgpu.exporter.demo.DemoNode.otherSharingPods()
        .forEach(p -> holderUids.add(io.vgpu.exporter.demo.DemoNode.podUid(p)));
    Set<String> expectedUids = new TreeSet<>(apiUids);
    expectedUids.addAll(holderUids);
    assertThat(metricUids).isEqualTo(expectedUids);
    assertThat(named(metrics, "vgpu_container_processes"))
        .as("4 liveness states per container")
        .hasSize(4 * (api.get("containers").size() + holderUids.size()));

    // The status page: SM utilization per container (NVML's, non-zero somewhere) and who shares
    // each GPU. It judges the background evidence pass, whose NVML snapshot may predate the first
    // samples: wait for a pass that has them (one every 5 s).
    String page = get(http, base + "/");
    while (!page.contains("% (NVML)")
        && System.nanoTime() < deadline + TimeUnit.SECONDS.toNanos(10)) {
      Thread.sleep(500);
      page = get(http, base + "/");
    }
    assertThat(page).contains("<table id=\"containers\">").contains("Who shares each GPU");
    assertThat(page).containsPattern("<tr class=\"gpu\" data-uuid=\"[^\"]+\"><td rowspan");
    Matcher nvml = Pattern.compile("(\\d+)% \\(NVML\\)").matcher(page);
    List<Integer> percents = new ArrayList<>();
    while (nvml.find()) {
      percents.add(Integer.parseInt(nvml.group(1)));
    }
    assertThat(percents).as("NVML SM utilization cells on the page").isNotEmpty();
    assertThat(percents).anyMatch(p -> p > 0);
    assertThat(page).contains("NVML:").contains("busy");
    for (String uid : apiUids) {
      assertThat(page).contains(uid);
    }
  }

  private static String get(HttpClient http, String url) throws IOException, InterruptedException {
    HttpResponse<String> r =
        http.send(
            HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).build(),
            HttpResponse.BodyHandlers.ofString());
    if (r.statusCode() != 200) {
      throw new IOException(url + " answered " + r.statusCode());
    }
    return r.body();
  }
}

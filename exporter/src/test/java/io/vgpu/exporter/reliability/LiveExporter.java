package io.vgpu.exporter.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.ExporterApp;
import io.vgpu.exporter.attribution.AttributionService;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.k8s.PodMetadataSource;
import io.vgpu.exporter.nvml.FakeNvml;
import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestRegions;
import io.vgpu.hostpid.testing.ProcEntry;
import io.vgpu.hostpid.testing.ProcTree;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.InstantSource;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;

/**
 * The real exporter, assembled exactly as {@code serve} assembles it (ExporterApp + the NVML and
 * attribution module), listening on an ephemeral port over a temp cache root, with one healthy
 * neighbour container whose values every hostile test asserts exactly.
 */
final class LiveExporter implements AutoCloseable {
  static final String HEALTHY_UID = "aaaaaaaa-0000-4000-8000-000000000001";
  static final String HEALTHY_CTR = "healthy";

  /** The neighbour: 1 device, 4096 MiB limit, 30 % SM, two running slots of 700 MiB each. */
  static final long HEALTHY_LIMIT = 4096 * TestRegions.MIB;

  static final long HEALTHY_USED = 2 * 700 * TestRegions.MIB;

  final Path root;
  final ExporterApp app;
  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  /** The procfs fixture this instance made (outside the test's tree); null when given one. */
  private final Path ownProc;

  private final Path proc;

  private LiveExporter(Path root, ExporterApp app, Path proc, Path ownProc) {
    this.root = root;
    this.app = app;
    this.proc = proc;
    this.ownProc = ownProc;
  }

  /**
   * The neighbour's region was written after start: its processes map it now (and an evidence pass
   * judges them).
   */
  void neighbourWritten() throws IOException {
    neighbourProcesses(proc, root);
  }

  /** Flags a test starts from: no Kubernetes, no NVML, fast rescans, read-only (no feedback). */
  static Map<String, String> baseFlags(Path root) {
    Map<String, String> flags = new HashMap<>();
    flags.put("path.cache-root", root.toString());
    flags.put("node-name", "rel-node");
    flags.put("kubernetes", "false");
    flags.put("nvml", "false");
    flags.put("attribution.feedback", "false");
    // The region-only path (start adds a procfs fixture where the neighbour's processes live).
    flags.put("collectors.disabled", "attribution");
    flags.put("discovery.rescan-interval", "200ms");
    // Tests with thousands of directories count on all of them being read (BoundedCostTest checks
    // the default cap through the launcher's own flags).
    flags.put("discovery.max-containers", "100000");
    flags.put("web.listen-address", "127.0.0.1");
    flags.put("web.listen-port", "0");
    return flags;
  }

  /**
   * Overrides for the default serve path: NVML on (the repository's fake libnvidia-ml, one GPU on
   * which the neighbour's two processes run) and attribution on with HAMi-parity feedback (which
   * maps tenant regions read-write), over a procfs fixture in {@code work} where those processes
   * live in the neighbour's pod (host pids 1101 and 1102, container pids 101 and 102, as its slots
   * record). Hostile files then meet every collector {@code serve} runs by default, and the
   * neighbour's slots resolve as alive, so its values stay exact.
   */
  static Map<String, String> defaultServePath(Path work) throws IOException {
    Path proc = Files.createDirectories(work.resolve("proc"));
    for (int pid : new int[] {101, 102}) {
      writePodProcess(proc, pid + 1000, pid, HEALTHY_UID);
    }
    FakeNvml.in(work)
        .write(
            "device 0 uuid="
                + TestRegions.uuid(0)
                + " name=H100 total=85899345920 used="
                + HEALTHY_USED
                + " util=30 memutil=5",
            "process 0 pid=1101 used=" + HEALTHY_USED / 2,
            "process 0 pid=1102 used=" + HEALTHY_USED / 2);
    Map<String, String> flags = new HashMap<>();
    flags.put("nvml", "true");
    flags.put("nvml.library", FakeNvml.library().toString());
    flags.put("collectors.disabled", "");
    flags.put("attribution.feedback", "true"); // the HAMi-replacement mode: writes into regions
    flags.put("path.procfs", proc.toString());
    return flags;
  }

  /**
   * The neighbour's two processes (host pids 1101 and 1102, container pids 101 and 102) in {@code
   * proc}, each mapping the neighbour's region when it is written: the one judgment (which every
   * surface, {@code /metrics} included, renders) then calls its slots ALIVE, so its values stay
   * exact. A procfs fixture, never the real {@code /proc}.
   */
  static void neighbourProcesses(Path proc, Path root) {
    if (proc.equals(Path.of("/proc"))) {
      return;
    }
    Path region = root.resolve(HEALTHY_UID + "_" + HEALTHY_CTR).resolve("a.cache");
    ProcTree tree = ProcTree.at(proc);
    for (int pid : new int[] {101, 102}) {
      if (!Files.exists(tree.root().resolve(Integer.toString(pid + 1000)).resolve("status"))) {
        writePodProcess(proc, pid + 1000, pid, HEALTHY_UID);
      }
      if (Files.isRegularFile(region, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
        tree.write(pid + 1000, "maps", ProcEntry.regionMapping(region) + "\n");
      }
    }
  }

  /** {@code stat}, {@code status} and {@code cgroup} of one pod process, as Linux formats them. */
  static void writePodProcess(Path proc, int hostPid, int containerPid, String podUid) {
    ProcEntry.in(ProcTree.at(proc), hostPid, containerPid).pod(podUid).write();
  }

  /**
   * Waits until the default serve path has run over the node: NVML up and the neighbour attributed
   * with both slots resolved to live processes.
   */
  void awaitAttributed() {
    ContainerKey healthy = new ContainerKey(HEALTHY_UID, HEALTHY_CTR);
    Await.until(
        Duration.ofSeconds(30),
        () -> {
          var c = attribution().latest().container(healthy);
          return c.isPresent()
              && c.get().slots().size() == 2
              && c.get().slots().stream()
                  .allMatch(v -> v.hostPid().equals(OptionalInt.of(v.pid() + 1000)))
              && scrape().value("vgpu_exporter_nvml_up") == 1;
        });
  }

  static void writeHealthy(Path root) throws IOException {
    TestRegions.write(
        root,
        HEALTHY_UID,
        HEALTHY_CTR,
        "a.cache",
        TestRegions.spec(1, 4096, 30, new int[] {101, 102}, 700, 12, true));
  }

  static LiveExporter start(Path root, Map<String, String> overrides) {
    return start(root, overrides, null, InstantSource.system());
  }

  static LiveExporter start(Path root, Map<String, String> overrides, PodMetadataSource metadata) {
    return start(root, overrides, metadata, InstantSource.system());
  }

  /** With the attribution service (and its feedback period) on {@code clock}. */
  static LiveExporter start(Path root, Map<String, String> overrides, InstantSource clock) {
    return start(root, overrides, null, clock);
  }

  static LiveExporter start(
      Path root, Map<String, String> overrides, PodMetadataSource metadata, InstantSource clock) {
    Map<String, String> flags = baseFlags(root);
    flags.putAll(overrides);
    Path proc;
    Path ownProc = null;
    try {
      if (flags.containsKey("path.procfs")) {
        proc = Path.of(flags.get("path.procfs"));
      } else {
        // Outside the test's directory: tests snapshot that tree to prove nothing was written.
        ownProc = Files.createTempDirectory("live-exporter-proc-");
        proc = ownProc;
        flags.put("path.procfs", proc.toString());
      }
      neighbourProcesses(proc, root);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    ExporterConfig config = ExporterConfig.resolve(flags, Map.of());
    ExporterApp.Builder b = ExporterApp.builder(config).clock(clock);
    if (metadata != null) {
      b.metadata(metadata);
    }
    ExporterApp app = b.build().start();
    // Discovery's first pass, then an evidence pass over it: the neighbour's slots are judged
    // (ALIVE) before the first scrape instead of UNKNOWN until the background pass comes round.
    Await.until(Duration.ofSeconds(20), () -> app.discovery().current().generation() > 0);
    app.evidence().runOnce();
    return new LiveExporter(root, app, proc, ownProc);
  }

  /** The attribution service; fails when the attribution collector is disabled. */
  AttributionService attribution() {
    return app.attribution().orElseThrow();
  }

  HttpResponse<String> get(String path) throws IOException, InterruptedException {
    return send(HttpRequest.newBuilder(uri(path)).timeout(Duration.ofSeconds(30)).GET().build());
  }

  HttpResponse<String> send(HttpRequest request) throws IOException, InterruptedException {
    return http.send(request, HttpResponse.BodyHandlers.ofString());
  }

  URI uri(String path) {
    return URI.create("http://127.0.0.1:" + app.port() + path);
  }

  Samples scrape() throws IOException, InterruptedException {
    HttpResponse<String> r = get("/metrics");
    assertThat(r.statusCode()).as("/metrics status").isEqualTo(200);
    return Samples.parse(r.body());
  }

  /** Waits for a discovery pass that started after now (so files written before are seen). */
  void awaitPass() {
    long gen = app.discovery().current().generation();
    app.discovery().requestRescan();
    Await.until(Duration.ofSeconds(20), () -> app.discovery().current().generation() > gen + 1);
    // And an evidence pass over what it found: the slot liveness a scrape renders.
    app.evidence().runOnce();
  }

  double parseErrors(String reason) throws IOException, InterruptedException {
    return scrape().value("vgpu_exporter_parse_errors_total", "reason", reason);
  }

  /** The neighbour's metrics, exactly as written. */
  static void assertHealthyNeighbour(Samples s) {
    String[] k = {"pod_uid", HEALTHY_UID, "container", HEALTHY_CTR, "device_index", "0"};
    assertThat(s.value("vgpu_container_memory_used_bytes", k)).isEqualTo((double) HEALTHY_USED);
    assertThat(s.value("vgpu_container_memory_limit_bytes", k)).isEqualTo((double) HEALTHY_LIMIT);
    assertThat(s.value("vgpu_container_sm_limit_ratio", k)).isEqualTo(0.30);
    assertThat(
            s.value(
                "vgpu_container_memory_breakdown_bytes",
                "pod_uid",
                HEALTHY_UID,
                "device_index",
                "0",
                "kind",
                "data"))
        .isEqualTo((double) (2 * 698 * TestRegions.MIB));
    assertThat(
            s.value(
                "vgpu_container_processes",
                "pod_uid",
                HEALTHY_UID,
                "container",
                HEALTHY_CTR,
                "state",
                "running"))
        .isEqualTo(2);
  }

  /** Every /proc/self/fd target and every mapped file of this JVM. */
  static List<String> openedPaths() throws IOException {
    List<String> out = new java.util.ArrayList<>();
    try (var fds = Files.list(Path.of("/proc/self/fd"))) {
      for (Path fd : fds.toList()) {
        try {
          out.add(Files.readSymbolicLink(fd).toString());
        } catch (IOException e) {
          // closed between list and readlink
        }
      }
    }
    for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
      int slash = line.indexOf('/');
      if (slash > 0) {
        out.add(line.substring(slash));
      }
    }
    return out;
  }

  @Override
  public void close() {
    app.close();
    http.close();
    if (ownProc != null) {
      try (var walk = Files.walk(ownProc)) {
        walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      } catch (IOException e) {
        // a temp directory left behind
      }
    }
  }
}

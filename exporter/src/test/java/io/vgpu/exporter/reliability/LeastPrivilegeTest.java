package io.vgpu.exporter.reliability;

import static io.vgpu.exporter.reliability.LiveExporter.assertHealthyNeighbour;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.vgpu.exporter.attribution.AttributionService;
import io.vgpu.exporter.config.Endpoints;
import io.vgpu.exporter.nvml.MutableClock;
import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestRegions;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What each mode needs and touches: the read-only mode maps every region {@code r--s} and writes
 * nothing anywhere; no HTTP method other than GET changes anything on any route; and the read-only
 * mode runs as an unprivileged user (uid 65534, no capabilities) over root-owned 0644 regions.
 */
class LeastPrivilegeTest {
  private static final Pattern WHITESPACE = Pattern.compile("\\s+");

  @TempDir Path dir;
  private LiveExporter ex;
  private Process child;

  @AfterEach
  void tearDown() throws InterruptedException {
    if (ex != null) {
      ex.close();
    }
    if (child != null) {
      child.destroy();
      if (!child.waitFor(10, TimeUnit.SECONDS)) {
        child.destroyForcibly();
      }
    }
  }

  private Path root() throws IOException {
    Path root = Files.createDirectories(dir.resolve("containers"));
    LiveExporter.writeHealthy(root);
    TestRegions.write(
        root,
        "cccccccc-0000-4000-8000-00000000000c",
        "other",
        "a.cache",
        TestRegions.spec(2, 2048, 0, new int[] {5}, 300, 0, false));
    return root;
  }

  /** The permissions column of a /proc/<pid>/maps line ("r--s", "rw-s", ...). */
  private static String perms(String mapsLine) {
    return WHITESPACE.splitAsStream(mapsLine).skip(1).findFirst().orElse("");
  }

  /** Region mappings of this JVM under {@code root}: "perms path" per mapping line. */
  private static List<String> regionMappings(Path root) throws IOException {
    List<String> out = new ArrayList<>();
    String prefix = root.toAbsolutePath().toString();
    for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
      int slash = line.indexOf('/');
      if (slash > 0 && line.substring(slash).startsWith(prefix)) {
        out.add(perms(line) + " " + line.substring(slash));
      }
    }
    return out;
  }

  private List<Integer> hammerWithNonGetMethods() throws Exception {
    List<Integer> codes = new ArrayList<>();
    List<String> paths = new ArrayList<>(Endpoints.ALL);
    paths.addAll(List.of("/api/v1/containers/x", "/debug", "/admin", "/metrics?name[]=x"));
    for (String path : paths) {
      for (String method : List.of("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE")) {
        HttpRequest r =
            HttpRequest.newBuilder(ex.uri(path))
                .method(method, HttpRequest.BodyPublishers.ofString("{\"rm\":\"-rf\"}"))
                .build();
        codes.add(ex.send(r).statusCode());
      }
    }
    return codes;
  }

  @Test
  void readOnlyMode_mapsEveryRegionReadOnlyShared_andWritesNothing() throws Exception {
    Path root = root();
    var before = Snapshots.tree(dir);
    ex = LiveExporter.start(root, Map.of());
    for (int i = 0; i < 5; i++) {
      ex.awaitPass();
      assertHealthyNeighbour(ex.scrape());
    }
    List<String> maps = regionMappings(root);
    assertThat(maps).hasSize(2).allMatch(m -> m.startsWith("r--s "), "mapped r--s");
    hammerWithNonGetMethods();
    assertThat(Snapshots.tree(dir)).as("nothing under the temp dir changed").isEqualTo(before);
  }

  @Test
  void httpRoutes_everyNonGetMethod_refusedAndChangesNothing() throws Exception {
    Path root = root();
    ex = LiveExporter.start(root, Map.of());
    ex.awaitPass();
    var before = Snapshots.tree(dir);
    List<Integer> codes = hammerWithNonGetMethods();
    assertThat(codes).isNotEmpty().allMatch(c -> c >= 400, "4xx/5xx for every non-GET request");
    assertThat(codes).doesNotContain(500);
    assertThat(Snapshots.tree(dir)).isEqualTo(before);
    assertHealthyNeighbour(ex.scrape());
  }

  @Test
  void feedbackOn_withoutAGpuSignal_feedbackPassesWriteNothingAndMapNothingWritable()
      throws Exception {
    // HAMi-parity feedback on (the HAMi-replacement mode). Feedback waits for NVML and acts only on
    // regions with live processes of their own pod, so with NVML off and the fixture's made-up pids
    // it must not write at all, however many passes run. Passes are driven by a hand-moved clock,
    // one per 5 s step, instead of waiting for the real period.
    Path root = root();
    var before = Snapshots.tree(dir);
    MutableClock clock = new MutableClock(Instant.parse("2026-11-26T02:00:00Z"));
    ex =
        LiveExporter.start(
            root, Map.of("attribution.feedback", "true", "collectors.disabled", ""), clock);
    AttributionService attribution = ex.attribution();
    ex.awaitPass();
    for (int pass = 0; pass < 3; pass++) {
      clock.advance(Duration.ofSeconds(5));
      attribution.runOnce();
    }
    assertThat(regionWrites(ex.scrape()))
        .containsExactlyInAnyOrderEntriesOf(
            Map.of("recent_kernel", 0.0, "utilization_switch", 0.0, "hostpid", 0.0));
    assertThat(regionMappings(root)).hasSize(2).allMatch(m -> m.startsWith("r--s "), "mapped r--s");
    assertThat(attribution.writableMappings()).isZero();
    assertThat(Snapshots.tree(dir)).as("nothing under the temp dir changed").isEqualTo(before);
  }

  private static Map<String, Double> regionWrites(Samples s) {
    Map<String, Double> out = new java.util.TreeMap<>();
    for (Samples.Sample x : s.find("vgpu_exporter_region_writes_total")) {
      out.merge(x.labels().get("field"), x.value(), Double::sum);
    }
    return out;
  }

  /** The test class path, copied where uid 65534 can read it (~/.m2 is root-only). */
  private Path readableClassPath() throws IOException {
    Path cp = Files.createDirectories(dir.resolve("cp"));
    StringBuilder out = new StringBuilder();
    int i = 0;
    for (String entry :
        Pattern.compile(":").splitAsStream(System.getProperty("java.class.path")).toList()) {
      Path src = Path.of(entry);
      if (!Files.exists(src)) {
        continue;
      }
      Path dst = cp.resolve(i++ + "-" + src.getFileName());
      if (Files.isDirectory(src)) {
        try (var walk = Files.walk(src)) {
          for (Path p : walk.toList()) {
            Path t = dst.resolve(src.relativize(p).toString());
            if (Files.isDirectory(p)) {
              Files.createDirectories(t);
            } else {
              Files.copy(p, t, StandardCopyOption.REPLACE_EXISTING);
            }
          }
        }
      } else {
        Files.copy(src, dst);
      }
      out.append(out.isEmpty() ? "" : ":").append(dst);
    }
    return Files.writeString(dir.resolve("cp.txt"), out.toString());
  }

  private static void openUp(Path p) throws IOException {
    try (var walk = Files.walk(p)) {
      for (Path x : walk.toList()) {
        Files.setPosixFilePermissions(
            x, PosixFilePermissions.fromString(Files.isDirectory(x) ? "rwxr-xr-x" : "rw-r--r--"));
      }
    }
  }

  @Test
  void readOnlyMode_asUnprivilegedUserWithNoCapabilities_readsRootOwnedRegions() throws Exception {
    assumeTrue(
        "root".equals(System.getProperty("user.name"))
            && Files.isExecutable(Path.of("/usr/bin/setpriv")),
        "needs root to drop to uid 65534 with setpriv");
    Path root = root();
    Path cpFile = readableClassPath();
    openUp(dir);
    for (Path p = dir; p != null && p.getNameCount() > 0; p = p.getParent()) {
      var perms = new java.util.HashSet<>(Files.getPosixFilePermissions(p));
      perms.add(java.nio.file.attribute.PosixFilePermission.OTHERS_READ);
      perms.add(java.nio.file.attribute.PosixFilePermission.OTHERS_EXECUTE);
      Files.setPosixFilePermissions(p, perms);
    }
    // Another tenant's region made unreadable to others: counted, never fatal.
    Path secret =
        TestRegions.write(
            root,
            "dddddddd-0000-4000-8000-00000000000d",
            "private",
            "a.cache",
            TestRegions.spec(1, 1024, 0, new int[] {9}, 10, 0, false));
    Files.setPosixFilePermissions(secret, PosixFilePermissions.fromString("rw-------"));
    var before = Snapshots.tree(root);
    // The neighbour's processes (readable by the unprivileged user), so its slots are ALIVE.
    Path proc = Files.createDirectories(root.resolveSibling("proc"));
    LiveExporter.neighbourProcesses(proc, root);
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    child =
        new ProcessBuilder(
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                java,
                "-Xmx128m",
                "-cp",
                Files.readString(cpFile),
                "io.vgpu.exporter.Main",
                "serve",
                "--path.cache-root=" + root,
                "--path.procfs=" + proc,
                "--node-name=rel-node",
                "--kubernetes=false",
                "--nvml=false",
                "--attribution.feedback=false",
                "--web.listen-address=127.0.0.1",
                "--web.listen-port=" + port)
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("child.log").toFile())
            .start();
    HttpClient http = HttpClient.newHttpClient();
    URI metrics = URI.create("http://127.0.0.1:" + port + "/metrics");
    String[] body = new String[1];
    Await.until(
        Duration.ofSeconds(60),
        () -> {
          HttpResponse<String> r =
              http.send(
                  HttpRequest.newBuilder(metrics).build(), HttpResponse.BodyHandlers.ofString());
          body[0] = r.body();
          // Listed, and its slots judged by an evidence pass (UNKNOWN until one covers them).
          return r.statusCode() == 200
              && Samples.parse(r.body())
                  .find(
                      "vgpu_container_processes",
                      "pod_uid",
                      LiveExporter.HEALTHY_UID,
                      "state",
                      "running")
                  .stream()
                  .anyMatch(x -> x.value() == 2);
        });
    Samples s = Samples.parse(body[0]);
    assertHealthyNeighbour(s);
    assertThat(s.value("vgpu_exporter_parse_errors_total", "reason", "permission_denied"))
        .isEqualTo(1);
    String status = Files.readString(Path.of("/proc", Long.toString(child.pid()), "status"));
    assertThat(status).containsPattern("Uid:\\s+65534\\s+65534\\s+65534\\s+65534");
    assertThat(status).contains("CapEff:\t0000000000000000").contains("CapPrm:\t0000000000000000");
    String maps = Files.readString(Path.of("/proc", Long.toString(child.pid()), "maps"));
    assertThat(maps.lines().filter(l -> l.contains(root.toString())).toList())
        .hasSize(2)
        .allMatch(l -> perms(l).equals("r--s"));
    assertThat(Snapshots.tree(root)).isEqualTo(before);
  }
}

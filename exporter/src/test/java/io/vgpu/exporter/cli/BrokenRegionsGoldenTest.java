package io.vgpu.exporter.cli;

import static io.vgpu.exporter.testing.OperatorFixture.usage;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.testing.OperatorFixture;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.RandomAccessFile;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * {@code doctor} and {@code inspect} on a node of broken regions, compared with golden outputs
 * ({@code src/test/resources/golden/}; regenerate with {@code -Dgolden.update=true} and review the
 * diff): files of version 1.3 and 2.2 and of an unknown size, a slot-table semaphore taken with no
 * holder recorded (HAMi #2500), a slot of a process that is gone, and a healthy container. Both
 * commands must give every container the same verdict word, and each broken one FAIL.
 */
class BrokenRegionsGoldenTest {
  static final String V13 = "a1111111-0000-4000-8000-000000000013";
  static final String V22 = "a2222222-0000-4000-8000-000000000022";
  static final String ODD_SIZE = "a3333333-0000-4000-8000-000000000333";
  static final String STUCK_LOCK = "a4444444-0000-4000-8000-000000002500";
  static final String ZOMBIE = "a5555555-0000-4000-8000-000000000555";
  static final String HEALTHY = "a6666666-0000-4000-8000-000000000666";
  static final Path GOLDEN = Path.of("src/test/resources/golden");
  static final JsonMapper JSON = JsonMapper.builder().build();

  /** HAMi-core's v1.2 header: magic, major_version, minor_version, sm_init_flag, owner_pid, sem. */
  static final int MAJOR_OFFSET = 4;

  static final int MINOR_OFFSET = 8;
  static final int SEM_OFFSET = 24;

  @TempDir Path tmp;

  record Run(int code, String out) {}

  private Run run(String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code = Cli.run(args, new PrintWriter(out, true), new PrintWriter(err, true));
    return new Run(code, (out.toString() + err).replace(tmp.toString(), "<tmp>"));
  }

  private static void patch(Path file, int offset, byte... bytes) throws IOException {
    try (RandomAccessFile raf = new RandomAccessFile(file.toFile(), "rw")) {
      raf.seek(offset);
      raf.write(bytes);
    }
  }

  private OperatorFixture brokenNode() throws IOException {
    OperatorFixture fx = new OperatorFixture(tmp);
    Path v13 = fx.region(V13, "main", OperatorFixture.v12(1L << 30, 0).build());
    patch(v13, MINOR_OFFSET, (byte) 3, (byte) 0, (byte) 0, (byte) 0);
    Path v22 = fx.region(V22, "main", OperatorFixture.v12(1L << 30, 0).build());
    patch(v22, MAJOR_OFFSET, (byte) 2, (byte) 0, (byte) 0, (byte) 0, (byte) 2, (byte) 0, (byte) 0);
    Path odd = fx.region(ODD_SIZE, "main", OperatorFixture.v12(1L << 30, 0).build());
    try (RandomAccessFile raf = new RandomAccessFile(odd.toFile(), "rw")) {
      raf.setLength(1_000_000);
    }
    // sem_wait left the semaphore at 0, then the holder was SIGKILLed before it recorded itself.
    Path stuck =
        fx.region(
            STUCK_LOCK,
            "main",
            OperatorFixture.v12(1L << 30, 0).slot(7, 2007, 1, usage(1L << 28, 0)).build());
    patch(stuck, SEM_OFFSET, (byte) 0, (byte) 0, (byte) 0, (byte) 0);
    fx.process(2007, 7).pod(STUCK_LOCK).gpu(stuck).write();
    Path zombie =
        fx.region(
            ZOMBIE,
            "main",
            OperatorFixture.v12(1L << 30, 0)
                .slot(7, 3007, 1, usage(1L << 28, 0))
                .slot(8, 3008, 1, usage(1L << 28, 0))
                .build());
    fx.process(3007, 7).pod(ZOMBIE).gpu(zombie).write();
    Path healthy =
        fx.region(
            HEALTHY,
            "main",
            OperatorFixture.v12(1L << 30, 0).slot(7, 4007, 1, usage(1L << 28, 0)).build());
    fx.process(4007, 7).pod(HEALTHY).gpu(healthy).write();
    return fx;
  }

  private static void assertGolden(String name, String actual) throws IOException {
    Path file = GOLDEN.resolve(name);
    if (Boolean.getBoolean("golden.update")) {
      Files.createDirectories(GOLDEN);
      Files.writeString(file, actual);
    }
    assertThat(file).as("golden file (create with -Dgolden.update=true)").exists();
    assertThat(actual).isEqualTo(Files.readString(file));
  }

  /** Pod UID to verdict word, from the lines {@code p} matches (groups: uid, verdict). */
  private static Map<String, String> verdicts(Pattern p, String text, int uid, int verdict) {
    Map<String, String> out = new TreeMap<>();
    Matcher m = p.matcher(text);
    while (m.find()) {
      out.put(m.group(uid), m.group(verdict));
    }
    return out;
  }

  @Test
  void doctorAndInspect_brokenRegions_matchGoldenAndAgreeOnEveryVerdict() throws IOException {
    OperatorFixture fx = brokenNode();
    String[] node = {"--cache-root", fx.cacheRoot.toString(), "--proc-root", fx.proc.toString()};

    Run doctor = run(concat(new String[] {"doctor", "--no-nvml", "--window", "0s"}, node));
    Run problems =
        run(concat(new String[] {"doctor", "--no-nvml", "--window", "0s", "--problems"}, node));
    Run inspect = run(concat(new String[] {"inspect"}, node));
    Run inspectJson = run(concat(new String[] {"inspect", "--json"}, node));

    assertThat(doctor.code()).as(doctor.out()).isEqualTo(2);
    assertThat(problems.code()).isEqualTo(2);
    assertThat(inspect.code()).as(inspect.out()).isZero();
    assertGolden("doctor-broken.txt", doctor.out());
    assertGolden("doctor-broken-problems.txt", problems.out());
    assertGolden("inspect-broken.txt", inspect.out());

    // One summary line per container, then the groups: "  FAIL <uid>_main: ...".
    Map<String, String> fromDoctor =
        verdicts(
            Pattern.compile("(?m)^  (OK|WARN|FAIL|SKIP) +([0-9a-f-]+)_main:"), doctor.out(), 2, 1);
    Map<String, String> fromInspect =
        verdicts(
            Pattern.compile("(?m)^== pod ([0-9a-f-]+) container main: (OK|WARN|FAIL|SKIP)$"),
            inspect.out(),
            1,
            2);
    Map<String, String> fromJson = new TreeMap<>();
    for (JsonNode c : JSON.readTree(inspectJson.out()).get("containers")) {
      fromJson.put(
          c.get("pod_uid").asString(),
          c.get("verdict").asString().toUpperCase(java.util.Locale.ROOT));
    }
    assertThat(fromDoctor).hasSize(6).isEqualTo(fromInspect).isEqualTo(fromJson);
    for (String broken : new String[] {V13, V22, ODD_SIZE, STUCK_LOCK, ZOMBIE}) {
      assertThat(fromInspect.get(broken)).as(broken).isEqualTo("FAIL");
    }
    assertThat(problems.out()).doesNotContain("[OK  ]").doesNotContain(HEALTHY + "_main: OK");
    // Fix texts name commands that run where the output is read: in the exporter pod.
    assertThat(doctor.out())
        .contains("fix: Release it: `kubectl -n $NS exec $POD -- vgpu-exporter unlock --uid")
        .contains("fix: Free them: `kubectl -n $NS exec $POD -- vgpu-exporter cleanup --uid")
        .doesNotContain("--apply` on the node or `shrreg-tool");
    assertThat(doctor.out())
        .contains("region cannot be read: unknown_version")
        .contains("region cannot be read: unknown_size")
        .contains("LOCKED with no holder recorded");
  }

  @Test
  void containersApi_servedByTheExporter_carriesTheVerdictInspectGives_andReadyzSaysItOnlyReads()
      throws Exception {
    OperatorFixture fx = brokenNode();
    Run inspectJson =
        run(
            "inspect",
            "--json",
            "--cache-root",
            fx.cacheRoot.toString(),
            "--proc-root",
            fx.proc.toString());
    Map<String, String> fromInspect = new TreeMap<>();
    for (JsonNode c : JSON.readTree(inspectJson.out()).get("containers")) {
      fromInspect.put(c.get("pod_uid").asString(), c.get("verdict").asString());
    }
    var config =
        io.vgpu.exporter.config.ExporterConfig.defaults()
            .with(io.vgpu.exporter.config.Flags.CACHE_ROOT, fx.cacheRoot)
            .with(io.vgpu.exporter.config.Flags.PROCFS, fx.proc)
            .with(io.vgpu.exporter.config.Flags.WEB_LISTEN_PORT, 0)
            .with(io.vgpu.exporter.config.Flags.WEB_LISTEN_ADDRESS, "127.0.0.1")
            .with(io.vgpu.exporter.config.Flags.NODE_NAME, "node-a")
            .with(io.vgpu.exporter.config.Flags.KUBERNETES, false)
            .with(io.vgpu.exporter.config.Flags.NVML, false);
    try (io.vgpu.exporter.ExporterApp app =
        io.vgpu.exporter.ExporterApp.builder(config).build().start()) {
      io.vgpu.exporter.testing.Await.until(
          java.time.Duration.ofSeconds(10), () -> app.discovery().current().generation() > 0);
      var http = java.net.http.HttpClient.newHttpClient();
      String base = "http://127.0.0.1:" + app.port();
      String api =
          http.send(
                  java.net.http.HttpRequest.newBuilder(
                          java.net.URI.create(base + "/api/v1/containers"))
                      .build(),
                  java.net.http.HttpResponse.BodyHandlers.ofString())
              .body();
      Map<String, String> fromApi = new TreeMap<>();
      JsonNode zombie = null;
      for (JsonNode c : JSON.readTree(api).get("containers")) {
        fromApi.put(c.get("pod_uid").asString(), c.get("verdict").asString());
        if (c.get("pod_uid").asString().equals(ZOMBIE)) {
          zombie = c;
        }
      }
      assertThat(fromApi).hasSize(6).isEqualTo(fromInspect);
      assertThat(zombie).isNotNull();
      assertThat(zombie.get("slots").get("gone").asLong()).isEqualTo(1);
      assertThat(zombie.get("slots").get("alive").asLong()).isEqualTo(1);
      assertThat(zombie.get("findings").get(0).get("id").asString()).isEqualTo("zombie-slots");

      // /metrics renders the same judgment: per container, the process-state series equal the
      // slot words /api (and inspect, doctor, the page) give, and the zombie gauge counts GONE.
      String metrics =
          http.send(
                  java.net.http.HttpRequest.newBuilder(java.net.URI.create(base + "/metrics"))
                      .build(),
                  java.net.http.HttpResponse.BodyHandlers.ofString())
              .body();
      for (JsonNode c : JSON.readTree(api).get("containers")) {
        String uid = c.get("pod_uid").asString();
        JsonNode slots = c.get("slots");
        assertThat(
                series(metrics, "vgpu_container_processes", uid, "running")
                    + series(metrics, "vgpu_container_processes", uid, "suspended"))
            .as(uid + " ALIVE")
            .isEqualTo(slots.get("alive").asLong());
        assertThat(series(metrics, "vgpu_container_processes", uid, "gone"))
            .as(uid + " GONE")
            .isEqualTo(slots.get("gone").asLong());
        assertThat(series(metrics, "vgpu_container_processes", uid, "unknown"))
            .as(uid + " UNKNOWN")
            .isEqualTo(slots.get("unknown").asLong());
        assertThat(series(metrics, "vgpu_container_zombie_slots", uid, null))
            .as(uid + " zombie slots")
            .isEqualTo(slots.get("gone").asLong());
      }
      assertThat(series(metrics, "vgpu_container_processes", ZOMBIE, "running")).isEqualTo(1);
      assertThat(series(metrics, "vgpu_container_processes", ZOMBIE, "gone")).isEqualTo(1);
      // The GONE slot's memory left "used" and is the zombie memory.
      assertThat(series(metrics, "vgpu_container_memory_used_bytes", ZOMBIE, null))
          .isEqualTo(1L << 28);
      assertThat(series(metrics, "vgpu_container_zombie_memory_bytes", ZOMBIE, null))
          .isEqualTo(1L << 28);
      String page =
          http.send(
                  java.net.http.HttpRequest.newBuilder(java.net.URI.create(base + "/")).build(),
                  java.net.http.HttpResponse.BodyHandlers.ofString())
              .body();
      assertThat(page).contains("1 ALIVE, 1 GONE");
      String readyz =
          http.send(
                  java.net.http.HttpRequest.newBuilder(java.net.URI.create(base + "/readyz"))
                      .build(),
                  java.net.http.HttpResponse.BodyHandlers.ofString())
              .body();
      assertThat(readyz).contains("read-only (writes nothing)");
    }
  }

  @Test
  void unlockAndCleanup_stuckSemaphore_planTheWatchedReleaseAndLeaveTheSlotsForAfter()
      throws IOException {
    OperatorFixture fx = brokenNode();
    String[] node = {"--cache-root", fx.cacheRoot.toString(), "--proc-root", fx.proc.toString()};
    Run unlock = run(concat(new String[] {"unlock", "--uid", STUCK_LOCK}, node));
    assertThat(unlock.code()).as(unlock.out()).isEqualTo(1);
    assertThat(unlock.out())
        .contains("LOCKED with no holder recorded")
        .contains("--force-unlock")
        .doesNotContain("--holder");
  }

  @Test
  void inspectAndCleanup_missingCacheRoot_failWithAClearErrorAndExit3() {
    String[] node = {"--cache-root", tmp.resolve("nowhere").toString(), "--proc-root", "/proc"};
    for (String cmd : new String[] {"inspect", "cleanup", "unlock", "doctor"}) {
      Run r = run(concat(new String[] {cmd}, node));
      assertThat(r.code()).as(cmd + ": " + r.out()).isEqualTo(3);
      assertThat(r.out())
          .as(cmd)
          .contains("<tmp>/nowhere does not exist")
          .contains("--path.cache-root");
    }
  }

  @Test
  void inspect_bareCacheFileOutsideAContainerDirectory_isJudgedNotIgnored() throws IOException {
    OperatorFixture fx = brokenNode();
    Path loose = Files.createDirectories(tmp.resolve("copies")).resolve("copy.cache");
    Files.copy(fx.cacheRoot.resolve(V13 + "_main").resolve("vgpu.cache"), loose);
    Run r = run("inspect", "--proc-root", fx.proc.toString(), loose.toString());
    assertThat(r.out())
        .doesNotContain("no container directories")
        .contains("== pod unknown-pod container copies: FAIL")
        .contains("FAIL unreadable: unknown_version");
  }

  /**
   * The value of the one series of {@code family} for pod {@code uid} (and {@code state}, when
   * given) in an exposition; fails when there is not exactly one.
   */
  private static long series(String exposition, String family, String uid, String state) {
    Pattern p = Pattern.compile("(?m)^" + Pattern.quote(family) + "\\{([^}]*)\\} ([0-9.eE+-]+)$");
    Matcher m = p.matcher(exposition);
    java.util.List<Double> values = new java.util.ArrayList<>();
    while (m.find()) {
      String labels = m.group(1);
      if (labels.contains("pod_uid=\"" + uid + "\"")
          && (state == null || labels.contains("state=\"" + state + "\""))) {
        values.add(Double.parseDouble(m.group(2)));
      }
    }
    assertThat(values).as(family + " " + uid + " " + state).hasSize(1);
    return Math.round(values.getFirst());
  }

  private static String[] concat(String[] a, String[] b) {
    String[] out = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }
}

package io.vgpu.exporter.cli;

import static io.vgpu.exporter.cli.DemoFakeNvmlProcessTest.freePort;
import static io.vgpu.exporter.cli.DemoFakeNvmlProcessTest.named;
import static io.vgpu.exporter.cli.DemoFakeNvmlProcessTest.repositoryRoot;
import static io.vgpu.exporter.cli.DemoFakeNvmlProcessTest.samples;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.cli.DemoFakeNvmlProcessTest.Sample;
import io.vgpu.exporter.demo.DemoProblem;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
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
 * One judgment on every surface: {@code vgpu-exporter demo} (its own JVM, the fake NVML, its
 * deliberate problems) is read through the status page, {@code /api/v1/containers}, {@code
 * /metrics} and {@code doctor --json} (another process, against the demo's cache root, procfs and
 * fake NVML script, as its banner prints them). Container by container they must give the same
 * verdict and the same WARN/FAIL checks; the deliberate problems must be there, and nothing else.
 */
class DemoSurfacesAgreeProcessTest {
  static final JsonMapper JSON = JsonMapper.builder().build();
  static final Pattern ROW =
      Pattern.compile(
          "<tr class=\"container\" data-pod-uid=\"([^\"]+)\" data-container=\"([^\"]+)\""
              + " data-verdict=\"([a-z]+)\"[^>]*>(.*?)</tr>",
          Pattern.DOTALL);
  static final Pattern ROW_FINDING =
      Pattern.compile("data-check=\"([a-z-]+)\" data-level=\"(warn|fail)\"");
  static final Pattern LABEL = Pattern.compile("(\\w+)=\"([^\"]*)\"");

  @TempDir Path tmp;
  private Process demo;

  @AfterEach
  void stop() throws InterruptedException {
    if (demo != null && demo.isAlive()) {
      demo.destroy();
      if (!demo.waitFor(10, TimeUnit.SECONDS)) {
        demo.destroyForcibly();
      }
    }
  }

  /** A container's judgment as one surface shows it: verdict and "check level" of its problems. */
  record Judged(String verdict, Set<String> problems) {}

  static String get(HttpClient http, String url) throws IOException, InterruptedException {
    return http.send(
            HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10)).build(),
            HttpResponse.BodyHandlers.ofString())
        .body();
  }

  static Map<String, String> labels(String s) {
    Map<String, String> out = new TreeMap<>();
    Matcher m = LABEL.matcher(s);
    while (m.find()) {
      out.put(m.group(1), m.group(2));
    }
    return out;
  }

  static final String[] VERDICTS = {"ok", "warn", "fail"};

  @Test
  void demo_pageApiDoctorAndMetrics_agreeContainerByContainer() throws Exception {
    Path root = repositoryRoot();
    assertThat(root.resolve(DemoCommand.FAKE_LIBRARY))
        .as("the fake NVML make builds (make -C libvgpu all)")
        .isRegularFile();
    int port = freePort();
    Path log = tmp.resolve("demo.log");
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    demo =
        new ProcessBuilder(
                java,
                "-cp",
                System.getProperty("java.class.path"),
                "io.vgpu.exporter.Main",
                "demo",
                "--port",
                Integer.toString(port),
                "--duration",
                "240s",
                "--web.status-max-age=2s")
            .directory(root.toFile())
            .redirectErrorStream(true)
            .redirectOutput(log.toFile())
            .start();
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    String base = "http://127.0.0.1:" + port;

    // Until every container is judged and the zombie slot's SM utilization is settled.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
    List<Sample> metrics = List.of();
    while (System.nanoTime() < deadline && demo.isAlive()) {
      try {
        metrics = samples(get(http, base + "/metrics"));
        List<Sample> v = named(metrics, "vgpu_container_verdict");
        if (v.size() >= 11 && v.stream().allMatch(s -> s.value() >= 0)) {
          break;
        }
      } catch (IOException e) {
        // not listening yet
      }
      Thread.sleep(500);
    }
    String out = Files.readString(log);
    assertThat(demo.isAlive()).as("demo running; output:\n" + out).isTrue();
    Matcher banner =
        Pattern.compile("(FAKE_NVML_CONFIG=\\S+) \\S+ doctor --problems (.*)").matcher(out);
    assertThat(banner.find()).as("the banner prints a doctor command:\n" + out).isTrue();
    Thread.sleep(3000); // one more evidence pass after the first judged one: all surfaces settle

    Map<String, Judged> fromMetrics = fromMetrics(samples(get(http, base + "/metrics")));
    Map<String, Judged> fromApi = fromApi(JSON.readTree(get(http, base + "/api/v1/containers")));
    Map<String, Judged> fromPage = fromPage(get(http, base + "/"));
    Map<String, Judged> fromDoctor = fromDoctor(root, banner.group(1), banner.group(2));

    assertThat(fromMetrics).hasSize(11);
    assertThat(fromApi).as("/api vs /metrics").isEqualTo(fromMetrics);
    assertThat(fromPage).as("status page vs /metrics").isEqualTo(fromMetrics);
    assertThat(fromDoctor).as("doctor --json vs /metrics").isEqualTo(fromMetrics);

    // The deliberate problems, and nothing else.
    Map<String, Judged> expected = new TreeMap<>();
    fromMetrics.forEach((k, v) -> expected.put(k, new Judged("ok", Set.of())));
    expected.put(
        DemoProblem.HOSTPID_WRONG.podUid() + "_jupyter",
        new Judged("fail", Set.of("hostpid-wrong fail")));
    expected.put(
        DemoProblem.ZOMBIE_SLOT.podUid() + "_trainer",
        new Judged("fail", Set.of("zombie-slots fail")));
    expected.put(
        DemoProblem.STUCK_LOCK.podUid() + "_worker",
        new Judged("fail", Set.of("lock-dead-holder fail")));
    assertThat(fromMetrics).isEqualTo(expected);

    // The hostpid bug shows in its own family too, so VgpuContainerHostPidMismatch can fire.
    List<Sample> after = samples(get(http, base + "/metrics"));
    double mismatched =
        named(after, "vgpu_container_hostpid_mismatch_slots").stream()
            .filter(s -> s.labels().contains("pod=\"notebook-alice\""))
            .mapToDouble(Sample::value)
            .sum();
    assertThat(mismatched).isEqualTo(2);
    assertThat(named(after, "vgpu_container_zombie_slots"))
        .filteredOn(s -> s.labels().contains("pod=\"finetune-bert-2\""))
        .extracting(Sample::value)
        .containsExactly(1.0);
  }

  private static Map<String, Judged> fromMetrics(List<Sample> metrics) {
    Map<String, Judged> out = new TreeMap<>();
    for (Sample s : named(metrics, "vgpu_container_verdict")) {
      Map<String, String> l = labels(s.labels());
      out.put(
          l.get("pod_uid") + "_" + l.get("container"),
          new Judged(VERDICTS[(int) s.value()], new TreeSet<>()));
    }
    for (Sample s : named(metrics, "vgpu_container_findings")) {
      Map<String, String> l = labels(s.labels());
      out.get(l.get("pod_uid") + "_" + l.get("container"))
          .problems()
          .add(l.get("check") + " " + l.get("level"));
    }
    return out;
  }

  private static Map<String, Judged> fromApi(JsonNode api) {
    Map<String, Judged> out = new TreeMap<>();
    for (JsonNode c : api.get("containers")) {
      Set<String> problems = new TreeSet<>();
      for (JsonNode f : c.get("findings")) {
        String sev = f.get("severity").asString();
        if (sev.equals("warn") || sev.equals("fail")) {
          problems.add(f.get("id").asString() + " " + sev);
        }
      }
      out.put(
          c.get("pod_uid").asString() + "_" + c.get("container").asString(),
          new Judged(c.get("verdict").asString(), problems));
    }
    return out;
  }

  private static Map<String, Judged> fromPage(String html) {
    Map<String, Judged> out = new TreeMap<>();
    Matcher m = ROW.matcher(html);
    while (m.find()) {
      String key = m.group(1) + "_" + m.group(2);
      Judged j = out.computeIfAbsent(key, k -> new Judged(m.group(3), new TreeSet<>()));
      Matcher f = ROW_FINDING.matcher(m.group(4));
      while (f.find()) {
        j.problems().add(f.group(1) + " " + f.group(2));
      }
    }
    return out;
  }

  private static Map<String, Judged> fromDoctor(Path root, String env, String args)
      throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    List<String> cmd =
        new java.util.ArrayList<>(
            List.of(
                java,
                "-cp",
                System.getProperty("java.class.path"),
                "io.vgpu.exporter.Main",
                "doctor",
                "--json"));
    cmd.addAll(List.of(args.trim().split("\\s+")));
    ProcessBuilder pb = new ProcessBuilder(cmd).directory(root.toFile());
    pb.environment().put("FAKE_NVML_CONFIG", env.substring(env.indexOf('=') + 1));
    pb.redirectError(ProcessBuilder.Redirect.DISCARD);
    Process p = pb.start();
    String json = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    JsonNode doc = JSON.readTree(json);
    Map<String, Judged> out = new TreeMap<>();
    for (JsonNode c : doc.get("containers")) {
      out.put(
          c.get("pod_uid").asString() + "_" + c.get("container").asString(),
          new Judged(c.get("verdict").asString(), new TreeSet<>()));
    }
    for (JsonNode f : doc.get("findings")) {
      String sev = f.get("severity").asString();
      if (!sev.equals("warn") && !sev.equals("fail")) {
        continue;
      }
      for (Map.Entry<String, Judged> e : out.entrySet()) {
        String subject = f.get("subject").asString();
        String podUid = e.getKey().substring(0, e.getKey().indexOf('_'));
        if (subject.equals(e.getKey())
            || subject.startsWith(e.getKey() + " ")
            || subject.equals("pod " + podUid)) {
          e.getValue().problems().add(f.get("id").asString() + " " + sev);
        }
      }
    }
    return out;
  }
}

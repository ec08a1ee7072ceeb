package io.vgpu.exporter.http;

import static io.vgpu.exporter.testing.OperatorFixture.GPU0;
import static io.vgpu.exporter.testing.OperatorFixture.usage;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.vgpu.exporter.cli.Cli;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The status page as an operator sees it: {@code vgpu-exporter demo} serves it, a broken region
 * (the mislabelled v1.1-broken layout) and an unreadable one (version 1.3, in a directory whose
 * container name is markup) are dropped into its cache root, and headless Chromium loads {@code /}:
 * every demo container is listed, problems first, both broken ones carry their FAIL verdict, the
 * hostile name is text, and the GPU sharing table, SM utilization, auto-refresh and the exporter's
 * writes are shown. A screenshot lands in {@code target/status-page.png}. Needs the {@code
 * chromium} package (skipped without it: {@code make deps} installs it).
 */
class StatusPageBrowserTest {
  static final String BROKEN_UID = "ffffffff-0000-4000-8000-00000000b0b0";
  static final String HOSTILE_UID = "ffffffff-0000-4000-8000-0000000013e1";
  static final String HOSTILE_NAME = "<img src=x onerror=alert(1)>";

  @TempDir Path tmp;

  static String chromium() {
    for (String c :
        List.of("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")) {
      if (Files.isExecutable(Path.of(c))) {
        return c;
      }
    }
    return null;
  }

  static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  static String get(HttpClient http, String url) {
    try {
      HttpResponse<String> r =
          http.send(
              HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).build(),
              HttpResponse.BodyHandlers.ofString());
      return r.statusCode() == 200 ? r.body() : "";
    } catch (IOException e) {
      return "";
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "";
    }
  }

  static String runChromium(String chromium, Path profile, String... args)
      throws IOException, InterruptedException {
    List<String> cmd =
        new ArrayList<>(
            List.of(
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-dev-shm-usage",
                "--user-data-dir=" + profile));
    cmd.addAll(List.of(args));
    Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
    p.getOutputStream().close();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (!p.waitFor(90, TimeUnit.SECONDS)) {
      p.destroyForcibly();
    }
    return out;
  }

  @Test
  void statusPage_demoInChromium_showsEveryContainerAndTheBrokenVerdict() throws Exception {
    String chromium = chromium();
    assumeTrue(chromium != null, "chromium not installed (make deps)");
    Path root = tmp.resolve("containers");
    int port = freePort();
    StringWriter demoOut = new StringWriter();
    Thread demo =
        Thread.ofPlatform()
            .daemon()
            .name("status-page-demo")
            .start(
                () ->
                    Cli.run(
                        new String[] {
                          "demo",
                          "--port",
                          Integer.toString(port),
                          "--containers",
                          "4",
                          "--duration",
                          "60s",
                          // The fake libnvidia-ml keeps JVM-wide state; this test shares the JVM.
                          "--fake-nvml",
                          "off",
                          "--path.cache-root",
                          root.toString()
                        },
                        new PrintWriter(demoOut, true),
                        new PrintWriter(new StringWriter(), true)));
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    String base = "http://127.0.0.1:" + port;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    String api = "";
    while (System.nanoTime() < deadline && !api.contains("\"pod_known\":true")) {
      Thread.sleep(200);
      api = get(http, base + "/api/v1/containers");
    }
    assertThat(api).as("demo did not come up: " + demoOut).contains("\"pod_known\":true");

    Path dir = Files.createDirectories(root.resolve(BROKEN_UID + "_broken"));
    RegionWriter.create(
        dir.resolve("vgpu.cache"),
        RegionSpec.builder(Layout.V1_1_BROKEN)
            .device(GPU0, 1L << 30, 0)
            .slot(5, 5, 1, usage(64L << 20, 0))
            .build());
    // A region no library version this exporter knows wrote (1.3), in a directory whose
    // container name is markup: FAIL with its reason, and the name shown as text, never as a tag.
    Path hostile = Files.createDirectories(root.resolve(HOSTILE_UID + "_" + HOSTILE_NAME));
    RegionWriter.create(
        hostile.resolve("vgpu.cache"),
        RegionSpec.builder(Layout.V1_2).device(GPU0, 1L << 30, 0).build());
    try (java.io.RandomAccessFile raf =
        new java.io.RandomAccessFile(hostile.resolve("vgpu.cache").toFile(), "rw")) {
      raf.seek(8); // minor_version
      raf.write(new byte[] {3, 0, 0, 0});
    }
    while (System.nanoTime() < deadline
        && !(api.contains(BROKEN_UID) && api.contains(HOSTILE_UID))) {
      Thread.sleep(200);
      api = get(http, base + "/api/v1/containers");
    }
    assertThat(api).contains(BROKEN_UID);
    List<String> pods = new ArrayList<>();
    Matcher m = Pattern.compile("\"pod\":\"([^\"]+)\"").matcher(api);
    while (m.find()) {
      pods.add(m.group(1));
    }
    assertThat(pods).hasSizeGreaterThanOrEqualTo(4);

    String dom = runChromium(chromium, tmp.resolve("profile"), "--dump-dom", base + "/");
    assertThat(dom)
        .contains("<table id=\"containers\">")
        .contains("href=\"/metrics\"")
        .contains("JSON API");
    for (String pod : pods) {
      // Named as people name pods: namespace/pod.
      assertThat(dom).as("pod " + pod + " on the page").containsPattern("/" + pod + "<");
    }
    Matcher row =
        Pattern.compile(
                "<tr class=\"container\" data-pod-uid=\"" + BROKEN_UID + "\".*?</tr>",
                Pattern.DOTALL)
            .matcher(dom);
    assertThat(row.find()).as("broken container row").isTrue();
    assertThat(row.group())
        .contains("class=\"verdict sev-fail\"")
        .contains("3 region-version")
        .contains("v1.1-broken");
    assertThat(dom).contains("data-check=\"region-version\"");

    // Problems first: every FAIL row before every WARN row before the rest.
    List<String> order = new ArrayList<>();
    Matcher verdicts =
        Pattern.compile(
                "<tr class=\"container\" data-pod-uid=\"([^\"]+)\"[^>]*data-verdict=\"(\\w+)\"")
            .matcher(dom);
    while (verdicts.find()) {
      order.add(verdicts.group(2));
    }
    assertThat(order).contains("fail", "ok");
    List<String> sorted = new ArrayList<>(order);
    sorted.sort(
        java.util.Comparator.comparingInt(v -> List.of("fail", "warn", "ok", "skip").indexOf(v)));
    assertThat(order).as("rows worst first").isEqualTo(sorted);

    Matcher hostileRow =
        Pattern.compile(
                "<tr class=\"container\" data-pod-uid=\"" + HOSTILE_UID + "\".*?</tr>",
                Pattern.DOTALL)
            .matcher(dom);
    assertThat(hostileRow.find()).as("unreadable container row").isTrue();
    assertThat(hostileRow.group())
        .contains("class=\"verdict sev-fail\"")
        .contains("region cannot be read: unknown_version")
        .contains("&lt;img src=x onerror=alert(1)&gt;");
    assertThat(dom)
        .contains("<table id=\"gpus\">")
        .contains(io.vgpu.exporter.demo.DemoNode.gpuUuid(0))
        .contains("class=\"sm-util\"")
        .contains("http-equiv=\"refresh\"")
        .contains("Writes: read-only");
    HttpResponse<String> page =
        http.send(
            HttpRequest.newBuilder(URI.create(base + "/")).build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(page.headers().firstValue("Content-Security-Policy"))
        .hasValueSatisfying(v -> assertThat(v).contains("default-src 'none'"));
    // As served: the markup name is escaped in text and attributes alike.
    assertThat(page.body()).contains(HOSTILE_UID).doesNotContain("<img");

    Path shot = Path.of("target/status-page.png").toAbsolutePath();
    Files.deleteIfExists(shot);
    runChromium(
        chromium,
        tmp.resolve("profile2"),
        "--window-size=1500,1100",
        "--screenshot=" + shot,
        base + "/");
    assertThat(shot).exists();
    assertThat(Files.size(shot)).isGreaterThan(10_000);
    assertThat(demo.isAlive()).isTrue();
  }
}

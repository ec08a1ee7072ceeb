package io.vgpu.exporter.http;

import static io.vgpu.exporter.testing.OpsFixture.GPU0;
import static io.vgpu.exporter.testing.OpsFixture.usage;
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
 * (the mislabelled v1.1-broken layout) is dropped into its cache root, and headless Chromium loads
 * {@code /}: every demo container is listed and the broken one carries its FAIL verdict. A
 * screenshot lands in {@code target/status-page.png}. Needs the {@code chromium} package (skipped
 * without it: {@code make deps} installs it).
 */
class StatusPageBrowserTest {
  static final String BROKEN_UID = "ffffffff-0000-4000-8000-00000000b0b0";

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
    while (System.nanoTime() < deadline && !api.contains(BROKEN_UID)) {
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
      assertThat(dom).as("pod " + pod + " on the page").contains(">" + pod + "<");
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

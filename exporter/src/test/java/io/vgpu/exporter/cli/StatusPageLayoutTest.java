package io.vgpu.exporter.cli;

import static io.vgpu.exporter.cli.DemoFakeNvmlProcessTest.freePort;
import static io.vgpu.exporter.cli.DemoFakeNvmlProcessTest.repositoryRoot;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assumptions.assumeThat;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.WebSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Base64;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;
import tools.jackson.databind.node.ObjectNode;

/**
 * The status page of {@code vgpu-exporter demo} in headless Chromium, driven over the DevTools
 * protocol at 1024 and 1440 px wide: no sideways scroll, the GPU summary (who shares each GPU, with
 * memory and SM numbers) on the first screen, GPU UUIDs on one line, numbers on the memory bars,
 * human timestamps, unique HTML ids. Screenshots of the first screen land in {@code
 * target/status-page-<width>.png} ({@code docs/img/} holds the committed copies).
 */
class StatusPageLayoutTest {
  static final JsonMapper JSON = JsonMapper.builder().build();
  @TempDir Path tmp;
  private Process demo;
  private Process chromium;

  @AfterEach
  void stop() throws InterruptedException {
    for (Process p : new Process[] {chromium, demo}) {
      if (p != null && p.isAlive()) {
        p.destroy();
        if (!p.waitFor(10, TimeUnit.SECONDS)) {
          p.destroyForcibly();
        }
      }
    }
  }

  /** A minimal DevTools client: one request at a time, replies matched by id. */
  static final class DevTools implements WebSocket.Listener {
    private final Map<Integer, CompletableFuture<JsonNode>> replies = new ConcurrentHashMap<>();
    private final AtomicInteger ids = new AtomicInteger();
    private final StringBuilder partial = new StringBuilder();
    private WebSocket socket;

    static DevTools connect(String url) {
      DevTools d = new DevTools();
      d.socket =
          HttpClient.newHttpClient().newWebSocketBuilder().buildAsync(URI.create(url), d).join();
      return d;
    }

    @Override
    public CompletionStage<?> onText(WebSocket ws, CharSequence data, boolean last) {
      partial.append(data);
      if (last) {
        JsonNode msg = JSON.readTree(partial.toString());
        partial.setLength(0);
        if (msg.has("id")) {
          CompletableFuture<JsonNode> f = replies.remove(msg.get("id").asInt());
          if (f != null) {
            f.complete(msg);
          }
        }
      }
      ws.request(1);
      return null;
    }

    JsonNode call(String method, Map<String, Object> params) throws Exception {
      int id = ids.incrementAndGet();
      CompletableFuture<JsonNode> reply = new CompletableFuture<>();
      replies.put(id, reply);
      ObjectNode req = JSON.createObjectNode();
      req.put("id", id);
      req.put("method", method);
      req.set("params", JSON.valueToTree(params));
      socket.sendText(JSON.writeValueAsString(req), true).join();
      JsonNode r = reply.get(30, TimeUnit.SECONDS);
      assertThat(r.has("error")).as("%s: %s", method, r).isFalse();
      return r.get("result");
    }

    JsonNode eval(String expression) throws Exception {
      return JSON.readTree(
          call("Runtime.evaluate", Map.of("expression", expression, "returnByValue", true))
              .get("result")
              .get("value")
              .asString());
    }
  }

  static String get(String url) throws Exception {
    return HttpClient.newHttpClient()
        .send(
            HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).build(),
            HttpResponse.BodyHandlers.ofString())
        .body();
  }

  static final String MEASURE =
      """
      JSON.stringify({
        scrollWidth: document.documentElement.scrollWidth,
        clientWidth: document.documentElement.clientWidth,
        ids: [...document.querySelectorAll('[id]')].map(e => e.id),
        uuidLines: Math.max(0, ...[...document.querySelectorAll('span[title^="GPU-"]')].map(e =>
          e.getClientRects().length)),
        gpusBottom: document.getElementById('gpus').getBoundingClientRect().bottom,
        gpuRows: document.querySelectorAll('#gpus tr.gpu').length,
        memory: [...document.querySelectorAll('#gpus .mem')].map(e => e.textContent),
        smUtil: [...document.querySelectorAll('#gpus .sm-util')].map(e => e.textContent),
        header: document.querySelector('p').textContent,
        firstContainerCell: document.querySelector('#containers tr.container td').textContent
      })""";

  @Test
  void demoStatusPage_at1024And1440_fitsTheWidth_andShowsWhoSharesEachGpuFirst() throws Exception {
    Path browser =
        java.util.stream.Stream.of("/usr/bin/chromium", "/usr/bin/chromium-browser")
            .map(Path::of)
            .filter(Files::isExecutable)
            .findFirst()
            .orElse(null);
    assumeThat(browser).as("chromium is not installed (make deps)").isNotNull();
    Path root = repositoryRoot();
    int port = freePort();
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
                "180s",
                // The first-screen budget is the vGPU node's: the other sharing kinds' three GPUs
                // and five pods add rows past it at 1024 px.
                "--other-sharing",
                "false")
            .directory(root.toFile())
            .redirectErrorStream(true)
            .redirectOutput(tmp.resolve("demo.log").toFile())
            .start();
    String page = "http://127.0.0.1:" + port + "/";
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (System.nanoTime() < deadline) {
      try {
        String metrics = get("http://127.0.0.1:" + port + "/metrics");
        if (metrics.contains("vgpu_container_sm_utilization_ratio{")
            && metrics.contains("vgpu_container_verdict{")) {
          break;
        }
      } catch (java.io.IOException e) {
        // not serving yet
      }
      Thread.sleep(500);
    }
    int devtoolsPort = freePort();
    chromium =
        new ProcessBuilder(
                browser.toString(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--user-data-dir=" + tmp.resolve("profile"),
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=" + devtoolsPort,
                "about:blank")
            .redirectErrorStream(true)
            .redirectOutput(tmp.resolve("chromium.log").toFile())
            .start();
    JsonNode targets = null;
    deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (System.nanoTime() < deadline) {
      try {
        targets = JSON.readTree(get("http://127.0.0.1:" + devtoolsPort + "/json/list"));
        if (targets.size() > 0) {
          break;
        }
      } catch (java.io.IOException e) {
        // not listening yet
      }
      Thread.sleep(300);
    }
    assertThat(targets).as(Files.readString(tmp.resolve("chromium.log"))).isNotNull();
    String ws = null;
    for (JsonNode t : targets) {
      if (t.get("type").asString().equals("page")) {
        ws = t.get("webSocketDebuggerUrl").asString();
      }
    }
    DevTools dt = DevTools.connect(ws);
    Path target = Path.of("target");
    for (int width : new int[] {1024, 1440}) {
      int height = 900;
      dt.call(
          "Emulation.setDeviceMetricsOverride",
          Map.of("width", width, "height", height, "deviceScaleFactor", 1, "mobile", false));
      dt.call("Page.navigate", Map.of("url", page));
      JsonNode m = null;
      for (int i = 0; i < 50; i++) {
        Thread.sleep(200);
        JsonNode ready = dt.eval("JSON.stringify(document.readyState)");
        if (ready.asString().equals("complete")
            && dt.eval("JSON.stringify(!!document.getElementById('gpus'))").asBoolean()) {
          m = dt.eval(MEASURE);
          break;
        }
      }
      assertThat(m).as("page loaded at %d px", width).isNotNull();
      String at = width + " px: " + m;
      assertThat(m.get("scrollWidth").asInt())
          .as("no sideways scroll at %s", at)
          .isLessThanOrEqualTo(m.get("clientWidth").asInt());
      java.util.List<String> ids = new java.util.ArrayList<>();
      m.get("ids").forEach(id -> ids.add(id.asString()));
      assertThat(ids).as("HTML ids").isNotEmpty().doesNotHaveDuplicates();
      assertThat(m.get("uuidLines").asInt()).as("GPU UUIDs on one line, %s", at).isEqualTo(1);
      assertThat(m.get("gpuRows").asInt()).isGreaterThanOrEqualTo(2);
      assertThat(m.get("gpusBottom").asDouble())
          .as("who shares each GPU is on the first screen, %s", at)
          .isLessThanOrEqualTo(height);
      assertThat(m.get("memory").toString())
          .matches(".*\\d+(\\.\\d)? (GiB|MiB) / .*\\(\\d+ %\\).*");
      assertThat(m.get("smUtil").toString()).contains("% (NVML)");
      assertThat(m.get("header").asString())
          .as("a human timestamp, no nanoseconds")
          .containsPattern("\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC")
          .doesNotContainPattern("\\d\\d:\\d\\d:\\d\\d\\.\\d");
      assertThat(m.get("firstContainerCell").asString())
          .as("names first: namespace/pod")
          .containsPattern("^[a-z-]+/[a-z0-9-]+");
      String png =
          dt.call("Page.captureScreenshot", Map.of("format", "png")).get("data").asString();
      Files.write(target.resolve("status-page-" + width + ".png"), Base64.getDecoder().decode(png));
    }
  }
}

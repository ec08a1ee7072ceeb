package io.vgpu.exporter;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.OperatorFixture;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What {@link ExporterApp} runs follows the configuration it was given, and nothing else: the GPU
 * layer is on unless the caller says otherwise, and the status page reads the running app's procfs
 * and NVML sampler.
 */
class ExporterAppWiringTest {
  @TempDir Path tmp;

  private Map<String, String> flags(Path cacheRoot, Path procfs) {
    Map<String, String> f = new HashMap<>();
    f.put("path.cache-root", cacheRoot.toString());
    f.put("path.procfs", procfs.toString());
    f.put("node-name", "n1");
    f.put("kubernetes", "false");
    f.put("nvml.library", tmp.resolve("no-such-libnvidia-ml.so.1").toString());
    f.put("web.listen-address", "127.0.0.1");
    f.put("web.listen-port", "0");
    f.put("web.status-max-age", "0s");
    return f;
  }

  private ExporterApp build(Map<String, String> f, boolean regionsOnly) {
    ExporterApp.Builder b = ExporterApp.builder(ExporterConfig.resolve(f, Map.of()));
    return (regionsOnly ? b.regionsOnly() : b).build();
  }

  @Test
  void builder_byDefault_runsNvmlAndAttributionAsServeDoes() {
    Map<String, String> f = flags(tmp, tmp);
    try (ExporterApp app = build(f, false)) {
      assertThat(app.nvml()).as("--nvml defaults to true").isPresent();
      assertThat(app.attribution()).isPresent();
    }
    f.put("nvml", "false");
    try (ExporterApp app = build(f, false)) {
      assertThat(app.nvml()).isEmpty();
      assertThat(app.attribution()).as("attribution runs without NVML").isPresent();
    }
    f.put("collectors.disabled", "attribution");
    try (ExporterApp app = build(f, false)) {
      assertThat(app.attribution()).isEmpty();
    }
  }

  @Test
  void regionsOnly_isTheExplicitWayToRunWithoutTheGpuLayer() {
    try (ExporterApp app = build(flags(tmp, tmp), true)) {
      assertThat(app.nvml()).isEmpty();
      assertThat(app.attribution()).isEmpty();
    }
  }

  /**
   * {@code serve --path.procfs=X}: the status page finds the slot's process under X (not under the
   * exporter's own /proc), and its doctor reports the running sampler's NVML failure.
   */
  @Test
  void statusPage_readsTheAppsProcfsAndNvmlSampler() throws Exception {
    OperatorFixture fx = new OperatorFixture(tmp);
    Path region =
        fx.region(
            OperatorFixture.UID_A,
            "main",
            OperatorFixture.v12(1L << 30, 50)
                .slot(7, 1007, 1, OperatorFixture.usage(1L << 20, 10))
                .build());
    fx.process(1007, 7).gpu(region).write();
    try (ExporterApp app = build(flags(fx.cacheRoot, fx.proc), false).start()) {
      Await.until(Duration.ofSeconds(10), () -> app.discovery().current().generation() > 0);
      HttpClient http = HttpClient.newHttpClient();
      String[] page = new String[1];
      Await.until(
          Duration.ofSeconds(20),
          () -> {
            page[0] =
                http.send(
                        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + app.port() + "/"))
                            .build(),
                        HttpResponse.BodyHandlers.ofString())
                    .body();
            return page[0].contains("NVML is not usable");
          });
      // The slot is judged ALIVE through the app's procfs (the environment's /proc would not show
      // it).
      assertThat(page[0]).contains(">1 ALIVE<").doesNotContain("GONE").doesNotContain("UNKNOWN");
    }
  }
}

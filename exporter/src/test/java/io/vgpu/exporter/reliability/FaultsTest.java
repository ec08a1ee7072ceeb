package io.vgpu.exporter.reliability;

import static io.vgpu.exporter.reliability.LiveExporter.assertHealthyNeighbour;
import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.client.server.mock.KubernetesCrudDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.mockwebserver.Context;
import io.fabric8.mockwebserver.MockWebServer;
import io.fabric8.mockwebserver.http.Dispatcher;
import io.fabric8.mockwebserver.http.MockResponse;
import io.fabric8.mockwebserver.http.RecordedRequest;
import io.vgpu.exporter.k8s.KubernetesMetadataSource;
import io.vgpu.exporter.nvml.FakeNvml;
import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.KubeObjects;
import io.vgpu.exporter.testing.Samples;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Faults of the node around the exporter: NVML failing at init, mid-run and with a GPU off the bus
 * (the repository's scripted fake libnvidia-ml through the production JNA path), the API server
 * unreachable then back and RBAC denied (fabric8's mock server), the cache root missing at start.
 * Each time the exporter keeps serving region metrics, names the reason in /readyz and in its own
 * metrics, and recovers without a restart.
 */
class FaultsTest {
  private static final String GPU = "GPU-00000000-0000-0000-0000-000000000000";
  private static final String DEVICE =
      "device 0 uuid=" + GPU + " name=Fake_H100 total=85899345920 used=1073741824 util=40";

  @TempDir Path dir;
  private LiveExporter ex;
  private FakeNvml fake;
  private KubernetesMockServer api;

  @AfterEach
  void tearDown() {
    if (ex != null) {
      ex.close();
    }
    if (api != null) {
      api.shutdown();
    }
  }

  private Path root() throws Exception {
    Path root = Files.createDirectories(dir.resolve("containers"));
    LiveExporter.writeHealthy(root);
    return root;
  }

  private LiveExporter startWithNvml(Path root) {
    return LiveExporter.start(
        root,
        Map.of(
            "nvml",
            "true",
            "nvml.library",
            FakeNvml.library().toString(),
            "nvml.sample-interval",
            "100ms"));
  }

  private double metric(String name, String... kv) throws Exception {
    return ex.scrape().value(name, kv);
  }

  private String readyz() throws Exception {
    HttpResponse<String> r = ex.get("/readyz");
    assertThat(r.statusCode()).as("/readyz: %s", r.body()).isEqualTo(200);
    return r.body();
  }

  @Test
  void nvml_initFailsThenDriverAppears_servesRegionsMeanwhileAndRecovers() throws Exception {
    fake = FakeNvml.in(dir);
    fake.write("fail nvmlInit 9", DEVICE); // NVML_ERROR_DRIVER_NOT_LOADED
    ex = startWithNvml(root());
    Await.until(Duration.ofSeconds(20), () -> readyz().contains("nvml:"));
    Samples s = ex.scrape();
    assertThat(s.value("vgpu_exporter_nvml_up")).isZero();
    assertHealthyNeighbour(s);

    fake.write(DEVICE);
    Await.until(Duration.ofSeconds(30), () -> metric("vgpu_exporter_nvml_up") == 1);
    assertThat(readyz()).doesNotContain("nvml:");
    s = ex.scrape();
    assertThat(s.value("vgpu_gpu_memory_total_bytes", "device_uuid", GPU)).isEqualTo(85899345920.0);
    assertHealthyNeighbour(s);
  }

  @Test
  void nvml_gpuFallsOffTheBusMidRun_reportedThenRecovered() throws Exception {
    fake = FakeNvml.in(dir);
    fake.write(DEVICE);
    ex = startWithNvml(root());
    Await.until(Duration.ofSeconds(20), () -> metric("vgpu_exporter_nvml_up") == 1);

    fake.write(DEVICE, "fail * 15"); // NVML_ERROR_GPU_IS_LOST on every device query
    Await.until(
        Duration.ofSeconds(20),
        () ->
            ex.scrape().find("vgpu_exporter_nvml_errors_total").stream()
                    .mapToDouble(Samples.Sample::value)
                    .sum()
                > 0);
    Samples s = ex.scrape();
    assertHealthyNeighbour(s);
    System.out.printf(
        "reliability: GPU lost: nvml_up=%s errors=%s readyz=%s%n",
        s.value("vgpu_exporter_nvml_up"),
        s.find("vgpu_exporter_nvml_errors_total"),
        readyz().replace('\n', '|'));

    fake.write(DEVICE);
    Await.until(Duration.ofSeconds(60), () -> metric("vgpu_exporter_nvml_up") == 1);
    Await.until(Duration.ofSeconds(20), () -> !readyz().contains("nvml:"));
    assertHealthyNeighbour(ex.scrape());
  }

  @Test
  void nvml_libraryMissing_regionOnlyAndReasonInReadyz() throws Exception {
    ex =
        LiveExporter.start(
            root(), Map.of("nvml", "true", "nvml.library", dir.resolve("nope.so").toString()));
    Await.until(Duration.ofSeconds(20), () -> readyz().contains("nvml:"));
    Samples s = ex.scrape();
    assertThat(s.value("vgpu_exporter_nvml_up")).isZero();
    assertHealthyNeighbour(s);
  }

  @Test
  void cacheRoot_missingAtStartThenCreated_notReadyThenReadyWithoutRestart() throws Exception {
    Path root = dir.resolve("late-root");
    ex = LiveExporter.start(root, Map.of());
    Await.until(Duration.ofSeconds(20), () -> ex.get("/readyz").statusCode() == 503);
    assertThat(ex.get("/readyz").body()).contains("does not exist");
    assertThat(ex.get("/metrics").statusCode()).isEqualTo(200);

    Files.createDirectories(root);
    LiveExporter.writeHealthy(root);
    ex.neighbourWritten();
    // No inotify watch can exist on a missing root: the periodic rescan (200 ms here) finds it.
    Await.until(Duration.ofSeconds(20), () -> ex.get("/readyz").statusCode() == 200);
    Await.until(
        Duration.ofSeconds(20),
        () -> !ex.scrape().find("vgpu_container_memory_used_bytes").isEmpty());
    ex.awaitPass();
    assertHealthyNeighbour(ex.scrape());
  }

  @Test
  void cacheRoot_deletedWhileServing_reportedThenRecreatedAndRecovered() throws Exception {
    Path root = root();
    ex = LiveExporter.start(root, Map.of());
    ex.awaitPass();
    assertHealthyNeighbour(ex.scrape());
    Path moved = dir.resolve("moved-away");
    Files.move(root, moved);
    Await.until(Duration.ofSeconds(20), () -> ex.get("/readyz").statusCode() == 503);
    assertThat(ex.get("/metrics").statusCode()).isEqualTo(200);
    Files.move(moved, root);
    Await.until(Duration.ofSeconds(20), () -> ex.get("/readyz").statusCode() == 200);
    Await.until(
        Duration.ofSeconds(20),
        () -> !ex.scrape().find("vgpu_container_memory_used_bytes").isEmpty());
    ex.awaitPass();
    assertHealthyNeighbour(ex.scrape());
  }

  private static int freePort() throws Exception {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }

  @Test
  void apiServer_downAtStartThenBack_servesMeanwhileAndReconnects() throws Exception {
    int port = freePort();
    ex =
        LiveExporter.start(
            root(),
            Map.of(),
            new KubernetesMetadataSource(
                KubeObjects.localClient(port), "rel-node", List.of(), Duration.ofMinutes(5)));
    Await.until(Duration.ofSeconds(30), () -> readyz().contains("API server unreachable"));
    Samples s = ex.scrape();
    assertThat(s.value("vgpu_exporter_apiserver_up")).isZero();
    assertHealthyNeighbour(s);

    // Back on the same address (CRUD mode: lists and watches work; it ignores the node field
    // selector, which does not matter for reconnection).
    api =
        new KubernetesMockServer(
            new Context(),
            new MockWebServer(),
            new HashMap<>(),
            new KubernetesCrudDispatcher(),
            false);
    api.init(InetAddress.getLoopbackAddress(), port);
    long back = System.nanoTime();
    Await.until(Duration.ofSeconds(90), () -> metric("vgpu_exporter_apiserver_up") == 1);
    System.out.printf(
        "reliability: API server back -> apiserver_up=1 after %d ms%n",
        (System.nanoTime() - back) / 1_000_000);
    Await.until(Duration.ofSeconds(20), () -> !readyz().contains("kubernetes:"));
    assertHealthyNeighbour(ex.scrape());
  }

  @Test
  void apiServer_rbacDenied_reasonNamesTheMissingGrantAndRegionsStillServed() throws Exception {
    api =
        new KubernetesMockServer(
            new Context(),
            new MockWebServer(),
            new HashMap<>(),
            new Dispatcher() {
              @Override
              public MockResponse dispatch(RecordedRequest request) {
                return new MockResponse()
                    .setResponseCode(403)
                    .setBody(
                        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                            + "\"reason\":\"Forbidden\",\"code\":403,\"message\":\"pods is"
                            + " forbidden\"}");
              }
            },
            false);
    api.init(InetAddress.getLoopbackAddress(), 0);
    ex =
        LiveExporter.start(
            root(),
            Map.of(),
            new KubernetesMetadataSource(
                KubeObjects.localClient(api.getPort()),
                "rel-node",
                List.of(),
                Duration.ofMinutes(5)));
    Await.until(Duration.ofSeconds(30), () -> readyz().contains("RBAC forbids list/watch pods"));
    Samples s = ex.scrape();
    assertThat(s.value("vgpu_exporter_apiserver_up")).isZero();
    assertHealthyNeighbour(s);
  }
}

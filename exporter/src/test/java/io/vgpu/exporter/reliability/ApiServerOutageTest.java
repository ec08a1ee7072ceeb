package io.vgpu.exporter.reliability;

import static io.vgpu.exporter.reliability.LiveExporter.assertHealthyNeighbour;
import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.NodeBuilder;
import io.fabric8.kubernetes.api.model.NodeListBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodListBuilder;
import io.fabric8.kubernetes.api.model.WatchEvent;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.vgpu.exporter.k8s.KubernetesMetadataSource;
import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.KubeObjects;
import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestRegions;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The API server goes away mid-run for a configurable time, then comes back on the same address
 * (fabric8's mock server in expectations mode, so the node-scoped field selectors are what is
 * served). Throughout the outage every scrape must answer 200 with the regions' directory-derived
 * {@code pod_uid}/{@code container} labels (and the last known pod names), {@code /readyz} must
 * stay 200 with a {@code kubernetes:} reason and {@code vgpu_exporter_apiserver_up 0}; the
 * exporter's threads, open fds and heap after GC must not grow; after the server returns the
 * informer must reconnect by itself and a pod created during the outage must get its metadata
 * within {@link #RECOVERY_BOUND}.
 *
 * <p>Outage length: {@code -Dvgpu.reliability.apiOutageSeconds=N} (or env {@code
 * API_OUTAGE_SECONDS}); 4 s in {@code make test}, minutes with {@code make soak-apiserver}.
 */
class ApiServerOutageTest {
  static final String NODE = "rel-node";
  static final String NEW_UID = "cccccccc-0000-4000-8000-00000000000c";

  /**
   * After the server returns: fabric8 retries a lost watch with exponential backoff capped at 32 s
   * (1 s doubling, 5 steps), so reconnection plus relist must fit within this.
   */
  static final Duration RECOVERY_BOUND = Duration.ofSeconds(60);

  @TempDir Path dir;
  private LiveExporter ex;
  private KubernetesMockServer api;

  @AfterEach
  void tearDown() {
    if (ex != null) {
      ex.close();
    }
    KubernetesMockServer s = api;
    if (s != null) {
      Thread.ofPlatform().daemon().start(s::destroy); // waits for open watch sockets
    }
  }

  static Duration outage() {
    String v = System.getProperty("vgpu.reliability.apiOutageSeconds");
    if (v == null || v.isBlank()) {
      v = System.getenv().getOrDefault("API_OUTAGE_SECONDS", "4");
    }
    return Duration.ofSeconds(Long.parseLong(v.strip()));
  }

  static String podList(boolean retry) {
    return "/api/v1/pods?fieldSelector=spec.nodeName%3D"
        + NODE
        + (retry ? "" : "&resourceVersion=0");
  }

  static String nodeList(boolean retry) {
    return "/api/v1/nodes?fieldSelector=metadata.name%3D"
        + NODE
        + (retry ? "" : "&resourceVersion=0");
  }

  static String watch(String kind, String selector, String rv) {
    return "/api/v1/"
        + kind
        + "?allowWatchBookmarks=true&fieldSelector="
        + selector
        + "&resourceVersion="
        + rv
        + "&timeoutSeconds=600&watch=true";
  }

  static Pod pod(String uid, String name, String container) {
    return KubeObjects.runningPod(NODE, uid, name, container, "3");
  }

  static Node node() {
    return new NodeBuilder()
        .withNewMetadata()
        .withName(NODE)
        .withResourceVersion("4")
        .endMetadata()
        .build();
  }

  /** A mock API server on {@code port} (0: any) serving only the node-scoped paths. */
  static KubernetesMockServer server(int port, List<Pod> pods) {
    KubernetesMockServer s = new KubernetesMockServer(false);
    for (boolean retry : new boolean[] {false, true}) {
      s.expect()
          .get()
          .withPath(podList(retry))
          .andReturn(
              200,
              new PodListBuilder()
                  .withNewMetadata()
                  .withResourceVersion("5")
                  .endMetadata()
                  .withItems(pods)
                  .build())
          .always();
      s.expect()
          .get()
          .withPath(nodeList(retry))
          .andReturn(
              200,
              new NodeListBuilder()
                  .withNewMetadata()
                  .withResourceVersion("5")
                  .endMetadata()
                  .withItems(node())
                  .build())
          .always();
    }
    // Watches that stay open (a script that ends closes the socket).
    s.expect()
        .get()
        .withPath(watch("pods", "spec.nodeName%3D" + NODE, "5"))
        .andUpgradeToWebSocket()
        .open()
        .waitFor(3_600_000)
        .andEmit(new WatchEvent(pods.getFirst(), "MODIFIED"))
        .done()
        .always();
    s.expect()
        .get()
        .withPath(watch("nodes", "metadata.name%3D" + NODE, "5"))
        .andUpgradeToWebSocket()
        .open()
        .waitFor(3_600_000)
        .andEmit(new WatchEvent(node(), "MODIFIED"))
        .done()
        .always();
    s.init(InetAddress.getLoopbackAddress(), port);
    return s;
  }

  static KubernetesClient client(int port) {
    return KubeObjects.localClient(port);
  }

  /** Threads, open fds, heap used after a GC, RSS. */
  record Footprint(int threads, long fds, long heapAfterGc, long rssKib) {
    static Footprint now() throws Exception {
      System.gc();
      long rss = 0;
      for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (l.startsWith("VmRSS:")) {
          rss = Long.parseLong(l.replaceAll("[^0-9]", ""));
        }
      }
      return new Footprint(
          ManagementFactory.getThreadMXBean().getThreadCount(),
          TestRegions.openFds(),
          ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed(),
          rss);
    }

    @Override
    public String toString() {
      return "threads=%d fds=%d heap_after_gc=%.1fMiB rss=%.1fMiB"
          .formatted(threads, fds, heapAfterGc / 1048576.0, rssKib / 1024.0);
    }
  }

  private static String label(Samples s, String uid, String name) {
    return s.find("vgpu_container_memory_limit_bytes", "pod_uid", uid).stream()
        .findFirst()
        .map(x -> x.labels().getOrDefault(name, ""))
        .orElse("<no series>");
  }

  @Test
  void apiServerDownMidRun_forConfiguredTime_servesThroughoutAndRecoversMetadata()
      throws Exception {
    Duration outage = outage();
    Path root = Files.createDirectories(dir.resolve("containers"));
    LiveExporter.writeHealthy(root);
    api = server(0, List.of(pod(LiveExporter.HEALTHY_UID, "healthy-0", LiveExporter.HEALTHY_CTR)));
    int port = api.getPort();
    ex =
        LiveExporter.start(
            root,
            Map.of(),
            new KubernetesMetadataSource(client(port), NODE, List.of(), Duration.ofMinutes(5)));
    Await.until(
        Duration.ofSeconds(60),
        () ->
            ex.scrape().value("vgpu_exporter_apiserver_up") == 1
                && label(ex.scrape(), LiveExporter.HEALTHY_UID, "pod").equals("healthy-0"));

    // Down: the server and its sockets go away.
    KubernetesMockServer first = api;
    api = null;
    Thread.ofPlatform().daemon().start(first::destroy);
    long down = System.nanoTime();
    Await.until(Duration.ofSeconds(60), () -> ex.scrape().value("vgpu_exporter_apiserver_up") == 0);
    System.out.printf(
        "outage: down -> apiserver_up=0 after %d ms; outage %d s%n",
        (System.nanoTime() - down) / 1_000_000, outage.toSeconds());
    // A pod created while the server is away: its region appears, its metadata cannot.
    TestRegions.write(
        root,
        NEW_UID,
        "late",
        "a.cache",
        TestRegions.spec(1, 1024, 20, new int[] {301}, 100, 5, false));

    Footprint start = Footprint.now();
    List<Footprint> samples = new ArrayList<>();
    samples.add(start);
    long scrapes = 0;
    long nextSample = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    String reason = "";
    while (System.nanoTime() - down < outage.toNanos()) {
      Samples s = ex.scrape(); // asserts 200
      scrapes++;
      assertHealthyNeighbour(s);
      assertThat(s.value("vgpu_exporter_apiserver_up")).isZero();
      assertThat(label(s, LiveExporter.HEALTHY_UID, "pod"))
          .as("last known pod name kept")
          .isEqualTo("healthy-0");
      HttpResponse<String> r = ex.get("/readyz");
      assertThat(r.statusCode()).as("/readyz %s", r.body()).isEqualTo(200);
      assertThat(r.body()).contains("kubernetes:");
      reason = r.body().lines().filter(l -> l.contains("kubernetes:")).findFirst().orElse("");
      if (System.nanoTime() > nextSample) {
        Footprint f = Footprint.now();
        samples.add(f);
        System.out.printf(
            "outage: t=%ds %s scrapes=%d%n",
            (System.nanoTime() - down) / 1_000_000_000L, f, scrapes);
        nextSample = System.nanoTime() + Duration.ofSeconds(10).toNanos();
      }
      Thread.sleep(200);
    }
    Samples during = ex.scrape();
    assertThat(label(during, NEW_UID, "container")).isEqualTo("late");
    assertThat(label(during, NEW_UID, "pod")).as("no metadata while the server is away").isEmpty();
    Footprint end = Footprint.now();
    samples.add(end);
    System.out.printf(
        "outage: %d scrapes in %d s, all 200; readyz: %s%noutage: footprint start %s%n"
            + "outage: footprint end   %s%noutage: footprint every 10 s %s%n",
        scrapes, outage.toSeconds(), reason.strip(), start, end, samples);
    assertThat(end.threads())
        .as("threads during the outage")
        .isLessThanOrEqualTo(start.threads() + 4);
    assertThat(end.fds()).as("fds during the outage").isLessThanOrEqualTo(start.fds() + 8);
    assertThat(end.heapAfterGc())
        .as("heap after GC during the outage")
        .isLessThanOrEqualTo(start.heapAfterGc() + (16L << 20));

    // Back on the same address, now also listing the pod created meanwhile.
    List<Pod> now =
        List.of(
            pod(LiveExporter.HEALTHY_UID, "healthy-0", LiveExporter.HEALTHY_CTR),
            pod(NEW_UID, "late-0", "late"));
    Await.until(
        Duration.ofSeconds(30),
        () -> {
          api = server(port, now); // throws while the old server still holds the port
          return true;
        });
    long back = System.nanoTime();
    Await.until(RECOVERY_BOUND, () -> ex.scrape().value("vgpu_exporter_apiserver_up") == 1);
    long upMs = (System.nanoTime() - back) / 1_000_000;
    Await.until(RECOVERY_BOUND, () -> label(ex.scrape(), NEW_UID, "pod").equals("late-0"));
    long metaMs = (System.nanoTime() - back) / 1_000_000;
    Await.until(Duration.ofSeconds(20), () -> !ex.get("/readyz").body().contains("kubernetes:"));
    assertHealthyNeighbour(ex.scrape());
    System.out.printf(
        "outage: server back -> apiserver_up=1 after %d ms, new pod's metadata after %d ms,"
            + " readyz clear%n",
        upMs, metaMs);
  }
}

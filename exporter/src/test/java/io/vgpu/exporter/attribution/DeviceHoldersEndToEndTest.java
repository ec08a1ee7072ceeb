package io.vgpu.exporter.attribution;

import static io.vgpu.exporter.attribution.World.GIB;
import static io.vgpu.exporter.attribution.World.GPU0;
import static io.vgpu.exporter.attribution.World.key;
import static io.vgpu.exporter.attribution.World.spec;
import static io.vgpu.exporter.attribution.World.usage;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.vgpu.exporter.ExporterApp;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.k8s.ContainerMeta;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.k8s.StaticMetadataSource;
import io.vgpu.exporter.nvml.FakeNvml;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 28 item 2 through the whole exporter (fake NVML, a procfs fixture, pod metadata, no
 * kubelet): a container whose GPU process runs in its kubepods cgroup without a region gets the
 * per-container series a region container gets, as {@code sharing="whole"}, beside a vGPU
 * container; processes of no pod and of an unknown pod stay unattributed with their reasons.
 */
class DeviceHoldersEndToEndTest {
  @TempDir Path dir;
  private World w;
  private ExporterApp app;

  @AfterEach
  void close() {
    if (app != null) {
      app.close();
    }
    if (w != null) {
      w.close();
    }
  }

  private static PodMeta pod(int n, String name, String container) {
    return new PodMeta(
        World.podUid(n),
        "team",
        name,
        "Running",
        Optional.of("burstable"),
        Map.of("app", name + "-app", "tier", "gpu"),
        Map.of(
            container,
            new ContainerMeta(
                container,
                ContainerMeta.Kind.REGULAR,
                Optional.of(World.containerId(n)),
                ContainerMeta.State.RUNNING)));
  }

  @Test
  void wholeGpuPodBesideAVgpuPod_sameSeries_unattributedByReason() throws Exception {
    w = new World(dir);
    w.advance(Duration.between(World.START, Instant.now()));
    ContainerKey vgpu = key(1, "train");
    w.podProcess(4001, 777, 1, 1, 1);
    w.region(vgpu, spec(GPU0).slot(1, 4001, 1, usage(0, 2 * GIB, 30)).build());
    w.podProcess(4501, 778, 5, 5, 1); // the whole-GPU pod: no region, no library
    w.hostProcess(4601, 779); // a host daemon on the GPU
    w.podProcess(4701, 780, 7, 7, 1); // a pod the metadata does not know
    w.gpu(0, GPU0, 90)
        .gpuProcess(0, 4001, 2 * GIB)
        .gpuProcess(0, 4501, 3 * GIB)
        .gpuProcess(0, 4601, GIB)
        .gpuProcess(0, 4701, GIB)
        .busyUntil(0, 4501, 40, Duration.ofMinutes(2))
        .busyUntil(0, 4001, 30, Duration.ofMinutes(2));
    start(
        Map.of("kubernetes.pod-labels", "app"),
        pod(1, "vgpu-0", "train"),
        pod(5, "whole-0", "torch"));

    String whole = "pod=\"whole-0\"";
    String text = awaitValue("vgpu_container_sm_utilization_ratio", 0.40, whole);
    assertThat(value(text, "vgpu_container_device_info", whole, "sharing=\"whole\"", GPU0))
        .isEqualTo(1);
    assertThat(value(text, "vgpu_container_device_info", "pod=\"vgpu-0\"", "sharing=\"vgpu\""))
        .isEqualTo(1);
    assertThat(value(text, "vgpu_container_memory_used_bytes", whole, "container=\"torch\""))
        .isEqualTo(3.0 * GIB);
    assertThat(value(text, "vgpu_container_processes", whole, "state=\"running\"")).isEqualTo(1);
    // The pod facts a region container gets (its kind, QoS class, allow-listed labels), once.
    assertThat(
            value(
                text,
                "vgpu_container_pod_info",
                whole,
                "container=\"torch\"",
                "container_kind=\"regular\"",
                "qos_class=\"burstable\"",
                "label_app=\"whole-0-app\""))
        .isEqualTo(1);
    assertThat(text.lines().filter(l -> l.startsWith("vgpu_container_pod_info{")))
        .as("one pod_info per container, region or not")
        .hasSize(2)
        .noneMatch(l -> l.contains("label_tier"));
    String gpu = "device_uuid=\"" + GPU0 + "\"";
    assertThat(value(text, "vgpu_gpu_unattributed_processes", gpu)).isEqualTo(2);
    assertThat(value(text, "vgpu_gpu_unattributed_memory_bytes", gpu)).isEqualTo(2.0 * GIB);
    assertThat(value(text, "vgpu_gpu_unattributed_processes_by_reason", gpu, "\"not_in_a_pod\""))
        .isEqualTo(1);
    assertThat(value(text, "vgpu_gpu_unattributed_processes_by_reason", gpu, "\"pod_unknown\""))
        .isEqualTo(1);
    assertThat(value(text, "vgpu_gpu_unattributed_processes_by_reason", gpu, "\"no_claim\""))
        .isZero();
    // The vGPU container keeps its own (region) series and is not reported twice.
    assertThat(
            text.lines()
                .filter(l -> l.startsWith("vgpu_container_memory_used_bytes{"))
                .filter(l -> l.contains("pod=\"vgpu-0\""))
                .count())
        .isEqualTo(1);
  }

  /** Polls the world once, then starts the exporter on it (no kubelet) with {@code extra} flags. */
  private void start(Map<String, String> extra, PodMeta... pods) throws Exception {
    w.poll();
    w.fake.write(Files.readAllLines(w.fake.config()).toArray(String[]::new));
    Map<String, String> flags = new HashMap<>(extra);
    flags.put("path.cache-root", dir.resolve("containers").toString());
    flags.put("path.procfs", w.proc.toString());
    flags.put("node-name", "n1");
    flags.put("kubernetes", "false");
    flags.put("nvml.library", FakeNvml.library().toString());
    flags.put("nvml.sample-interval", "100ms");
    flags.put("attribution.feedback", "false");
    flags.put("web.listen-address", "127.0.0.1");
    flags.put("web.listen-port", "0");
    app =
        ExporterApp.builder(ExporterConfig.resolve(flags, Map.of()))
            .metadata(StaticMetadataSource.of(List.of(pods), NodeMeta.unknown()))
            .build()
            .start();
  }

  /**
   * Issue 28 item 3: two MIG pods on one MIG-partitioned H100 (no region, no kubelet): each gets
   * its memory on its own MIG device, {@code sharing="mig"} with the profile NVML names the device
   * by, HAMi's {@code hami_mig_device_info}, and the per-MIG-device series with GPM SM activity;
   * the parent GPU does not count their processes as its own unattributed ones.
   */
  @Test
  void twoMigPodsOnOneGpu_memoryOnTheirMigDevice_profileAndHamiInfo_gpmActivity() throws Exception {
    w = new World(dir);
    w.advance(Duration.between(World.START, Instant.now()));
    String migA = "MIG-aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa";
    String migB = "MIG-bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb";
    w.podProcess(5101, 881, 11, 11, 1);
    w.podProcess(5201, 882, 12, 12, 1);
    w.gpu(0, GPU0, 0)
        .nvmlLine("device 0 uuid=" + GPU0 + " name=NVIDIA_H100 total=" + 80 * GIB + " used=0 gpm=1")
        .nvmlLine(
            "mig 0 0 uuid="
                + migA
                + " name=NVIDIA_H100_MIG_1g.10gb gi=9 ci=0 sm=30 total="
                + 10 * GIB
                + " used="
                + 2 * GIB)
        .nvmlLine(
            "mig 0 1 uuid="
                + migB
                + " name=NVIDIA_H100_MIG_3g.40gb gi=2 ci=0 sm=80 total="
                + 40 * GIB
                + " used="
                + 5 * GIB)
        .nvmlLine("migprocess 0 0 pid=5101 used=" + 2 * GIB)
        .nvmlLine("migprocess 0 1 pid=5201 used=" + 5 * GIB);
    start(
        Map.of("hami-compat", "true"), pod(11, "mig-small", "infer"), pod(12, "mig-big", "train"));

    String a = "mig_uuid=\"" + migA + "\"";
    awaitValue("vgpu_mig_sm_activity_ratio", 0.30, a); // two NVML polls
    // ... and an attribution pass after them (the holders, their memory, HAMi's family)
    String text =
        awaitValue("vgpu_container_memory_used_bytes", 2.0 * GIB, "pod=\"mig-small\"", migA);
    assertThat(value(text, "vgpu_mig_sm_activity_ratio", "mig_uuid=\"" + migB + "\""))
        .isCloseTo(0.80, within(1e-6));
    assertThat(value(text, "vgpu_container_memory_used_bytes", "pod=\"mig-small\"", migA))
        .isEqualTo(2.0 * GIB);
    assertThat(value(text, "vgpu_container_memory_used_bytes", "pod=\"mig-big\"", migB))
        .isEqualTo(5.0 * GIB);
    assertThat(
            value(
                text,
                "vgpu_container_device_info",
                "pod=\"mig-small\"",
                "sharing=\"mig\"",
                "mig_profile=\"1g.10gb\"",
                migA))
        .isEqualTo(1);
    assertThat(
            value(
                text,
                "hami_mig_device_info",
                "pod=\"mig-big\"",
                "container=\"train\"",
                "device_uuid=\"" + GPU0 + "\"",
                "mig_uuid=\"" + migB + "\"",
                "profile=\"3g.40gb\"",
                "gpu_instance_id=\"2\"",
                "compute_instance_id=\"0\"",
                "vdevice_index=\"0\"",
                "zone=\"vGPU\""))
        .isEqualTo(1);
    assertThat(value(text, "vgpu_mig_memory_used_bytes", a)).isEqualTo(2.0 * GIB);
    assertThat(value(text, "vgpu_mig_memory_total_bytes", a)).isEqualTo(10.0 * GIB);
    assertThat(value(text, "vgpu_mig_processes", a)).isEqualTo(1);
    assertThat(
            value(
                text,
                "vgpu_mig_device_info",
                a,
                "device_uuid=\"" + GPU0 + "\"",
                "gpu_instance_id=\"9\"",
                "mig_profile=\"1g.10gb\""))
        .isEqualTo(1);
    assertThat(text).doesNotContain("vgpu_mig_sm_activity_unknown{");
    assertThat(value(text, "vgpu_gpu_unattributed_processes", "device_uuid=\"" + GPU0 + "\""))
        .as("the MIG pods' processes are not the parent's")
        .isZero();
  }

  private String awaitValue(String family, double want, String... parts) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    String text = "";
    double got = Double.NaN;
    while (System.nanoTime() < deadline) {
      text = scrape();
      try {
        got = value(text, family, parts);
        if (Math.abs(got - want) <= 0.05) {
          assertThat(got).isCloseTo(want, within(0.05));
          return text;
        }
      } catch (AssertionError e) {
        // not there yet
      }
      Thread.sleep(100);
    }
    throw new AssertionError(family + " stayed " + got + ", want " + want + " in\n" + text);
  }

  private String scrape() throws Exception {
    try (HttpClient http = HttpClient.newHttpClient()) {
      HttpResponse<String> r =
          http.send(
              HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + app.port() + "/metrics"))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(r.statusCode()).isEqualTo(200);
      return r.body();
    }
  }

  private static double value(String text, String name, String... labelParts) {
    for (String line : text.lines().toList()) {
      if (line.startsWith(name + "{")) {
        boolean all = true;
        for (String p : labelParts) {
          all &= line.contains(p);
        }
        if (all) {
          return Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        }
      }
    }
    throw new AssertionError("no " + name + " with " + List.of(labelParts) + " in\n" + text);
  }
}

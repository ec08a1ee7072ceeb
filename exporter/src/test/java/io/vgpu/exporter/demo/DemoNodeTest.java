package io.vgpu.exporter.demo;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.ExporterApp;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.config.Flags;
import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.Samples;
import io.vgpu.hostpid.ProcFs;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The demo node: real child processes, changing usage, every lifecycle state, served for real. */
class DemoNodeTest {
  @TempDir Path tmp;

  @Test
  void demo_servedByExporter_showsLiveChangingPerPodMetrics() throws Exception {
    Path root = tmp.resolve("containers");
    // Usage moves with the node's clock, not with the number of ticks: the test moves the clock.
    DemoHoursTest.StepClock clock =
        new DemoHoursTest.StepClock(java.time.Instant.now().minus(Duration.ofMinutes(5)));
    try (DemoNode node = DemoNode.create(root, DemoOptions.of(3).withClock(clock))) {
      assertThat(node.childHostPids())
          .isNotEmpty()
          .allSatisfy(pid -> assertThat(Path.of("/proc/" + pid)).exists());
      if (node.namespaces()) {
        // The processes of one container share its PID namespace, pids 1, 2, 3 there, as in a
        // pod: the first is its init, the others joined it.
        for (DemoContainer c : node.containers()) {
          List<Integer> inner = new java.util.ArrayList<>();
          java.util.Set<String> namespaces = new java.util.HashSet<>();
          for (DemoContainer.Child child : c.children) {
            int pid = child.hostPid();
            List<Integer> nsPids = ProcFs.host().readProcess(pid).orElseThrow().nsPids();
            assertThat(nsPids).hasSize(2);
            inner.add(nsPids.get(1));
            namespaces.add(Files.readSymbolicLink(Path.of("/proc/" + pid + "/ns/pid")).toString());
          }
          assertThat(namespaces).as(c.pod).hasSizeLessThanOrEqualTo(1);
          if (!inner.isEmpty()) {
            assertThat(inner).as(c.pod).startsWith(1).doesNotHaveDuplicates();
          }
        }
      }
      ExporterConfig cfg =
          ExporterConfig.defaults()
              .with(Flags.CACHE_ROOT, root)
              .with(Flags.WEB_LISTEN_PORT, 0)
              .with(Flags.WEB_LISTEN_ADDRESS, "127.0.0.1")
              .with(Flags.KUBERNETES, false)
              .with(Flags.NVML, false)
              .with(Flags.NODE_NAME, "demo-node")
              .with(Flags.STALE_GRACE_PERIOD, Duration.ZERO);
      try (ExporterApp app =
          ExporterApp.builder(cfg).metadata(node.metadata()).regionsOnly().build().start()) {
        Await.until(Duration.ofSeconds(10), () -> app.discovery().current().filesMapped() == 5);
        HttpClient http = HttpClient.newHttpClient();
        URI uri = URI.create("http://127.0.0.1:" + app.port() + "/metrics");
        Samples first =
            Samples.parse(
                http.send(HttpRequest.newBuilder(uri).build(), HttpResponse.BodyHandlers.ofString())
                    .body());
        assertThat(first.find("vgpu_container_memory_used_bytes", "pod", "train-resnet-0"))
            .isNotEmpty();
        assertThat(first.value("vgpu_container_finished", "pod", "preprocess-done")).isEqualTo(1.0);
        assertThat(first.value("vgpu_container_stale", "container", "main")).isEqualTo(1.0);
        double before =
            first
                .find("vgpu_container_memory_used_bytes", "pod", "train-resnet-0")
                .getFirst()
                .value();
        for (int i = 0; i < 5; i++) {
          clock.advance(Duration.ofMinutes(1));
          node.tick();
        }
        Samples later =
            Samples.parse(
                http.send(HttpRequest.newBuilder(uri).build(), HttpResponse.BodyHandlers.ofString())
                    .body());
        double after =
            later
                .find("vgpu_container_memory_used_bytes", "pod", "train-resnet-0")
                .getFirst()
                .value();
        assertThat(after).as("usage changes over time").isNotEqualTo(before);
      }
    }
    assertThat(root).doesNotExist();
  }

  @Test
  void close_withoutPidNamespaces_stopsEverySleeperAtOnce() throws Exception {
    DemoNode node = DemoNode.create(tmp.resolve("plain"), 12, 2, 1, 0, false);
    List<ProcessHandle> sleepers =
        node.childHostPids().stream().map(pid -> ProcessHandle.of(pid).orElseThrow()).toList();
    assertThat(sleepers).hasSize(12).allMatch(ProcessHandle::isAlive);
    long start = System.nanoTime();
    node.close();
    Duration took = Duration.ofNanos(System.nanoTime() - start);
    assertThat(sleepers).noneMatch(ProcessHandle::isAlive);
    // It used to signal only the sleepers' children (they have none without a namespace) and then
    // wait a second on each sleeper before killing it: 12 s here, over 2 minutes for a fleet node.
    assertThat(took).isLessThan(Duration.ofSeconds(6));
  }

  @Test
  void procfs_showsOnlyTheDemoProcessesAsPodProcesses_andInspectJudgesEverySlotAlive()
      throws Exception {
    Path root = tmp.resolve("procfs-node");
    try (DemoNode node = DemoNode.create(root, 3, 2, 1, 0, false)) {
      Path proc = tmp.resolve("proc");
      node.writeProcfs(proc);
      io.vgpu.hostpid.ProcFs fs = new io.vgpu.hostpid.ProcFs(proc);
      int self = (int) ProcessHandle.current().pid();
      java.util.Set<Integer> expected = new java.util.TreeSet<>(node.childHostPids());
      expected.add(self);
      java.util.Set<Integer> listed = new java.util.TreeSet<>();
      for (int pid : fs.listPids()) {
        listed.add(pid);
      }
      // Nothing else of this machine: no real process, no real pod.
      assertThat(listed).isEqualTo(expected);
      for (int pid : node.childHostPids()) {
        assertThat(fs.readProcess(pid).orElseThrow().cgroup().podUid())
            .as("pid %d", pid)
            .isPresent();
      }
      assertThat(fs.readProcess(self).orElseThrow().cgroup().podUid()).isEmpty();

      java.io.StringWriter out = new java.io.StringWriter();
      int code =
          io.vgpu.exporter.cli.Cli.run(
              new String[] {
                "inspect", "--json", "--cache-root", root.toString(), "--proc-root", proc.toString()
              },
              new java.io.PrintWriter(out, true),
              new java.io.PrintWriter(new java.io.StringWriter(), true));
      assertThat(code).isZero();
      tools.jackson.databind.JsonNode doc =
          tools.jackson.databind.json.JsonMapper.builder().build().readTree(out.toString());
      List<String> fates = new java.util.ArrayList<>();
      doc.get("containers")
          .forEach(
              c ->
                  c.get("regions")
                      .forEach(
                          r ->
                              r.get("processes")
                                  .forEach(p -> fates.add(p.get("fate").asString()))));
      assertThat(fates).hasSize(3).containsOnly("ALIVE");
    }
  }

  @Test
  void fleetShape_spreadsContainersOverGpus_idleOnesLaunchNothing_fakeNvmlScriptMatches()
      throws Exception {
    Path root = tmp.resolve("fleet");
    try (DemoNode node = DemoNode.create(root, 16, 8, 1, 2, false)) {
      assertThat(node.childHostPids()).hasSize(16);
      Path script = tmp.resolve("nvml.conf");
      node.writeFakeNvmlScript(script, "NVIDIA_A100-SXM4-40GB");
      List<String> lines = Files.readAllLines(script);
      List<String> devices = lines.stream().filter(l -> l.startsWith("device ")).toList();
      assertThat(devices).hasSize(8);
      assertThat(devices.getFirst())
          .startsWith("device 0 uuid=" + DemoNode.gpuUuid(0) + " name=NVIDIA_A100-SXM4-40GB")
          .contains("total=" + (40L << 30));
      // Every container process is a GPU process on each GPU of its container (every third
      // container of the 16 has two), plus this JVM (in no container).
      assertThat(lines.stream().filter(l -> l.startsWith("process "))).hasSize(16 + 6 + 1);
      // Samples every 200 ms of the last 5 s, as a driver keeps them, for each of those but the two
      // idle containers' (the last two, one of them on two GPUs).
      List<String> sampled =
          lines.stream()
              .filter(l -> l.startsWith("sample "))
              .map(l -> l.substring(0, l.indexOf(" sm=")))
              .distinct()
              .toList();
      assertThat(sampled).hasSize(22 - 3 + 1);
      assertThat(lines.stream().filter(l -> l.startsWith("sample "))).hasSize((22 - 3 + 1) * 25);

      ExporterConfig cfg =
          ExporterConfig.defaults()
              .with(Flags.CACHE_ROOT, root)
              .with(Flags.WEB_LISTEN_PORT, 0)
              .with(Flags.WEB_LISTEN_ADDRESS, "127.0.0.1")
              .with(Flags.KUBERNETES, false)
              .with(Flags.NVML, false)
              .with(Flags.NODE_NAME, "demo-node")
              .with(Flags.STALE_GRACE_PERIOD, Duration.ZERO);
      try (ExporterApp app =
          ExporterApp.builder(cfg).metadata(node.metadata()).regionsOnly().build().start()) {
        Await.until(Duration.ofSeconds(10), () -> app.discovery().current().filesMapped() == 18);
        Samples s =
            Samples.parse(
                HttpClient.newHttpClient()
                    .send(
                        HttpRequest.newBuilder(
                                URI.create("http://127.0.0.1:" + app.port() + "/metrics"))
                            .build(),
                        HttpResponse.BodyHandlers.ofString())
                    .body());
        java.util.Set<String> gpusUsed = new java.util.TreeSet<>();
        s.find("vgpu_container_memory_limit_bytes")
            .forEach(x -> gpusUsed.add(x.labels().get("device_uuid")));
        assertThat(gpusUsed).hasSize(8);
        long now = java.time.Instant.now().getEpochSecond();
        List<Double> lastKernels =
            s.find("vgpu_container_last_kernel_timestamp_seconds").stream()
                .map(Samples.Sample::value)
                .toList();
        assertThat(lastKernels.stream().filter(t -> t < now - 3600))
            .as("idle containers")
            .hasSize(2);
      }
    }
  }

  /**
   * Issue 28 item 5: beside the vGPU pods the demo node runs a whole-GPU pod, two MIG pods on a
   * MIG-partitioned GPU and two time-sliced pods, its fake kubelet (a real gRPC server on a unix
   * socket) says who holds which device, and the exporter's scrape shows every sharing kind with
   * its pods; the region-less pods' processes are attributed through their kubepods cgroups in the
   * demo's procfs (NVML memory, SM utilization, pod facts).
   */
  @Test
  void otherSharing_everySharingKindShowsInTheScrape_withItsPods() throws Exception {
    Path root = tmp.resolve("sharing");
    io.vgpu.exporter.nvml.FakeNvml nvml = io.vgpu.exporter.nvml.FakeNvml.in(tmp);
    Path socket = tmp.resolve("kubelet.sock");
    try (DemoNode node =
            DemoNode.create(
                root,
                new DemoOptions(3, 2, 1, 0, false, false, true, java.time.Clock.systemUTC()));
        FakeKubelet kubelet = new FakeKubelet(socket)) {
      kubelet.setList(node.podResources()).setAllocatable(node.allocatable());
      Path proc = tmp.resolve("proc");
      node.writeProcfs(proc);
      node.writeFakeNvmlScript(nvml.config(), "NVIDIA_H100_80GB_HBM3");
      java.util.Map<String, String> flags = new java.util.HashMap<>();
      flags.put("path.cache-root", root.toString());
      flags.put("path.procfs", proc.toString());
      flags.put("node-name", "demo-node");
      flags.put("kubernetes", "false");
      flags.put("nvml.library", io.vgpu.exporter.nvml.FakeNvml.library().toString());
      flags.put("nvml.sample-interval", "200ms");
      flags.put("kubelet.pod-resources-interval", "200ms");
      flags.put("stale.grace-period", "0s"); // as the demo serves: the deleted pod is stale
      flags.put("attribution.feedback", "false");
      flags.put("web.listen-address", "127.0.0.1");
      flags.put("web.listen-port", "0");
      try (ExporterApp app =
          ExporterApp.builder(ExporterConfig.resolve(flags, java.util.Map.of()))
              .metadata(node.metadata())
              .podResourcesSocket(socket)
              .build()
              .start()) {
        URI uri = URI.create("http://127.0.0.1:" + app.port() + "/metrics");
        Samples s = null;
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (System.nanoTime() < deadline) {
          node.tick(); // as the demo's ticker: fresh NVML samples every round
          node.writeFakeNvmlScript(nvml.config(), "NVIDIA_H100_80GB_HBM3");
          s =
              Samples.parse(
                  HttpClient.newHttpClient()
                      .send(
                          HttpRequest.newBuilder(uri).build(), HttpResponse.BodyHandlers.ofString())
                      .body());
          if (s.find("vgpu_container_device_info", "sharing", "timeslice").size() == 2
              && !s.find("vgpu_container_memory_used_bytes", "pod", "finetune-llama-0").isEmpty()
              && s.value("vgpu_container_memory_used_bytes", "pod", "finetune-llama-0") > 0
              && !s.find("vgpu_container_sm_utilization_ratio", "pod", "finetune-llama-0").isEmpty()
              && s.find("vgpu_container_sm_utilization_ratio", "pod", "finetune-llama-0")
                      .getFirst()
                      .value()
                  > 0) {
            break;
          }
          Thread.sleep(300);
        }
        java.util.Map<String, java.util.Set<String>> podsBySharing = new java.util.TreeMap<>();
        for (Samples.Sample x : s.find("vgpu_container_device_info")) {
          podsBySharing
              .computeIfAbsent(x.labels().get("sharing"), k -> new java.util.TreeSet<>())
              .add(x.labels().get("pod") + "/" + x.labels().get("container"));
        }
        assertThat(podsBySharing)
            .containsOnlyKeys("vgpu", "whole", "mig", "timeslice")
            .containsEntry(
                "vgpu",
                java.util.Set.of(
                    "train-resnet-0/trainer",
                    "train-resnet-0/sidecar-logger",
                    "llm-serve-7f9c/server"))
            .containsEntry("whole", java.util.Set.of("finetune-llama-0/trainer"))
            .containsEntry("mig", java.util.Set.of("mig-serve-a/server", "mig-serve-b/server"))
            .containsEntry(
                "timeslice", java.util.Set.of("notebook-ts-a/notebook", "notebook-ts-b/notebook"));
        // Each on its own device: the whole GPU, the two MIG devices with their profiles, the
        // time-sliced GPU.
        assertThat(one(s, "vgpu_container_device_info", "pod", "finetune-llama-0"))
            .containsEntry("device_uuid", DemoNode.gpuUuid(2));
        assertThat(one(s, "vgpu_container_device_info", "pod", "mig-serve-a"))
            .containsEntry("device_uuid", DemoHolders.migUuid(3, 0))
            .containsEntry("mig_profile", "3g.40gb");
        assertThat(one(s, "vgpu_container_device_info", "pod", "mig-serve-b"))
            .containsEntry("device_uuid", DemoHolders.migUuid(3, 1))
            .containsEntry("mig_profile", "2g.20gb");
        assertThat(s.find("vgpu_container_device_info", "sharing", "timeslice"))
            .allSatisfy(
                x -> assertThat(x.labels()).containsEntry("device_uuid", DemoNode.gpuUuid(4)));
        // The whole-GPU pod's process, found by its cgroup: its NVML memory, its SM, its pod facts.
        assertThat(s.value("vgpu_container_memory_used_bytes", "pod", "finetune-llama-0"))
            .isEqualTo(30.0 * (1L << 30));
        assertThat(
                s.value("vgpu_container_processes", "pod", "finetune-llama-0", "state", "running"))
            .isEqualTo(1.0);
        assertThat(one(s, "vgpu_container_pod_info", "pod", "notebook-ts-a"))
            .containsEntry("qos_class", "guaranteed");
        // Nothing on the holders' GPUs is left unattributed.
        for (int g = 2; g <= 4; g++) {
          assertThat(
                  s
                      .find("vgpu_gpu_unattributed_processes", "device_uuid", DemoNode.gpuUuid(g))
                      .stream()
                      .mapToDouble(Samples.Sample::value)
                      .sum())
              .as("unattributed on GPU %d", g)
              .isZero();
        }
        assertThat(kubelet.listCalls()).isPositive();
      }
    }
  }

  private static java.util.Map<String, String> one(
      Samples s, String family, String label, String value) {
    List<Samples.Sample> found = s.find(family, label, value);
    assertThat(found).as(family + " of " + value).hasSize(1);
    return found.getFirst().labels();
  }
}

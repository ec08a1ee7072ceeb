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
import io.vgpu.exporter.exposition.Family;
import io.vgpu.exporter.nvml.FakeNvml;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSnapshot;
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
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The whole exporter (discovery, collectors, HTTP) with the NVML sampler on the fake library and
 * attribution on a procfs fixture: what a scrape shows, and what the write-back modes write.
 */
class AttributionEndToEndTest {
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

  private ExporterApp start(Map<String, String> extra) {
    Map<String, String> flags = new HashMap<>();
    flags.put("path.cache-root", dir.resolve("containers").toString());
    flags.put("path.procfs", w.proc.toString());
    flags.put("node-name", "n1");
    flags.put("kubernetes", "false");
    flags.put("nvml.library", FakeNvml.library().toString());
    flags.put("nvml.sample-interval", "100ms");
    flags.put("web.listen-address", "127.0.0.1");
    flags.put("web.listen-port", "0");
    flags.putAll(extra);
    ExporterConfig config = ExporterConfig.resolve(flags, Map.of());
    app = ExporterApp.builder(config).build().start();
    return app;
  }

  /** Scrapes until the series has {@code want} (the evidence pass runs once a second here). */
  private void awaitScrape(String pod, String family, String label, double want) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    double got = Double.NaN;
    while (System.nanoTime() < deadline) {
      got = value(scrape(), family, pod, label);
      if (got == want) {
        return;
      }
      Thread.sleep(100);
    }
    throw new AssertionError(family + " " + label + " stayed " + got + ", want " + want);
  }

  private AttributionService service() {
    return app.attribution().orElseThrow();
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
      if (line.startsWith(name + "{") || line.startsWith(name + " ")) {
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

  /**
   * Waits until the reconciled value has converged on {@code expected}. The first value can be the
   * mean of a partly filled window (the sampler's first samples predate the process's busy ones),
   * and on a loaded machine the first attribution pass lands inside that time; a value that never
   * converges fails here, with the last one seen.
   */
  private void awaitUtilization(ContainerKey k, double expected) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    java.util.OptionalDouble last = java.util.OptionalDouble.empty();
    while (System.nanoTime() < deadline) {
      last =
          service()
              .latest()
              .container(k)
              .map(c -> c.devices().getFirst().smUtilization())
              .orElse(java.util.OptionalDouble.empty());
      if (last.isPresent() && Math.abs(last.getAsDouble() - expected) <= 0.05) {
        return;
      }
      Thread.sleep(50);
    }
    throw new AssertionError(
        "reconciled utilization of " + k + " never reached " + expected + ": " + last);
  }

  private void awaitUtilization(ContainerKey k) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (System.nanoTime() < deadline) {
      var c = service().latest().container(k);
      if (c.isPresent() && c.get().devices().getFirst().smUtilization().isPresent()) {
        return;
      }
      Thread.sleep(50);
    }
    throw new AssertionError("no reconciled utilization for " + k + ": " + service().latest());
  }

  @Test
  void scrape_hamiCoreZeroUtilizationBug_bothFamiliesCarryTheReconciledValue() throws Exception {
    w = new World(dir);
    w.advance(Duration.between(World.START, Instant.now()));
    ContainerKey k = key(1, "train");
    w.podProcess(4001, 777, 1, 1, 1);
    Path region =
        w.region(k, spec(GPU0).recentKernel(2).slot(1, 1, 1, usage(0, 2 * GIB, 0)).build());
    w.gpu(0, GPU0, 70).gpuProcess(0, 4001, 2 * GIB).busyUntil(0, 4001, 65, Duration.ofMinutes(2));
    w.fake.write(nvmlConfig(w));

    // HAMi parity, as the chart's HAMi-replacement mode runs it (the binary's default is off).
    start(Map.of("attribution.feedback", "true"));
    awaitUtilization(k, 0.65);
    String text = scrape();

    String pod = "pod_uid=\"" + k.podUid() + "\"";
    assertThat(value(text, "vgpu_container_sm_utilization_ratio", pod))
        .isCloseTo(0.65, within(0.05));
    assertThat(value(text, "hami_container_device_utilization_ratio", "container=\"train\""))
        .isCloseTo(65, within(5.0));
    assertThat(value(text, "vgpu_container_region_sm_utilization_ratio", pod)).isZero();
    assertThat(
            value(text, "vgpu_container_hostpid_mismatch_slots", pod, "reason=\"container_pid\""))
        .isEqualTo(1);
    assertThat(value(text, "vgpu_exporter_nvml_up")).isEqualTo(1);
    assertThat(value(text, "vgpu_gpu_unattributed_processes", "device_uuid=\"" + GPU0 + "\""))
        .isZero();
    assertThat(value(text, "vgpu_container_nvml_memory_used_bytes", pod)).isEqualTo(2.0 * GIB);

    // HAMi parity: the lone active container's recent_kernel decays, switch off.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    RegionSnapshot s;
    do {
      Thread.sleep(50);
      try (RegionFile f = RegionFile.openReadOnly(region)) {
        s = f.snapshot();
      }
    } while ((s.recentKernel() != 1 || s.utilizationSwitch() != 0) && System.nanoTime() < deadline);
    assertThat(s.recentKernel()).isEqualTo(1);
    assertThat(s.utilizationSwitch()).isZero();
    String after = scrape();
    assertThat(value(after, "vgpu_exporter_region_writes_total", "field=\"recent_kernel\""))
        .isEqualTo(1);
    assertThat(value(after, "vgpu_exporter_region_writes_total", "field=\"utilization_switch\""))
        .isEqualTo(1);
    assertThat(value(after, "vgpu_exporter_region_writes_total", "field=\"hostpid\"")).isZero();
    // the hostpid stays wrong: repair is off by default
    assertThat(s.processes().getFirst().hostPid()).isEqualTo(1);
    promtool(after);
  }

  @Test
  void scrape_hostPidRepairOn_writesResolvedHostPidIntoTheSlot() throws Exception {
    w = new World(dir);
    w.advance(Duration.between(World.START, Instant.now()));
    ContainerKey k = key(2, "infer");
    w.podProcess(4101, 5, 2, 2, 7);
    Path region = w.region(k, spec(GPU0).slot(7, 7, 1, usage(0, GIB, 0)).build());
    w.gpu(0, GPU0, 0).gpuProcess(0, 4101, GIB);
    w.fake.write(nvmlConfig(w));

    start(Map.of("attribution.repair-hostpid", "true", "attribution.feedback", "false"));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    int hostPid;
    do {
      Thread.sleep(50);
      try (RegionFile f = RegionFile.openReadOnly(region)) {
        hostPid = f.snapshot().processes().getFirst().hostPid();
      }
    } while (hostPid != 4101 && System.nanoTime() < deadline);

    assertThat(hostPid).isEqualTo(4101);
    String text = scrape();
    assertThat(value(text, "vgpu_exporter_region_writes_total", "field=\"hostpid\"")).isEqualTo(1);
    assertThat(value(text, "vgpu_exporter_region_writes_total", "field=\"recent_kernel\""))
        .isZero();
  }

  /**
   * On a node that does not change, a render builds no label set: every point of every family
   * carries the same label object as in the previous render. The encoder's label bytes and each
   * family's point order are remembered by identity, so a collector that builds label sets per
   * scrape makes every render encode and sort its points again (the reasons of
   * sm_utilization_unknown, the exporter's own families, the GPUs' labels did, a third of a
   * render's CPU on a node of 100 containers).
   */
  @Test
  void render_steadyNode_reusesEveryLabelSet() throws Exception {
    w = new World(dir);
    ContainerKey healthy = key(3, "main");
    w.podProcess(4201, 5, 3, 3, 1);
    w.region(healthy, spec(GPU0).slot(1, 4201, 1, usage(0, GIB, 40)).build());
    ContainerKey unseen = key(4, "main");
    w.region(unseen, spec(GPU0).slot(1, 4301, 1, usage(0, GIB, 10)).build());
    w.fake.write("fail nvmlInit 9");

    start(Map.of("attribution.feedback", "false"));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (service().latest().container(healthy).isEmpty() && System.nanoTime() < deadline) {
      Thread.sleep(50);
    }
    // The node is steady once the first evidence pass has finished too: until then its age family
    // is absent, and a pass that ends between the two renders below adds a family (a CI failure).
    while (app.page().families().stream()
            .noneMatch(
                f -> f.metadata().getName().equals("vgpu_exporter_evidence_pass_age_seconds"))
        && System.nanoTime() < deadline) {
      Thread.sleep(50);
    }
    app.page().families(); // the exporter's own families report the collectors seen so far
    List<? extends Family> first = app.page().families();
    List<? extends Family> second = app.page().families();

    assertThat(second)
        .extracting(f -> f.metadata().getName())
        .containsExactlyElementsOf(first.stream().map(f -> f.metadata().getName()).toList())
        .contains("vgpu_container_sm_utilization_unknown", "vgpu_exporter_parse_errors");
    for (int i = 0; i < first.size(); i++) {
      Family a = first.get(i);
      Family b = second.get(i);
      assertThat(b.size()).as(a.metadata().getName()).isEqualTo(a.size());
      for (int p = 0; p < a.size(); p++) {
        assertThat((Object) b.labels(p))
            .as("%s point %d %s", a.metadata().getName(), p, a.labels(p))
            .isSameAs(a.labels(p));
      }
    }
  }

  @Test
  void scrape_noWriteFlagsAndNoDriver_readOnlyAndUtilizationUnknownNotZero() throws Exception {
    w = new World(dir);
    ContainerKey k = key(3, "main");
    w.podProcess(4201, 5, 3, 3, 1);
    Path region = w.region(k, spec(GPU0).slot(1, 4201, 1, usage(0, GIB, 40)).build());
    byte[] before = Files.readAllBytes(region);
    w.fake.write("fail nvmlInit 9");

    start(Map.of("attribution.feedback", "false"));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (service().latest().container(k).isEmpty() && System.nanoTime() < deadline) {
      Thread.sleep(50);
    }
    String text = scrape();

    assertThat(text).doesNotContain("vgpu_container_sm_utilization_ratio{");
    assertThat(value(text, "vgpu_container_sm_utilization_unknown", "reason=\"nvml_unavailable\""))
        .isEqualTo(1);
    assertThat(value(text, "hami_container_device_utilization_ratio", "container=\"main\""))
        .isNaN();
    assertThat(value(text, "vgpu_exporter_nvml_up")).isZero();
    assertThat(value(text, "vgpu_exporter_nvml_errors_total", "return_code=\"9\"")).isPositive();
    assertThat(value(text, "vgpu_container_memory_used_bytes", "container=\"main\""))
        .isEqualTo(GIB);
    assertThat(app.readiness().verdict().reasons()).anyMatch(r -> r.contains("driver_not_loaded"));
    assertThat(service().writableMappings()).isZero();
    assertThat(Files.readAllBytes(region)).isEqualTo(before);
  }

  @Test
  void scrape_processKilledLeavingItsSlot_zombieMemoryLeavesUsedAndIsReported() throws Exception {
    w = new World(dir);
    w.advance(Duration.between(World.START, Instant.now()));
    ContainerKey k = key(4, "job");
    w.podProcess(4301, 5, 4, 4, 1).podProcess(4302, 6, 4, 4, 2);
    Path region =
        w.region(
            k,
            spec(GPU0)
                .slot(1, 4301, 1, usage(0, GIB, 0))
                .slot(2, 4302, 1, usage(0, 3 * GIB, 0))
                .build());
    w.mapsRegion(4301, region).mapsRegion(4302, region);
    w.gpu(0, GPU0, 0).gpuProcess(0, 4301, GIB).gpuProcess(0, 4302, 3 * GIB);
    w.fake.write(nvmlConfig(w));
    start(Map.of("attribution.feedback", "false", "web.status-max-age", "1s"));
    awaitUtilization(k);
    String pod = "pod_uid=\"" + k.podUid() + "\"";
    awaitScrape(pod, "vgpu_container_processes", "state=\"running\"", 2);
    assertThat(value(scrape(), "vgpu_container_memory_used_bytes", pod)).isEqualTo(4.0 * GIB);

    w.kill(4302); // SIGKILL: HAMi-core leaves status 1 and the usage in the slot
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (service().latest().container(k).map(ContainerAttribution::zombieSlots).orElse(0L) == 0
        && System.nanoTime() < deadline) {
      Thread.sleep(50);
    }
    // The one judgment (the evidence pass) calls the killed process's slot GONE.
    awaitScrape(pod, "vgpu_container_processes", "state=\"gone\"", 1);
    String text = scrape();
    assertThat(value(text, "vgpu_container_zombie_slots", pod)).isEqualTo(1);
    assertThat(value(text, "vgpu_container_zombie_memory_bytes", pod)).isEqualTo(3.0 * GIB);
    assertThat(value(text, "vgpu_container_memory_used_bytes", pod)).isEqualTo(1.0 * GIB);
    assertThat(value(text, "vgpu_container_processes", pod, "state=\"running\"")).isEqualTo(1);
  }

  /** The NVML lines World accumulated, as the config the fake reads. */
  private static String[] nvmlConfig(World w) {
    w.poll(); // writes the config (and exercises the World's own sampler once)
    try {
      return Files.readAllLines(w.fake.config()).toArray(String[]::new);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /**
   * Prometheus' own linter over this test's families. promtool is a build dependency ({@code make
   * deps}, scripts/install-deps.sh), so a missing one fails the test rather than skipping the
   * check.
   */
  private static void promtool(String text) throws Exception {
    Process p;
    try {
      p = new ProcessBuilder("promtool", "check", "metrics").redirectErrorStream(true).start();
    } catch (java.io.IOException e) {
      throw new AssertionError("promtool not runnable; install it with `make deps`", e);
    }
    p.getOutputStream().write(text.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    p.getOutputStream().close();
    String out =
        new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(
            out.lines()
                .filter(
                    l ->
                        l.contains("vgpu_container_sm")
                            || l.contains("vgpu_gpu_")
                            || l.contains("nvml")
                            || l.contains("region_writes")
                            || l.contains("hostpid")
                            || l.contains("zombie")
                            || l.contains("priority_blocked")
                            || l.contains("unslotted")
                            || l.contains("memory_idle")
                            || l.contains("leak")
                            || l.contains("over_sm_limit")))
        .as(out)
        .isEmpty();
  }
}

package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.testing.TestNode.NOW;
import static io.vgpu.exporter.testing.TestNode.UID_DONE;
import static io.vgpu.exporter.testing.TestNode.UID_GONE;
import static io.vgpu.exporter.testing.TestNode.UID_SERVE;
import static io.vgpu.exporter.testing.TestNode.UID_TRAIN;
import static io.vgpu.exporter.testing.TestRegions.MIB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.vgpu.exporter.config.ConfigException;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.config.Flags;
import io.vgpu.exporter.k8s.PodMetadataSource;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestNode;
import io.vgpu.exporter.testing.TestRegions;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CollectorsTest {
  @TempDir Path root;
  private TestNode node;

  @BeforeEach
  void setUp() throws IOException {
    node = new TestNode(root);
  }

  @AfterEach
  void tearDown() {
    node.close();
  }

  private Samples scrape() throws IOException {
    return Samples.parse(TestNode.text(node.registry()));
  }

  @Test
  void region_runningContainer_exportsUsageLimitsAndBreakdownPerDevice() throws IOException {
    Samples s = scrape();
    String[] train0 = {
      "pod_uid",
      UID_TRAIN,
      "container",
      "trainer",
      "device_index",
      "0",
      "device_uuid",
      TestRegions.uuid(0),
      "namespace",
      "ml",
      "pod",
      "train-0",
      "node",
      "node-a"
    };
    // Two slots of 512 MiB each.
    assertThat(s.value("vgpu_container_memory_used_bytes", train0)).isEqualTo(1024.0 * MIB);
    assertThat(s.value("vgpu_container_memory_limit_bytes", train0)).isEqualTo(4096.0 * MIB);
    assertThat(s.value("vgpu_container_memory_breakdown_bytes", with(train0, "kind", "context")))
        .isEqualTo(2.0 * MIB);
    assertThat(s.value("vgpu_container_memory_breakdown_bytes", with(train0, "kind", "data")))
        .isEqualTo(1020.0 * MIB);
    assertThat(s.value("vgpu_container_sm_limit_ratio", train0)).isEqualTo(0.3);
    assertThat(s.value("vgpu_container_region_sm_utilization_ratio", train0)).isEqualTo(0.4);
    assertThat(s.value("vgpu_container_oom_rejections_total", train0)).isEqualTo(3.0);
    assertThat(s.value("vgpu_limiter_throttled_seconds_total", train0)).isEqualTo(2.5);
    assertThat(s.value("vgpu_limiter_launches_delayed_total", train0)).isEqualTo(7.0);
    assertThat(s.find("vgpu_container_memory_used_bytes", "pod_uid", UID_TRAIN)).hasSize(2);
  }

  @Test
  void region_smLimitZero_meansUnlimitedAndNoExtensionMeansNoLimiterSeries() throws IOException {
    Samples s = scrape();
    assertThat(s.value("vgpu_container_sm_limit_ratio", "pod_uid", UID_SERVE)).isEqualTo(1.0);
    assertThat(s.find("vgpu_container_oom_rejections_total", "pod_uid", UID_SERVE)).isEmpty();
    assertThat(s.value("vgpu_container_region_sm_utilization_ratio", "pod_uid", UID_SERVE))
        .isEqualTo(0.55);
  }

  @Test
  void container_finishedPod_isNotExportedAsRunningAndHasNoUsage() throws IOException {
    Samples s = scrape();
    assertThat(s.value("vgpu_container_finished", "pod_uid", UID_DONE)).isEqualTo(1.0);
    assertThat(s.value("vgpu_container_processes", "pod_uid", UID_DONE, "state", "running"))
        .isZero();
    assertThat(s.find("vgpu_container_memory_used_bytes", "pod_uid", UID_DONE)).isEmpty();
    assertThat(s.find("hami_vgpu_memory_used_bytes", "pod", "prep-done")).isEmpty();
    // No evidence pass behind this node view: its slots are not judged, never guessed alive.
    assertThat(s.value("vgpu_container_processes", "pod_uid", UID_TRAIN, "state", "unknown"))
        .isEqualTo(2.0);
    assertThat(s.value("vgpu_container_processes", "pod_uid", UID_TRAIN, "state", "running"))
        .isZero();
  }

  @Test
  void container_podGoneWhileApiServerAuthoritative_isStale() throws IOException {
    Samples s = scrape();
    assertThat(s.value("vgpu_container_stale", "pod_uid", UID_GONE)).isEqualTo(1.0);
    assertThat(s.value("vgpu_container_stale", "pod_uid", UID_TRAIN)).isZero();
    // Still exported from the directory name: the memory may still be held.
    assertThat(
            s.value(
                "vgpu_container_memory_used_bytes",
                "pod_uid",
                UID_GONE,
                "container",
                "main",
                "pod",
                ""))
        .isEqualTo(64.0 * MIB);
  }

  @Test
  void container_regionInfoAndPodInfo_carryLayoutAndAllowListedFacts() throws IOException {
    ExporterConfig cfg =
        ExporterConfig.resolve(Map.of("kubernetes.pod-labels", "app,team"), Map.of());
    Samples s = Samples.parse(TestNode.text(node.registry(cfg, node.states)));
    assertThat(
            s.value(
                "vgpu_container_region_info",
                "pod_uid",
                UID_TRAIN,
                "layout",
                "v1.2",
                "version",
                "1.2"))
        .isEqualTo(1.0);
    assertThat(
            s.value(
                "vgpu_container_pod_info",
                "pod_uid",
                UID_TRAIN,
                "label_app",
                "train-0",
                "label_team",
                "",
                "qos_class",
                "burstable",
                "container_kind",
                "regular"))
        .isEqualTo(1.0);
    assertThat(s.value("vgpu_container_last_kernel_timestamp_seconds", "pod_uid", UID_TRAIN))
        .isEqualTo(1.7e9);
  }

  /** API server down or RBAC denied: labels come from the directory name, and it says so. */
  @Test
  void scrape_apiServerDown_keepsExportingWithDirectoryNames() throws IOException {
    PodMetadataSource down = new CollectorsTestSupport.Down();
    Samples s =
        Samples.parse(
            TestNode.text(node.registry(ExporterConfig.defaults(), node.statesWith(down))));
    assertThat(s.value("vgpu_exporter_apiserver_up", "node", "node-a")).isZero();
    assertThat(
            s.value(
                "vgpu_container_memory_used_bytes",
                "pod_uid",
                UID_TRAIN,
                "container",
                "trainer",
                "device_index",
                "0",
                "namespace",
                "",
                "pod",
                ""))
        .isEqualTo(1024.0 * MIB);
    // Not authoritative: nothing is declared stale while the API server cannot be asked.
    assertThat(s.find("vgpu_container_stale").stream().mapToDouble(x -> x.value()).sum()).isZero();
  }

  @Test
  void node_annotations_exportHandshakeAgeDevicesAndMutex() throws IOException {
    Samples s = scrape();
    assertThat(s.value("vgpu_node_handshake_age_seconds", "node", "node-a")).isEqualTo(42.0);
    assertThat(s.value("vgpu_node_registered_devices", "node", "node-a")).isEqualTo(8.0);
    assertThat(s.value("vgpu_node_mutex_locked", "node", "node-a")).isEqualTo(1.0);
  }

  @Test
  void hami_compatFamilies_haveHamisExactNamesLabelsAndValues() throws IOException {
    Samples s = scrape();
    Set<String> hamiNames =
        s.all().stream()
            .map(Samples.Sample::name)
            .filter(n -> n.startsWith("hami_"))
            .collect(Collectors.toSet());
    assertThat(hamiNames)
        .containsExactlyInAnyOrder(
            "hami_vgpu_memory_used_bytes",
            "hami_vgpu_memory_limit_bytes",
            "hami_container_device_utilization_ratio",
            "hami_container_device_memory_bytes",
            "hami_container_last_kernel_elapsed_seconds",
            "hami_vgpu_memory_context_bytes",
            "hami_vgpu_memory_module_bytes",
            "hami_vgpu_memory_buffer_bytes");
    for (Samples.Sample x : s.all()) {
      if (x.name().startsWith("hami_")) {
        assertThat(x.labels().keySet())
            .as(x.name())
            .containsExactlyInAnyOrder(
                "namespace", "pod", "container", "vdevice_index", "device_uuid", "zone");
        assertThat(x.labels()).containsEntry("zone", "vGPU");
      }
    }
    String[] l = {
      "namespace",
      "ml",
      "pod",
      "train-0",
      "container",
      "trainer",
      "vdevice_index",
      "1",
      "device_uuid",
      TestRegions.uuid(1)
    };
    assertThat(s.value("hami_vgpu_memory_used_bytes", l)).isEqualTo(1024.0 * MIB);
    assertThat(s.value("hami_container_device_memory_bytes", l)).isEqualTo(1024.0 * MIB);
    assertThat(s.value("hami_vgpu_memory_limit_bytes", l)).isEqualTo(4096.0 * MIB);
    // HAMi's scale: the sum of per-process percents.
    assertThat(s.value("hami_container_device_utilization_ratio", l)).isEqualTo(40.0);
    assertThat(s.value("hami_container_last_kernel_elapsed_seconds", l))
        .isEqualTo(NOW.getEpochSecond() - 1.7e9);
    assertThat(s.value("hami_vgpu_memory_buffer_bytes", l)).isEqualTo(1020.0 * MIB);
    // A directory of a deleted pod is not in HAMi's view.
    assertThat(s.find("hami_vgpu_memory_used_bytes", "pod", "")).isEmpty();
  }

  @Test
  void hami_disabledByFlag_emitsNoHamiFamily() throws IOException {
    ExporterConfig cfg = ExporterConfig.defaults().with(Flags.HAMI_COMPAT, false);
    Samples s = Samples.parse(TestNode.text(node.registry(cfg, node.states)));
    assertThat(s.all()).noneMatch(x -> x.name().startsWith("hami_"));
    assertThat(s.named("vgpu_container_memory_used_bytes")).isNotEmpty();
  }

  @Test
  void scrape_neverEmitsHamiLegacyFamiliesOrValuesInLabels() throws IOException {
    Samples s = scrape();
    assertThat(s.all())
        .extracting(Samples.Sample::name)
        .noneMatch(
            n ->
                n.startsWith("vGPU_")
                    || n.startsWith("Device_")
                    || n.startsWith("HostGPU")
                    || n.startsWith("HostCore"));
    for (Samples.Sample x : s.all()) {
      assertThat(x.labels().keySet())
          .doesNotContain("context", "module", "data", "offset", "podnamespace", "deviceuuid");
    }
  }

  @Test
  void exporter_selfMetrics_reportFilesParseErrorsAndCollectors() throws IOException {
    PrometheusRegistry r = node.registry();
    r.scrape();
    Samples s = Samples.parse(TestNode.text(r));
    assertThat(s.value("vgpu_exporter_files_mapped", "node", "node-a")).isEqualTo(4.0);
    assertThat(s.value("vgpu_exporter_build_info", "version", "1.2.3", "revision", "abc"))
        .isEqualTo(1.0);
    assertThat(s.find("vgpu_exporter_parse_errors_total"))
        // one series per file-format reason, plus too_many_files for the per-directory cap
        .hasSize(io.vgpu.regioncodec.RegionException.Reason.values().length + 1);
    for (String c : List.of("region", "container", "node", "hami")) {
      assertThat(s.value("vgpu_exporter_collector_success", "collector", c)).isEqualTo(1.0);
    }
  }

  @Test
  void regionUnreadable_brokenFileStaysBroken_gaugeStaysOneWithItsReasonOnEveryScrape()
      throws IOException {
    // A v1.2-sized file whose minor version says 3: the codec cannot read it. The parse-error
    // counter rises once; the gauge must stay 1 for as long as the file stays broken.
    Path broken = root.resolve(UID_SERVE + "_server").resolve("v13.cache");
    java.nio.file.Files.copy(root.resolve(UID_SERVE + "_server").resolve("b.cache"), broken);
    try (java.io.RandomAccessFile raf = new java.io.RandomAccessFile(broken.toFile(), "rw")) {
      raf.seek(8);
      raf.write(new byte[] {3, 0, 0, 0});
    }
    node.discovery.rescan();
    for (int scrape = 0; scrape < 3; scrape++) {
      Samples s = scrape();
      assertThat(
              s.value(
                  "vgpu_container_region_unreadable",
                  "pod_uid",
                  UID_SERVE,
                  "container",
                  "server",
                  "reason",
                  "unknown_version"))
          .as("scrape %d", scrape)
          .isEqualTo(1.0);
      assertThat(s.find("vgpu_container_region_unreadable", "pod_uid", UID_TRAIN)).isEmpty();
    }
    java.nio.file.Files.delete(broken);
    node.discovery.rescan();
    assertThat(scrape().named("vgpu_container_region_unreadable")).isEmpty();
  }

  @Test
  void collectorsDisabled_unknownName_failsWithTheKnownNames() {
    ExporterConfig cfg =
        ExporterConfig.resolve(Map.of("collectors.disabled", "region,bogus"), Map.of());
    assertThatThrownBy(() -> node.registry(cfg, node.states))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("'bogus'")
        .hasMessageContaining("region");
  }

  @Test
  void collectorsDisabled_knownName_removesItsFamilies() throws IOException {
    ExporterConfig cfg = ExporterConfig.resolve(Map.of("collectors.disabled", "region"), Map.of());
    Samples s = Samples.parse(TestNode.text(node.registry(cfg, node.states)));
    assertThat(s.named("vgpu_container_memory_used_bytes")).isEmpty();
    assertThat(s.named("vgpu_container_processes")).isNotEmpty();
  }

  @Test
  void instrumented_failingCollector_isIsolatedAndReportedAsFailed() throws IOException {
    CollectorStats stats = new CollectorStats();
    PrometheusRegistry r = new PrometheusRegistry();
    VgpuCollector boom =
        new VgpuCollector(List.of(FamilySpec.gauge("boom_value", "never built"))) {
          @Override
          protected void collect(NodeState state, Sink out) {
            throw new IllegalStateException("broken");
          }
        };
    r.register(
        new CollectorChain(
            List.of(
                new CollectorChain.Member("boom", boom),
                new CollectorChain.Member(
                    "exporter",
                    new ExporterCollector(new BuildInfo("v", "r"), node.errors, stats))),
            node.states::build,
            stats));
    Samples s = Samples.parse(TestNode.text(r));
    assertThat(s.value("vgpu_exporter_collector_success", "collector", "boom")).isZero();
    assertThat(s.named("vgpu_exporter_files_mapped")).isNotEmpty();
  }

  @Test
  void metricNames_everyConstant_isAValidPrometheusName() throws IllegalAccessException {
    for (var f : MetricNames.class.getFields()) {
      String v = (String) f.get(null);
      assertThat(v).as(f.getName()).matches("[a-zA-Z_][a-zA-Z0-9_]*");
      if (f.getName().startsWith("L_")) {
        assertThat(v).matches("[a-z_]+");
      }
    }
  }

  private static String[] with(String[] base, String k, String v) {
    String[] out = java.util.Arrays.copyOf(base, base.length + 2);
    out[base.length] = k;
    out[base.length + 1] = v;
    return out;
  }

  @Test
  void stuckSeqlock_servedBestEffort_andCountedPerRead() throws Exception {
    try (TestNode node = new TestNode(root)) {
      PrometheusRegistry r = node.registry();
      assertThat(
              Samples.parse(TestNode.text(r)).value("vgpu_exporter_region_best_effort_reads_total"))
          .isZero();
      // Slot 0's seqlock (v1.2: 1856 + 1960 * 0 + 1936) left odd, as by a writer killed mid-update.
      Path region = root.resolve(UID_TRAIN + "_trainer").resolve("a.cache");
      try (var ch =
          java.nio.channels.FileChannel.open(region, java.nio.file.StandardOpenOption.WRITE)) {
        java.nio.ByteBuffer odd =
            java.nio.ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN).putLong(0, 7);
        ch.write(odd, 1856 + 1936);
      }
      Samples first = Samples.parse(TestNode.text(r));
      Samples second = Samples.parse(TestNode.text(r));
      assertThat(first.value("vgpu_exporter_region_best_effort_reads_total")).isGreaterThan(0);
      assertThat(second.value("vgpu_exporter_region_best_effort_reads_total"))
          .isGreaterThan(first.value("vgpu_exporter_region_best_effort_reads_total"));
      // The torn-looking slot is still served as read, and other containers are untouched.
      assertThat(second.find("vgpu_container_memory_used_bytes", "pod_uid", UID_TRAIN)).hasSize(2);
      assertThat(second.value("vgpu_container_memory_limit_bytes", "pod_uid", UID_SERVE))
          .isEqualTo(2048.0 * MIB);
    }
  }
}

package io.vgpu.exporter.reliability;

import static io.vgpu.exporter.reliability.LiveExporter.assertHealthyNeighbour;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestRegions;
import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.ExtensionDevice;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionExtension;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * libvgpu's {@code <cache>.degraded} side file, end to end through a live exporter's /metrics: a
 * well-formed file becomes {@code vgpu_container_region_degraded{cause}} = 1; a file that is a
 * link, a FIFO or garbage is reported as {@code malformed}, never followed, never blocks discovery
 * and never shows its content; a file whose process is provably gone is not reported.
 */
class DegradedSideFileTest {
  private static final String UID = "dddddddd-0000-4000-8000-00000000000d";
  private static final String METRIC = "vgpu_container_region_degraded";
  private static final long NOW = System.currentTimeMillis() / 1000;

  @TempDir Path dir;
  private Path root;
  private Path outside;
  private LiveExporter ex;
  private HostileDirFixture.OutsideWatch watch;

  @BeforeEach
  void setUp() throws IOException {
    root = Files.createDirectories(dir.resolve("containers"));
    outside = Files.createDirectories(dir.resolve("host"));
    LiveExporter.writeHealthy(root);
  }

  @AfterEach
  void tearDown() throws Exception {
    if (watch != null) {
      watch.close();
    }
    if (ex != null) {
      ex.close();
    }
  }

  private Path ctrDir() throws IOException {
    return Files.createDirectories(root.resolve(UID + "_train"));
  }

  private static String line(String cause, int pid, long time) {
    return "libvgpu-degraded v1 cause=" + cause + " pid=" + pid + " time=" + time + "\n";
  }

  private Samples scrapeAfterPass() throws Exception {
    ex.awaitPass();
    Samples s = ex.scrape();
    assertHealthyNeighbour(s);
    assertThat(s.find(METRIC, "pod_uid", LiveExporter.HEALTHY_UID)).isEmpty();
    return s;
  }

  private List<String> causes(Samples s) {
    return s.find(METRIC, "pod_uid", UID).stream()
        .peek(x -> assertThat(x.value()).isEqualTo(1.0))
        .map(x -> x.labels().get("cause"))
        .sorted()
        .toList();
  }

  @Test
  void wellFormedSideFile_gaugeOneWithItsCause() throws Exception {
    Path cache = ctrDir().resolve("x.cache");
    Files.createSymbolicLink(cache, outside.resolve("nowhere"));
    Files.writeString(ctrDir().resolve("x.cache.degraded"), line("symlink", 31, NOW));
    ex = LiveExporter.start(root, Map.of());
    Samples s = scrapeAfterPass();
    assertThat(causes(s)).containsExactly("symlink");
    assertThat(s.find(METRIC, "pod_uid", UID).getFirst().labels())
        .containsEntry("container", "train")
        .containsKeys("namespace", "pod", "node");

    // libvgpu rewrites the file in place when another process degrades for another reason.
    Files.writeString(ctrDir().resolve("x.cache.degraded"), line("slot-table-full", 32, NOW));
    assertThat(causes(scrapeAfterPass())).containsExactly("slot-table-full");

    Files.delete(ctrDir().resolve("x.cache.degraded"));
    assertThat(causes(scrapeAfterPass())).isEmpty();
  }

  @Test
  void garbageSideFile_malformedAndContentNeverShown() throws Exception {
    Files.writeString(
        ctrDir().resolve("x.cache.degraded"), "libvgpu-degraded v1 cause=evil\"} 1\nhack 9\n");
    ex = LiveExporter.start(root, Map.of());
    Samples s = scrapeAfterPass();
    assertThat(causes(s)).containsExactly("malformed");
    assertThat(ex.get("/metrics").body()).doesNotContain("evil").doesNotContain("hack");
  }

  @Test
  void symlinkedSideFile_notFollowed_malformed() throws Exception {
    // The target holds a valid line: following the link would report "no-space".
    Path target = Files.writeString(outside.resolve("forged"), line("no-space", 7, NOW));
    Files.createSymbolicLink(ctrDir().resolve("x.cache.degraded"), target);
    ex = LiveExporter.start(root, Map.of());
    watch = new HostileDirFixture.OutsideWatch(outside);
    assertThat(causes(scrapeAfterPass())).containsExactly("malformed");
    watch.assertUntouched();
  }

  @Test
  void hardLinkedSideFile_malformed() throws Exception {
    Path other = Files.writeString(ctrDir().resolve("other"), line("no-space", 7, NOW));
    Files.createLink(ctrDir().resolve("x.cache.degraded"), other);
    ex = LiveExporter.start(root, Map.of());
    assertThat(causes(scrapeAfterPass())).containsExactly("malformed");
  }

  @Test
  void fifoSideFile_neverBlocksDiscovery_malformed() throws Exception {
    HostileFilesTest.mkfifo(ctrDir().resolve("x.cache.degraded"));
    // A link to a FIFO outside: following it would block the discovery thread forever.
    HostileFilesTest.mkfifo(outside.resolve("trap"));
    Files.createSymbolicLink(ctrDir().resolve("y.cache.degraded"), outside.resolve("trap"));
    ex = LiveExporter.start(root, Map.of());
    watch = new HostileDirFixture.OutsideWatch(outside);
    assertThat(causes(scrapeAfterPass())).containsExactly("malformed");
    long gen = ex.app.discovery().current().generation();
    Await.until(Duration.ofSeconds(10), () -> ex.app.discovery().current().generation() > gen + 2);
    watch.assertUntouched();
  }

  @Test
  void staleSideFile_processGoneOrRegionRecreated_notReported() throws Exception {
    // The recorded pid now holds a live slot: the degraded process (never registered) is gone.
    RegionSpec withPid31 = TestRegions.spec(1, 1024, 0, new int[] {31}, 10, 0, true);
    TestRegions.write(root, UID, "train", "x.cache", withPid31);
    Files.writeString(ctrDir().resolve("x.cache.degraded"), line("no-space", 31, NOW));
    ex = LiveExporter.start(root, Map.of());
    assertThat(causes(scrapeAfterPass())).isEmpty();

    // Another pid, region created (extension created time) before the side file: reported.
    Files.writeString(ctrDir().resolve("x.cache.degraded"), line("no-space", 99, NOW));
    assertThat(causes(scrapeAfterPass())).containsExactly("no-space");

    // The region was recreated after the process degraded: the cause is fixed, nothing reported.
    Files.delete(ctrDir().resolve("x.cache"));
    RegionWriter.create(ctrDir().resolve("x.cache"), createdAt(NOW + 60));
    assertThat(causes(scrapeAfterPass())).isEmpty();
  }

  private static RegionSpec createdAt(long epochSeconds) {
    return RegionSpec.builder(Layout.V1_2)
        .device(TestRegions.uuid(0), 1024 * TestRegions.MIB, 0)
        .slot(
            RegionSpec.SlotSpec.of(
                5,
                1005,
                1,
                List.of(new DeviceUsage(0, 0, 0, TestRegions.MIB, TestRegions.MIB, 0, 0))))
        .extension(
            new RegionExtension(
                1,
                0,
                0,
                epochSeconds * 1_000_000_000L,
                "test",
                "",
                "",
                0,
                0,
                List.of(new ExtensionDevice(0, 0, 0, 0, 0, 0, 0, 0))))
        .build();
  }
}

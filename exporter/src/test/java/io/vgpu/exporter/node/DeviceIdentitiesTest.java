package io.vgpu.exporter.node;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.discovery.CacheDiscovery;
import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.discovery.ParseErrors;
import io.vgpu.exporter.k8s.StaticMetadataSource;
import io.vgpu.exporter.nvml.GpuIdentity;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.exporter.nvml.NvmlStatus;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 31 item 6: device labels are NVML's identity, not the region's bytes. Before, a tenant
 * rewriting the 16 uuids of its region before each scrape minted 16 fresh series per scrape
 * (Prometheus keeps each for hours).
 */
class DeviceIdentitiesTest {
  private static final String UID = "0f1e2d3c-4b5a-4978-8796-a5b4c3d2e1f0";
  private static final ContainerKey KEY = new ContainerKey(UID, "main");
  private static final Instant NOW = Instant.parse("2026-11-27T14:00:00Z");
  private static final String GPU0 = "GPU-6a1b2c3d-0000-1111-2222-333344445555";
  private static final String GPU1 = "GPU-6a1b2c3d-0000-1111-2222-333344446666";

  @TempDir Path root;

  private static String uuid(int round, int device) {
    return "GPU-%08x-0000-0000-0000-%012x".formatted(round, device);
  }

  /** The device labels of {@code rounds} scrapes, the region's 16 uuids rewritten before each. */
  private Set<String> labelsOverRewrites(NodeStateProvider states, CacheDiscovery d, int rounds)
      throws IOException {
    Set<String> labels = new HashSet<>();
    Path dir = Files.createDirectories(root.resolve(UID + "_main"));
    for (int r = 0; r < rounds; r++) {
      RegionSpec.Builder b = RegionSpec.builder(Layout.V1_2);
      for (int dev = 0; dev < 16; dev++) {
        b.device(uuid(r, dev), 1L << 30, 0);
      }
      Path tmp = dir.resolve("a.cache.tmp");
      RegionWriter.create(tmp, b.build());
      Files.move(tmp, dir.resolve("a.cache"), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
      d.rescan();
      for (DeviceUsageSummary s : states.build().containers().getFirst().devices()) {
        labels.add(s.uuid());
      }
    }
    return labels;
  }

  @Test
  void nvmlDown_rewrittenUuidsEveryScrape_seriesBoundedByTheChurnAllowance() throws IOException {
    try (CacheDiscovery d =
        new CacheDiscovery(
            root, Duration.ofHours(1), InstantSource.fixed(NOW), false, new ParseErrors())) {
      NodeStateProvider states =
          new NodeStateProvider(
              "node-a",
              d::current,
              StaticMetadataSource.disabled(),
              InstantSource.fixed(NOW),
              Duration.ofMinutes(5));
      Set<String> labels = labelsOverRewrites(states, d, 20);
      // 16 devices, then at most MAX_CHANGES_PER_CONTAINER changes; 20 x 16 before.
      assertThat(labels).hasSizeLessThanOrEqualTo(16 + DeviceIdentities.MAX_CHANGES_PER_CONTAINER);
      assertThat(states.build().containers().getFirst().devices())
          .allMatch(s -> s.uuidRejected().equals(DeviceIdentities.CHURN));
    }
  }

  @Test
  void nvmlUp_regionUuidsNotOnTheNode_useNvmlsIdentityAndAreReported() throws IOException {
    NvmlSnapshot nvml =
        new NvmlSnapshot(
            NOW, NvmlStatus.up(Optional.of("580.159.04")), List.of(gpu(0, GPU0), gpu(1, GPU1)));
    try (CacheDiscovery d =
        new CacheDiscovery(
            root, Duration.ofHours(1), InstantSource.fixed(NOW), false, new ParseErrors())) {
      NodeStateProvider states =
          new NodeStateProvider(
              "node-a",
              d::current,
              StaticMetadataSource.disabled(),
              InstantSource.fixed(NOW),
              Duration.ofMinutes(5),
              () -> SlotFates.NOT_JUDGED,
              new DeviceIdentities(() -> nvml));
      Set<String> labels = labelsOverRewrites(states, d, 10);
      assertThat(labels).containsExactlyInAnyOrder(GPU0, GPU1, "");
      var devices = states.build().containers().getFirst().devices();
      assertThat(devices).allMatch(s -> s.uuidRejected().equals(DeviceIdentities.NOT_ON_NODE));
      assertThat(devices.get(1).uuid()).isEqualTo(GPU1);
    }
  }

  @Test
  void view_rules() {
    NvmlSnapshot up =
        new NvmlSnapshot(NOW, NvmlStatus.up(Optional.of("580")), List.of(gpu(0, GPU0)));
    DeviceIdentities.View withNvml = new DeviceIdentities(() -> up).view();
    assertThat(withNvml.of(KEY, 3, GPU0)).isEqualTo(new DeviceIdentities.Identity(GPU0, null));
    assertThat(withNvml.of(KEY, 0, GPU1))
        .isEqualTo(new DeviceIdentities.Identity(GPU0, DeviceIdentities.NOT_ON_NODE));

    DeviceIdentities down = DeviceIdentities.withoutNvml();
    DeviceIdentities.View v = down.view();
    assertThat(v.of(KEY, 0, "GPU-evil-0-0"))
        .isEqualTo(new DeviceIdentities.Identity("", DeviceIdentities.INVALID_SYNTAX));
    assertThat(v.of(KEY, 0, "")).isEqualTo(new DeviceIdentities.Identity("", null));
    assertThat(v.of(KEY, 0, GPU0).confirmed()).isTrue();
    assertThat(v.of(KEY, 0, GPU0).confirmed()).isTrue(); // stable: no change counted
    for (int i = 0; i < DeviceIdentities.MAX_CHANGES_PER_CONTAINER; i++) {
      assertThat(v.of(KEY, 0, uuid(i, 0)).confirmed()).as("change %d", i).isTrue();
    }
    String last = uuid(DeviceIdentities.MAX_CHANGES_PER_CONTAINER - 1, 0);
    assertThat(v.of(KEY, 0, GPU1))
        .isEqualTo(new DeviceIdentities.Identity(last, DeviceIdentities.CHURN));
    // Another container has its own allowance; a container that left is forgotten.
    ContainerKey other = new ContainerKey(UID, "other");
    assertThat(v.of(other, 0, GPU1).confirmed()).isTrue();
    down.retainOnly(Set.of(other));
    assertThat(v.of(KEY, 0, GPU1).confirmed()).isTrue();
  }

  private static GpuSnapshot gpu(int index, String uuid) {
    return new GpuSnapshot(
        new GpuIdentity(index, -1, uuid, "NVIDIA H100"),
        Optional.empty(),
        OptionalDouble.empty(),
        OptionalDouble.empty(),
        Optional.empty(),
        Optional.of(Map.of()));
  }
}

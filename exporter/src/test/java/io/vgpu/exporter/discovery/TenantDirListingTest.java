package io.vgpu.exporter.discovery;

import static io.vgpu.exporter.testing.TestRegions.spec;
import static io.vgpu.exporter.testing.TestRegions.write;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.node.EvidenceCollector;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.hostpid.ProcFs;
import io.vgpu.regioncodec.RegionException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 31 items 2 and 3: one bounded listing of a tenant directory, used by every reader. Before,
 * the cap bound discovery only (the evidence pass behind the status model, doctor, inspect and
 * cleanup opened every {@code *.cache}), side files were listed and sorted whole, and hard links
 * multiplied one region.
 */
class TenantDirListingTest {
  private static final String UID = "0f1e2d3c-4b5a-4978-8796-a5b4c3d2e1f0";
  private static final Instant NOW = Instant.parse("2026-11-27T14:00:00Z");

  @TempDir Path root;
  @TempDir Path proc;

  @Test
  void listing_keepsTheFirstByNameOfEachKindAndCountsTheRest() throws IOException {
    Path dir = Files.createDirectories(root.resolve(UID + "_c"));
    for (int i = 49; i >= 0; i--) {
      Files.createFile(dir.resolve("f%02d.cache".formatted(i)));
      Files.createFile(dir.resolve("f%02d.cache.degraded".formatted(i)));
      Files.createFile(dir.resolve("other%02d".formatted(i)));
    }
    TenantDirListing.Listing l = TenantDirListing.of(dir);
    assertThat(l.cacheFiles())
        .extracting(p -> p.getFileName().toString())
        .containsExactly(
            "f00.cache",
            "f01.cache",
            "f02.cache",
            "f03.cache",
            "f04.cache",
            "f05.cache",
            "f06.cache",
            "f07.cache");
    assertThat(l.sideFiles()).hasSize(8).first().isEqualTo("f00.cache.degraded");
    assertThat(l.sideFiles()).last().isEqualTo("f07.cache.degraded");
    assertThat(l.excessCacheFiles()).isEqualTo(42);
    assertThat(l.excessSideFiles()).isEqualTo(42);
    assertThat(l.complete()).isTrue();
  }

  @Test
  void listing_atTheCapAndOneOver() throws IOException {
    Path dir = Files.createDirectories(root.resolve(UID + "_c"));
    for (int i = 0; i < TenantDirListing.MAX_FILES; i++) {
      Files.createFile(dir.resolve("f%02d.cache".formatted(i)));
    }
    assertThat(TenantDirListing.of(dir).excessCacheFiles()).isZero();
    Files.createFile(dir.resolve("a.cache")); // sorts first: it displaces the last
    TenantDirListing.Listing l = TenantDirListing.of(dir);
    assertThat(l.excessCacheFiles()).isEqualTo(1);
    assertThat(l.cacheFiles()).hasSize(8).first().matches(p -> p.endsWith("a.cache"));
    assertThat(l.cacheFiles()).noneMatch(p -> p.endsWith("f07.cache"));
  }

  @Test
  void evidencePass_readsOnlyTheCappedFiles_likeDiscovery() throws IOException {
    for (int i = 0; i < 20; i++) {
      write(
          root,
          UID,
          "c",
          "f%02d.cache".formatted(i),
          spec(1, 1024, 50, new int[] {10 + i}, 100, 5, false));
    }
    NodeEvidence e = collector().collect(List.of(root));
    assertThat(e.containers()).hasSize(1);
    assertThat(e.containers().getFirst().regions())
        .hasSize(TenantDirListing.MAX_FILES)
        .allMatch(r -> r.latest().isPresent());
    // An operator naming the directory gets the same cap.
    assertThat(
            collector()
                .collect(List.of(root.resolve(UID + "_c")))
                .containers()
                .getFirst()
                .regions())
        .hasSize(TenantDirListing.MAX_FILES);
  }

  @Test
  void hardLinks_aSecondNameOfOneRegionIsReadOnceByDiscoveryAndEvidence() throws IOException {
    Path a = write(root, UID, "c", "a.cache", spec(1, 1024, 50, new int[] {10}, 100, 5, false));
    for (char c = 'b'; c <= 'h'; c++) {
      Files.createLink(a.resolveSibling(c + ".cache"), a);
    }
    ParseErrors errors = new ParseErrors();
    try (CacheDiscovery d =
        new CacheDiscovery(root, Duration.ofHours(1), InstantSource.fixed(NOW), false, errors)) {
      d.rescan();
      DiscoverySnapshot snap = d.rescan();
      List<DiscoveredFile> files = snap.containers().getFirst().files();
      assertThat(files).hasSize(8);
      assertThat(files.stream().filter(f -> f.region().isPresent())).hasSize(1);
      assertThat(
              files.stream()
                  .filter(f -> f.openError().equals(Optional.of(RegionException.Reason.HARD_LINK))))
          .hasSize(7);
      assertThat(d.openMappings()).isEqualTo(1);
      assertThat(errors.count(RegionException.Reason.HARD_LINK)).isEqualTo(7); // once, not per pass
    }
    NodeEvidence e = collector().collect(List.of(root));
    List<NodeEvidence.Region> regions = e.containers().getFirst().regions();
    assertThat(regions.stream().filter(r -> r.latest().isPresent())).hasSize(1);
    assertThat(regions.stream().filter(r -> r.unreadableReason().equals(Optional.of("hard_link"))))
        .hasSize(7);
  }

  private EvidenceCollector collector() {
    return new EvidenceCollector(
        new ProcFs(proc),
        () -> NvmlSnapshot.unavailable(NOW, NodeEvidence.NVML_NOT_QUERIED),
        Optional::empty,
        InstantSource.fixed(NOW),
        Duration.ZERO,
        d -> {},
        NodeEvidence.Thresholds.defaults());
  }
}

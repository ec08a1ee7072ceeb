package io.vgpu.exporter.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.testing.TestRegions;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 31's file attacks against {@code serve} at the launcher's heap ({@code -Xmx48m}, {@code
 * -XX:+ExitOnOutOfMemoryError}), each alone and all at once: every {@code /metrics}, {@code /},
 * {@code /api/v1/containers} answers while they run, the neighbour is still exported, and the
 * process never runs out of memory. The side-file flood alone ended the exporter before (every name
 * listed and sorted by discovery and the evidence pass); so did 20 000 valid regions in one
 * directory (the evidence pass, status model and doctor opened every one) and containers with 8
 * names of one 1024-slot x 16-device region (alone, those two are covered in-process by
 * TenantDirListingTest and RegionFileTest). {@code make stress} runs this class too.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class TenantFileAttacksTest {
  private static final String FLOOD_UID = "bbbbbbbb-0000-4000-8000-000000000031";
  private static final String MANY_UID = "cccccccc-0000-4000-8000-000000000031";
  private static final String BOMB_UID = "dddddddd-0000-4000-8000-000000000031";

  /**
   * One cache root for the class: the side-file flood alone first, then every other attack added to
   * it (creating 200 000 files takes minutes on a loaded machine; they are made once).
   */
  @TempDir static Path tmp;

  private static Path root;

  @BeforeAll
  static void floodedRoot() throws IOException {
    root = Files.createDirectories(tmp.resolve("containers"));
    LiveExporter.writeHealthy(root);
    sideFileFlood(root, 200_000);
  }

  @Test
  @Order(1)
  void sideFileFlood_200000LongNames_serveAnswersWithoutOom() throws Exception {
    scrapeUnderAttack(root);
  }

  /**
   * The stress run: every file attack of the issue at once against one serve (the cache-file flood,
   * hard-linked and copied slot bombs, beside the side-file flood).
   */
  @Test
  @Order(2)
  void allFileAttacksAtOnce_everyAnswerComesAndNoOom() throws Exception {
    cacheFileFlood(root, 20_000);
    slotBombs(root, true);
    slotBombs(root, false);
    scrapeUnderAttack(root);
  }

  /** Empty {@code *.cache.degraded} files with 240-byte names beside one region. */
  static void sideFileFlood(Path root, int files) throws IOException {
    Path dir =
        TestRegions.write(
                root,
                FLOOD_UID,
                "flood",
                "a.cache",
                TestRegions.spec(1, 1024, 0, new int[0], 0, 0, false))
            .getParent();
    String stem = "x".repeat(220);
    for (int i = 0; i < files; i++) {
      Files.createFile(dir.resolve(stem + "%08d".formatted(i) + ".cache.degraded"));
    }
  }

  /** {@code files} valid sparse v1.2 regions (one live slot each) in one container directory. */
  static void cacheFileFlood(Path root, int files) throws IOException {
    Path dir = Files.createDirectories(root.resolve(MANY_UID + "_many"));
    byte[] bytes = RegionWriter.encode(TestRegions.spec(1, 1024, 0, new int[] {7}, 10, 1, false));
    List<int[]> blocks = new ArrayList<>();
    for (int off = 0; off < bytes.length; off += 4096) {
      int len = Math.min(4096, bytes.length - off);
      for (int i = off; i < off + len; i++) {
        if (bytes[i] != 0) {
          blocks.add(new int[] {off, len});
          break;
        }
      }
    }
    for (int n = 0; n < files; n++) {
      Path file = dir.resolve("r%06d.cache".formatted(n));
      try (FileChannel ch =
          FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
        for (int[] b : blocks) {
          ch.write(ByteBuffer.wrap(bytes, b[0], b[1]), b[0]);
        }
      }
      try (RandomAccessFile raf = new RandomAccessFile(file.toFile(), "rw")) {
        raf.setLength(bytes.length);
      }
    }
  }

  /**
   * Two containers of one pod, each with one region claiming every slot live on 16 devices (usage
   * on each), and 7 more names for it: hard links, or (without links) distinct copies.
   */
  static void slotBombs(Path root, boolean hardLinks) throws IOException {
    int[] pids = new int[1024];
    for (int i = 0; i < pids.length; i++) {
      pids[i] = 100 + i;
    }
    RegionSpec bomb = TestRegions.spec(16, 1024, 0, pids, 10, 1, true);
    String kind = hardLinks ? "link" : "copy";
    for (String ctr : new String[] {kind + "1", kind + "2"}) {
      Path first = TestRegions.write(root, BOMB_UID, ctr, "a.cache", bomb);
      for (char c = 'b'; c <= 'h'; c++) {
        Path other = first.resolveSibling(c + ".cache");
        if (hardLinks) {
          Files.createLink(other, first);
        } else {
          Files.copy(first, other);
        }
      }
    }
  }

  /**
   * Starts serve at the launcher's heap over {@code root} and asks every page for ~20 s: each
   * answer must come, the neighbour must be on /metrics, and the process must not have died.
   */
  private static void scrapeUnderAttack(Path root) throws Exception {
    try (LauncherHeapServe serve =
        LauncherHeapServe.start(
            root, tmp, "--discovery.rescan-interval=1s", "--web.status-max-age=2s")) {
      assertThat(serve.awaitListening(Duration.ofSeconds(90)))
          .as("serve listening; output:\n%s", serve.output())
          .isTrue();
      long end = System.nanoTime() + Duration.ofSeconds(20).toNanos();
      int rounds = 0;
      long slowestMetricsMillis = 0;
      boolean neighbourSeen = false;
      while (System.nanoTime() < end) {
        for (String path : new String[] {"/metrics", "/", "/api/v1/containers", "/readyz"}) {
          long t0 = System.nanoTime();
          int status = serve.status(path, Duration.ofSeconds(30));
          if (path.equals("/metrics")) {
            slowestMetricsMillis =
                Math.max(slowestMetricsMillis, (System.nanoTime() - t0) / 1_000_000);
          }
          assertThat(status)
              .as("GET %s in round %d; output:\n%s", path, rounds, serve.output())
              .isIn(200, 503);
          if (path.equals("/metrics")) {
            assertThat(status).as("/metrics").isEqualTo(200);
          }
        }
        neighbourSeen |= serve.body("/metrics").contains(LiveExporter.HEALTHY_UID);
        rounds++;
      }
      System.out.printf(
          "reliability: tenant file attacks (%s): %d rounds of /metrics, /, /api/v1/containers,"
              + " /readyz in 20 s at the launcher heap, slowest /metrics %d ms%n",
          root, rounds, slowestMetricsMillis);
      assertThat(serve.process.isAlive()).as("alive; output:\n%s", serve.output()).isTrue();
      assertThat(serve.output()).doesNotContain("OutOfMemoryError");
      assertThat(neighbourSeen).as("the neighbour exported").isTrue();
    }
  }
}

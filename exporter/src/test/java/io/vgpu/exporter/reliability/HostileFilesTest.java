package io.vgpu.exporter.reliability;

import static io.vgpu.exporter.reliability.LiveExporter.assertHealthyNeighbour;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestRegions;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * A tenant owns its cache directory and can put anything there. Each test plants one hostile entry
 * next to a healthy neighbour in a live exporter and asserts: the exporter keeps serving, the
 * offender is counted under its reason in {@code vgpu_exporter_parse_errors_total}, the neighbour's
 * values are exact, and nothing outside the cache root shows up among the JVM's open files or
 * mappings.
 *
 * <p>This class: the kind of entry (links, FIFOs, sockets, device nodes, directories, sparse files)
 * and what happens to a mapped file (truncated, rewritten); what a tenant writes into regions,
 * names and labels is {@link HostileContentTest}.
 */
class HostileFilesTest extends HostileDirFixture {

  @Test
  void cacheFile_symlinkToHostSecret_notFollowedCountedAsSymlink() throws Exception {
    Path secret = Files.writeString(outside.resolve("shadow"), "root:$6$secret:19000::::::\n");
    Files.createSymbolicLink(evilDir().resolve("a.cache"), secret);
    startAndWatch();
    assertContained("symlink");
  }

  @Test
  void cacheFile_symlinkToHostRegion_notFollowedEvenWhenTheTargetIsAValidRegion() throws Exception {
    Path target = outside.resolve("other-tenant.cache");
    Files.write(target, validRegion());
    Files.createSymbolicLink(evilDir().resolve("a.cache"), target);
    startAndWatch();
    Samples s = assertContained("symlink");
    assertThat(s.find("vgpu_container_memory_limit_bytes", "pod_uid", EVIL_UID)).isEmpty();
  }

  @Test
  void containerDir_symlinkToOutsideDirectory_skipped() throws Exception {
    Path otherRoot = Files.createDirectories(outside.resolve("elsewhere"));
    Files.write(otherRoot.resolve("a.cache"), validRegion());
    Files.createSymbolicLink(root.resolve(EVIL_UID + "_evil"), otherRoot);
    startAndWatch();
    Samples s = assertContained(null);
    assertThat(s.find("vgpu_container_memory_limit_bytes", "pod_uid", EVIL_UID)).isEmpty();
  }

  @Test
  void cacheFile_fifo_neverOpenedCountedAsNotRegular() throws Exception {
    mkfifo(evilDir().resolve("a.cache"));
    // A symlink to a FIFO outside: following it would block the discovery thread forever.
    mkfifo(outside.resolve("trap"));
    Files.createSymbolicLink(evilDir().resolve("b.cache"), outside.resolve("trap"));
    startAndWatch();
    assertContained("not_regular_file");
    long gen = ex.app.discovery().current().generation();
    Await.until(Duration.ofSeconds(10), () -> ex.app.discovery().current().generation() > gen + 2);
  }

  @Test
  void cacheFile_unixSocket_countedAsNotRegular() throws Exception {
    Path sock = evilDir().resolve("a.cache");
    try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
      server.bind(UnixDomainSocketAddress.of(sock));
      startAndWatch();
      assertContained("not_regular_file");
    }
  }

  @Test
  void cacheFile_deviceNode_neverReadCountedAsNotRegular() throws Exception {
    Path node = evilDir().resolve("a.cache");
    // /dev/zero as a char device would read as an endless zero region if it were ever opened.
    Process p =
        new ProcessBuilder("mknod", node.toString(), "c", "1", "5")
            .redirectErrorStream(true)
            .start();
    boolean made = p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0;
    assumeTrue(made, "mknod needs CAP_MKNOD (root, as CI runs): " + readAll(p));
    assertThat(Files.isRegularFile(node) || Files.isSymbolicLink(node)).isFalse();
    startAndWatch();
    assertContained("not_regular_file");
    assertThat(LiveExporter.openedPaths()).doesNotContain(node.toString());
  }

  @Test
  void cacheFile_symlinkToDevZero_notFollowedCountedAsSymlink() throws Exception {
    Path link = evilDir().resolve("a.cache");
    Files.createSymbolicLink(link, Path.of("/dev/zero"));
    startAndWatch();
    assertContained("symlink");
    assertThat(LiveExporter.openedPaths()).doesNotContain("/dev/zero");
  }

  private static String readAll(Process p) throws IOException {
    return new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8)
        .strip();
  }

  @Test
  void cacheFile_directoryNamedLikeACacheFile_countedAsNotRegular() throws Exception {
    Files.createDirectories(evilDir().resolve("x.cache"));
    startAndWatch();
    assertContained("not_regular_file");
  }

  @Test
  void cacheFile_oneTebibyteSparse_refusedUnmappedCountedAsTooLarge() throws Exception {
    Path big = evilDir().resolve("a.cache");
    try (RandomAccessFile f = new RandomAccessFile(big.toFile(), "rw")) {
      f.write(validRegion(), 0, 4096);
      f.setLength(1L << 40);
    }
    startAndWatch();
    assertContained("too_large");
    assertThat(TestRegions.mappingsUnder(evilDir())).isZero();
  }

  @Test
  void cacheFile_truncatedWhileMapped_jvmSurvivesAndReportsTruncation() throws Exception {
    Path file = evilDir().resolve("a.cache");
    Files.write(file, validRegion());
    startAndWatch();
    ex.awaitPass();
    assertThat(ex.scrape().find("vgpu_container_memory_limit_bytes", "pod_uid", EVIL_UID))
        .hasSize(1);
    // Shrink in place (same inode): a naive reader of the mapping takes SIGBUS here.
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
      ch.truncate(100);
    }
    for (int i = 0; i < 20; i++) {
      ex.scrape(); // scrapes race the next discovery pass
    }
    Samples s = assertContained(null);
    assertThat(s.find("vgpu_container_memory_limit_bytes", "pod_uid", EVIL_UID)).isEmpty();
    double errors =
        s.value("vgpu_exporter_parse_errors_total", "reason", "truncated")
            + s.value("vgpu_exporter_parse_errors_total", "reason", "too_small");
    assertThat(errors).isGreaterThanOrEqualTo(1);
  }

  @Test
  void cacheFile_rewrittenEveryMillisecond_scrapesStayConsistentAndNeighbourExact()
      throws Exception {
    Path file = evilDir().resolve("a.cache");
    byte[] good = validRegion();
    Files.write(file, good);
    startAndWatch();
    AtomicBoolean stop = new AtomicBoolean();
    AtomicLong rewrites = new AtomicLong();
    Thread writer =
        Thread.ofPlatform()
            .name("hostile-rewriter")
            .start(
                () -> {
                  Random rnd = new Random(1);
                  byte[] buf = good.clone();
                  while (!stop.get()) {
                    try (FileChannel ch =
                        FileChannel.open(
                            file, StandardOpenOption.WRITE, StandardOpenOption.CREATE)) {
                      int mode = (int) (rewrites.get() % 3);
                      if (mode == 0) {
                        ch.truncate(rnd.nextInt(good.length)); // shrink in place
                      } else if (mode == 1) {
                        rnd.nextBytes(buf);
                        ByteBuffer.wrap(buf, 0, 4).order(ByteOrder.LITTLE_ENDIAN).putInt(19920718);
                        ch.write(ByteBuffer.wrap(buf), 0);
                      } else {
                        ch.write(ByteBuffer.wrap(good), 0);
                      }
                      rewrites.incrementAndGet();
                      Thread.sleep(1);
                    } catch (IOException | InterruptedException e) {
                      return;
                    }
                  }
                });
    try {
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
      int scrapes = 0;
      while (System.nanoTime() < until) {
        assertHealthyNeighbour(ex.scrape());
        scrapes++;
      }
      assertThat(scrapes).isGreaterThan(5);
    } finally {
      stop.set(true);
      writer.join();
    }
    assertThat(rewrites.get()).isGreaterThan(100);
    assertContained(null);
  }
}

package io.vgpu.exporter.discovery;

import static io.vgpu.exporter.testing.TestRegions.spec;
import static io.vgpu.exporter.testing.TestRegions.write;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.TestRegions;
import io.vgpu.regioncodec.RegionException;
import io.vgpu.regioncodec.RegionSnapshot;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.InstantSource;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CacheDiscoveryTest {
  private static final String UID = "0a1b2c3d-0000-4000-8000-000000000001";
  @TempDir Path root;
  private final ParseErrors errors = new ParseErrors();
  private CacheDiscovery discovery;

  private CacheDiscovery discovery(Duration rescan) {
    discovery = new CacheDiscovery(root, rescan, InstantSource.system(), false, errors);
    return discovery;
  }

  @AfterEach
  void close() {
    if (discovery != null) {
      discovery.close();
    }
  }

  private static RegionSnapshot read(DiscoveredFile f) {
    return ((MappedRegion.Read.Ok) f.region().orElseThrow().read()).snapshot();
  }

  @Test
  void rescan_missingCacheRoot_isLoggedOnceAsAnErrorAndOnceWhenItClears() throws IOException {
    ch.qos.logback.classic.Logger logger =
        (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger(CacheDiscovery.class);
    ch.qos.logback.classic.Level before = logger.getLevel();
    var events =
        new ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent>();
    events.start();
    logger.addAppender(events);
    logger.setLevel(ch.qos.logback.classic.Level.INFO);
    Path missing = root.resolve("not-there");
    try (CacheDiscovery d =
        new CacheDiscovery(missing, Duration.ofHours(1), InstantSource.system(), false, errors)) {
      d.rescan();
      d.rescan();
      d.rescan();
      Files.createDirectories(missing);
      d.rescan();
      d.rescan();
    } finally {
      logger.detachAppender(events);
      logger.setLevel(before);
    }
    var errorsLogged =
        events.list.stream()
            .filter(e -> e.getLevel() == ch.qos.logback.classic.Level.ERROR)
            .toList();
    assertThat(errorsLogged).hasSize(1);
    assertThat(errorsLogged.getFirst().getKeyValuePairs().toString())
        .contains(missing.toString())
        .contains("does not exist");
    assertThat(events.list)
        .filteredOn(e -> e.getFormattedMessage().contains("readable again"))
        .hasSize(1);
  }

  @Test
  void rescan_severalCacheFilesInOneDir_mapsEachAndIgnoresOtherFiles() throws IOException {
    write(root, UID, "train", "a.cache", spec(1, 1024, 50, new int[] {10}, 100, 5, false));
    write(root, UID, "train", "b.cache", spec(1, 1024, 50, new int[] {11, 12}, 100, 5, false));
    Files.writeString(root.resolve(UID + "_train/libvgpu.so"), "not a cache");
    DiscoverySnapshot snap = discovery(Duration.ofHours(1)).rescan();
    assertThat(snap.containers())
        .singleElement()
        .satisfies(
            c -> {
              assertThat(c.key()).isEqualTo(new ContainerKey(UID, "train"));
              assertThat(c.files()).hasSize(2).allMatch(f -> f.region().isPresent());
            });
    assertThat(snap.filesMapped()).isEqualTo(2);
    assertThat(discovery.openMappings()).isEqualTo(2);
  }

  @Test
  void rescan_directoryThatStays_keepsItsKeyObject_aNewOneGetsItsOwn() throws IOException {
    write(root, UID, "train", "a.cache", spec(1, 1024, 50, new int[] {10}, 100, 5, false));
    ContainerKey first = discovery(Duration.ofHours(1)).rescan().containers().getFirst().key();
    write(root, UID, "eval", "a.cache", spec(1, 1024, 50, new int[] {11}, 100, 5, false));
    List<ContainerKey> second =
        discovery.rescan().containers().stream().map(DiscoveredContainer::key).toList();

    // Per-scrape lookups keyed by it (label sets, slot fates) end at the identity check.
    assertThat(second).containsExactly(new ContainerKey(UID, "eval"), first);
    assertThat(second.get(1)).isSameAs(first);
  }

  @Test
  void rescan_moreCacheFilesThanTheCap_mapsTheFirstByNameAndCountsTheRestOnce() throws IOException {
    int extra = 4;
    for (int i = 0; i < CacheDiscovery.MAX_FILES_PER_CONTAINER + extra; i++) {
      write(
          root,
          UID,
          "train",
          String.format("f%02d.cache", i),
          spec(1, 1024, 50, new int[] {10 + i}, 100, 5, false));
    }
    CacheDiscovery d = discovery(Duration.ofHours(1));
    d.rescan();
    DiscoverySnapshot snap = d.rescan();
    assertThat(snap.containers().getFirst().files())
        .hasSize(CacheDiscovery.MAX_FILES_PER_CONTAINER)
        .allMatch(f -> f.region().isPresent())
        .extracting(f -> f.path().getFileName().toString())
        .startsWith("f00.cache")
        .doesNotContain("f08.cache");
    assertThat(d.openMappings()).isEqualTo(CacheDiscovery.MAX_FILES_PER_CONTAINER);
    assertThat(errors.tooManyFiles()).isEqualTo(extra);
  }

  @Test
  void rescan_badFileNextToGoodOne_neverFailsTheDirectory() throws IOException {
    write(root, UID, "train", "good.cache", spec(1, 1024, 50, new int[] {10}, 100, 5, false));
    Files.write(root.resolve(UID + "_train/bad.cache"), new byte[64]);
    DiscoverySnapshot snap = discovery(Duration.ofHours(1)).rescan();
    List<DiscoveredFile> files = snap.containers().getFirst().files();
    assertThat(files).hasSize(2);
    assertThat(files).filteredOn(f -> f.region().isPresent()).hasSize(1);
    assertThat(files)
        .filteredOn(f -> f.openError().isPresent())
        .singleElement()
        .satisfies(f -> assertThat(f.path().getFileName().toString()).isEqualTo("bad.cache"));
  }

  @Test
  void rescan_sameBadFileSeenRepeatedly_countsItOnce() throws IOException {
    Files.createDirectories(root.resolve(UID + "_train"));
    Files.write(root.resolve(UID + "_train/bad.cache"), new byte[3_000_000]);
    CacheDiscovery d = discovery(Duration.ofHours(1));
    d.rescan();
    d.rescan();
    d.rescan();
    long total = 0;
    for (RegionException.Reason r : RegionException.Reason.values()) {
      total += errors.count(r);
    }
    assertThat(total).isEqualTo(1);
  }

  @Test
  void rescan_halfInitializedFileLaterCompleted_isMappedWithoutReplacement() throws IOException {
    // libvgpu sizes the file first and writes the magic last: same inode and size throughout.
    Path file =
        write(root, UID, "train", "a.cache", spec(1, 1024, 50, new int[] {10}, 100, 5, false));
    byte[] good = Files.readAllBytes(file);
    byte[] noMagic = good.clone();
    noMagic[0] = noMagic[1] = noMagic[2] = noMagic[3] = 0;
    Files.write(file, noMagic);
    CacheDiscovery d = discovery(Duration.ofHours(1));
    assertThat(d.rescan().filesMapped()).isZero();
    try (var ch =
        java.nio.channels.FileChannel.open(file, java.nio.file.StandardOpenOption.WRITE)) {
      ch.write(java.nio.ByteBuffer.wrap(good, 0, 4), 0);
    }
    assertThat(d.rescan().filesMapped()).isEqualTo(1);
  }

  @Test
  void rescan_fileReplaced_remapsAndUnmapsTheOldOne() throws IOException {
    Path file =
        write(root, UID, "train", "a.cache", spec(1, 1024, 50, new int[] {10}, 100, 5, false));
    CacheDiscovery d = discovery(Duration.ofHours(1));
    DiscoveredFile before = d.rescan().containers().getFirst().files().getFirst();
    assertThat(read(before).processes()).hasSize(1);
    Path tmp = root.resolve("tmp.cache.new");
    io.vgpu.regioncodec.RegionWriter.create(
        tmp, spec(1, 1024, 50, new int[] {10, 11, 12}, 100, 5, false));
    Files.move(
        tmp,
        file,
        java.nio.file.StandardCopyOption.REPLACE_EXISTING,
        java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    DiscoveredFile after = d.rescan().containers().getFirst().files().getFirst();
    assertThat(after.region().orElseThrow()).isNotSameAs(before.region().orElseThrow());
    assertThat(before.region().orElseThrow().retired()).isTrue();
    assertThat(read(after).processes()).hasSize(3);
    assertThat(d.openMappings()).isEqualTo(1);
  }

  @Test
  void rescan_fileDeleted_unmapsIt() throws IOException {
    Path file =
        write(root, UID, "train", "a.cache", spec(1, 1024, 50, new int[] {10}, 100, 5, false));
    CacheDiscovery d = discovery(Duration.ofHours(1));
    d.rescan();
    Files.delete(file);
    assertThat(d.rescan().filesMapped()).isZero();
    assertThat(d.openMappings()).isZero();
  }

  @Test
  void rescan_symlinkedDirAndFile_areNotFollowed() throws IOException {
    Path outside = Files.createTempDirectory("outside");
    try {
      Path target =
          write(
              outside, UID, "secret", "x.cache", spec(1, 1024, 50, new int[] {10}, 100, 5, false));
      Files.createSymbolicLink(root.resolve(UID + "_linkeddir"), target.getParent());
      Files.createDirectories(root.resolve(UID + "_train"));
      Files.createSymbolicLink(root.resolve(UID + "_train/link.cache"), target);
      DiscoverySnapshot snap = discovery(Duration.ofHours(1)).rescan();
      assertThat(snap.containers())
          .extracting(c -> c.key().containerName())
          .containsExactly("train");
      assertThat(snap.containers().getFirst().files())
          .singleElement()
          .satisfies(f -> assertThat(f.openError()).contains(RegionException.Reason.SYMLINK));
      assertThat(snap.filesMapped()).isZero();
    } finally {
      try (var w = Files.walk(outside)) {
        w.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  @Test
  void rescan_fifoNamedCache_isReportedWithoutBlocking() throws Exception {
    Path dir = Files.createDirectories(root.resolve(UID + "_train"));
    Path fifo = dir.resolve("pipe.cache");
    new ProcessBuilder("mkfifo", fifo.toString()).start().waitFor();
    DiscoverySnapshot snap = discovery(Duration.ofHours(1)).rescan();
    assertThat(snap.containers().getFirst().files())
        .singleElement()
        .satisfies(
            f -> assertThat(f.openError()).contains(RegionException.Reason.NOT_REGULAR_FILE));
  }

  @Test
  void rescan_namesWithoutUidUnderscoreShape_areSkipped() throws IOException {
    Files.createDirectories(root.resolve("no-underscore"));
    Files.createDirectories(root.resolve("_leading"));
    Files.createDirectories(root.resolve("trailing_"));
    Files.writeString(root.resolve(UID + "_plainfile"), "x");
    write(root, UID, "my_ctr_name", "a.cache", spec(1, 1024, 50, new int[] {10}, 100, 5, false));
    DiscoverySnapshot snap = discovery(Duration.ofHours(1)).rescan();
    assertThat(snap.containers())
        .extracting(DiscoveredContainer::key)
        .containsExactly(new ContainerKey(UID, "my_ctr_name"));
  }

  @Test
  void rescan_missingRoot_reportsProblemAndRecoversWhenCreated() throws IOException {
    Path missing = root.resolve("not-yet");
    discovery =
        new CacheDiscovery(missing, Duration.ofHours(1), InstantSource.system(), false, errors);
    assertThat(discovery.rescan().rootProblem())
        .hasValueSatisfying(p -> assertThat(p).contains("does not exist"));
    write(missing, UID, "train", "a.cache", spec(1, 1024, 50, new int[] {10}, 100, 5, false));
    assertThat(discovery.rescan().rootReadable()).isTrue();
    assertThat(discovery.current().filesMapped()).isEqualTo(1);
  }

  @Test
  void start_newFile_isPickedUpByWatchWithoutWaitingForRescan() throws IOException {
    CacheDiscovery d = discovery(Duration.ofHours(1));
    d.start();
    Await.until(Duration.ofSeconds(5), () -> d.current().generation() >= 1);
    write(root, UID, "train", "a.cache", spec(1, 1024, 50, new int[] {10}, 100, 5, false));
    Await.until(Duration.ofSeconds(5), () -> d.current().filesMapped() == 1);
  }

  @Test
  void start_eventMissedWhileWatchUnavailable_healsWithinOneRescan() throws IOException {
    // The root does not exist when watching starts, so no watch is registered on it: only the
    // periodic rescan can find the file.
    Path late = root.resolve("late");
    discovery =
        new CacheDiscovery(late, Duration.ofMillis(300), InstantSource.system(), false, errors);
    discovery.start();
    Await.until(Duration.ofSeconds(5), () -> discovery.current().generation() >= 1);
    write(late, UID, "train", "a.cache", spec(1, 1024, 50, new int[] {10}, 100, 5, false));
    Await.until(Duration.ofSeconds(5), () -> discovery.current().filesMapped() == 1);
  }

  @Test
  void read_whileDiscoveryRetiresAndRemaps_neverThrowsAndNeverReadsClosedMemory() throws Exception {
    Path file =
        write(root, UID, "train", "a.cache", spec(2, 1024, 50, new int[] {10, 11}, 100, 5, false));
    CacheDiscovery d = discovery(Duration.ofHours(1));
    d.rescan();
    AtomicBoolean stop = new AtomicBoolean();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    Thread reader =
        Thread.ofPlatform()
            .start(
                () -> {
                  while (!stop.get()) {
                    try {
                      for (DiscoveredContainer c : d.current().containers()) {
                        for (DiscoveredFile f : c.files()) {
                          f.region().ifPresent(MappedRegion::read);
                        }
                      }
                    } catch (Throwable t) {
                      failure.set(t);
                      return;
                    }
                  }
                });
    for (int i = 0; i < 300; i++) {
      Path tmp = root.resolve("next");
      io.vgpu.regioncodec.RegionWriter.create(
          tmp, spec(2, 1024, 50, new int[] {10 + i % 5}, 100, 5, false));
      Files.move(
          tmp,
          file,
          java.nio.file.StandardCopyOption.REPLACE_EXISTING,
          java.nio.file.StandardCopyOption.ATOMIC_MOVE);
      d.rescan();
    }
    stop.set(true);
    reader.join();
    assertThat(failure.get()).isNull();
    assertThat(d.openMappings()).isEqualTo(1);
  }

  /**
   * 10 000 create / replace / delete cycles: afterwards the open mappings equal the live files
   * (checked against /proc/self/maps too), and once the churned files are gone the process holds
   * exactly the file descriptors it held before the churn (/proc/self/fd).
   */
  @Test
  void rescan_tenThousandCreateReplaceDeleteCycles_leaksNoMappingsOrFds() throws IOException {
    byte[] bytes =
        io.vgpu.regioncodec.RegionWriter.encode(spec(1, 1024, 50, new int[] {10}, 100, 5, false));
    CacheDiscovery d = discovery(Duration.ofHours(1));
    write(root, UID, "keep", "k.cache", spec(1, 1024, 50, new int[] {10}, 100, 5, false));
    churn(d, bytes, 300); // warm-up: classes loaded, code paths taken
    removeChurned();
    d.rescan();
    long fdsBase = TestRegions.openFds();
    assertThat(d.openMappings()).isEqualTo(1);

    churn(d, bytes, 10_000);
    long liveFiles;
    try (var w = Files.walk(root)) {
      liveFiles = w.filter(p -> p.toString().endsWith(".cache")).count();
    }
    DiscoverySnapshot snap = d.rescan();
    assertThat(liveFiles).isGreaterThan(1);
    assertThat(snap.filesMapped()).isEqualTo((int) liveFiles);
    assertThat(d.openMappings()).isEqualTo((int) liveFiles);
    assertThat(TestRegions.mappingsUnder(root)).isEqualTo(liveFiles);

    removeChurned();
    d.rescan();
    assertThat(d.openMappings()).isEqualTo(1);
    assertThat(TestRegions.mappingsUnder(root)).isEqualTo(1);
    // Other threads of the test JVM may close descriptors meanwhile; none may be added.
    assertThat(TestRegions.openFds()).isLessThanOrEqualTo(fdsBase);
  }

  private void churn(CacheDiscovery d, byte[] bytes, int cycles) throws IOException {
    for (int i = 0; i < cycles; i++) {
      Path dir = root.resolve(UID + "_c" + (i % 7));
      Files.createDirectories(dir);
      Path f0 = dir.resolve("f0.cache");
      switch (i % 3) {
        case 0 ->
            TestRegions.writeSparse(
                dir.resolve("f" + (i % 2) + ".cache"), bytes); // create / rewrite
        case 1 -> { // replace: new inode under the same name
          Path tmp = dir.resolve("tmp");
          TestRegions.writeSparse(tmp, bytes);
          Files.move(tmp, f0, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        }
        default -> Files.deleteIfExists(f0); // delete
      }
      d.rescan();
    }
  }

  private void removeChurned() throws IOException {
    try (var w = Files.walk(root)) {
      for (Path p : w.sorted(java.util.Comparator.reverseOrder()).toList()) {
        if (!p.equals(root) && !p.toString().contains("_keep")) {
          Files.delete(p);
        }
      }
    }
  }
}

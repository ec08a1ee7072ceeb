package io.vgpu.exporter.reliability;

import static io.vgpu.exporter.reliability.LiveExporter.assertHealthyNeighbour;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.vgpu.exporter.discovery.CacheDiscovery;
import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestRegions;
import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.StandardProtocolFamily;
import java.net.URI;
import java.net.UnixDomainSocketAddress;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A tenant owns its cache directory and can put anything there. Each test plants one hostile entry
 * next to a healthy neighbour in a live exporter and asserts: the exporter keeps serving, the
 * offender is counted under its reason in {@code vgpu_exporter_parse_errors_total}, the neighbour's
 * values are exact, and nothing outside the cache root shows up among the JVM's open files or
 * mappings.
 */
class HostileFilesTest {
  private static final String EVIL_UID = "eeeeeeee-0000-4000-8000-00000000000e";

  @TempDir Path dir;
  private Path root;
  private Path outside;
  private LiveExporter ex;
  private OutsideWatch watch;

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

  private Path evilDir() throws IOException {
    return Files.createDirectories(root.resolve(EVIL_UID + "_evil"));
  }

  /** The exporter on its default serve path (fake NVML, attribution), watched from outside. */
  private void startAndWatch() throws IOException {
    startAndWatch(Map.of());
  }

  private void startAndWatch(Map<String, String> extra) throws IOException {
    Map<String, String> flags = new java.util.HashMap<>(LiveExporter.defaultServePath(dir));
    flags.putAll(extra);
    ex = LiveExporter.start(root, flags);
    watch = new OutsideWatch(outside);
    ex.awaitAttributed();
  }

  /** The common verdict: serving, reason counted, neighbour exact, nothing outside touched. */
  private Samples assertContained(String reason) throws Exception {
    ex.awaitPass();
    Samples s = ex.scrape();
    if (reason != null) {
      assertThat(s.value("vgpu_exporter_parse_errors_total", "reason", reason))
          .as("parse errors with reason %s", reason)
          .isGreaterThanOrEqualTo(1);
    }
    assertHealthyNeighbour(s);
    assertThat(ex.get("/healthz").statusCode()).isEqualTo(200);
    assertThat(ex.get("/readyz").statusCode()).isEqualTo(200);
    watch.assertUntouched();
    return s;
  }

  private static byte[] validRegion() {
    return RegionWriter.encode(TestRegions.spec(1, 1024, 50, new int[] {7}, 100, 5, false));
  }

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

  @Test
  void cacheFile_randomBytesBehindAValidMagic_neverCrashesAndNeighbourExact() throws Exception {
    Random rnd = new Random(42);
    Path evil = evilDir();
    int[] sizes = {12, 4096, validRegion().length, validRegion().length + 1, 1 << 20};
    for (int i = 0; i < 40; i++) {
      byte[] b = new byte[sizes[i % sizes.length]];
      rnd.nextBytes(b);
      ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putInt(0, 19920718);
      if (i % 2 == 0 && b.length >= 12) { // half of them with a plausible v1.2 version too
        ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putInt(4, 1).putInt(8, 2);
      }
      Files.write(evil.resolve("r" + i + ".cache"), b);
    }
    startAndWatch();
    Samples s = assertContained(null);
    // Whatever got mapped must have produced finite, non-negative memory values.
    for (Samples.Sample x : s.find("vgpu_container_memory_used_bytes", "pod_uid", EVIL_UID)) {
      assertThat(x.value()).isFinite().isGreaterThanOrEqualTo(0);
    }
    for (Samples.Sample x : s.find("vgpu_container_sm_limit_ratio", "pod_uid", EVIL_UID)) {
      assertThat(x.value()).isBetween(0.0, 1.0);
    }
  }

  @Test
  void region_procNumAndDeviceNumOutOfRange_clampedNotTrusted() throws Exception {
    Path file = evilDir().resolve("a.cache");
    RegionWriter.create(file, TestRegions.spec(1, 1024, 50, new int[] {7}, 100, 5, false));
    try (RegionFile rf = RegionFile.openReadWrite(file)) {
      rf.writer().setProcNum(Integer.MAX_VALUE);
    }
    Path file2 = evilDir().resolve("b.cache");
    RegionSpec wide =
        RegionSpec.builder(Layout.V1_2)
            .device(TestRegions.uuid(0), 1 << 30, 10)
            .deviceNum(Long.MAX_VALUE)
            .procNum(-5)
            .slot(9, 9, 1, new DeviceUsage(0, 1, 1, 1, 3, 3, 0))
            .build();
    RegionWriter.create(file2, wide);
    startAndWatch();
    Samples s = assertContained(null);
    // At most the 16 devices a region can describe, whatever device_num claims.
    assertThat(
            s.find("vgpu_container_memory_limit_bytes", "pod_uid", EVIL_UID).stream()
                .map(x -> x.labels().get("device_index"))
                .distinct()
                .count())
        .isBetween(1L, 16L);
  }

  @Test
  void slots_claimingTheNeighboursPids_doNotChangeTheNeighbour() throws Exception {
    // The tenant copies the neighbour's pids and host pids into its own slots.
    RegionSpec.Builder b = RegionSpec.builder(Layout.V1_2).device(TestRegions.uuid(0), 1 << 30, 10);
    for (int pid : new int[] {101, 102}) {
      b.slot(
          pid,
          pid + 1000,
          1,
          new DeviceUsage(0, 0, 0, 5 * TestRegions.MIB, 5 * TestRegions.MIB, 0, 99));
    }
    RegionWriter.create(evilDir().resolve("a.cache"), b.build());
    startAndWatch();
    Samples s = assertContained(null);
    // Judged inside the tenant's own pod: the neighbour's live processes never vouch for them, so
    // both slots are GONE and their memory leaves "used".
    assertThat(s.value("vgpu_container_processes", "pod_uid", EVIL_UID, "state", "gone"))
        .isEqualTo(2);
    assertThat(s.value("vgpu_container_processes", "pod_uid", EVIL_UID, "state", "running"))
        .isZero();
    assertThat(
            s.value("vgpu_container_memory_used_bytes", "pod_uid", EVIL_UID, "device_index", "0"))
        .isZero();
  }

  /**
   * 2 000 directories by default ({@code make test}); {@code -Dvgpu.reliability.containers=N}
   * changes it ({@code make stress} runs 10 000).
   *
   * <p>The heap bound is checked in a child JVM running {@code serve} over the same root with a
   * heap of {@link #BASE_HEAP_MIB} plus {@link #HEAP_PER_CONTAINER_KIB} per container and {@code
   * -XX:+ExitOnOutOfMemoryError}: what discovery retains is a handful of small objects per
   * container (about 2 KiB measured), never the mapped bytes (2 MiB a region), or the child dies. A
   * heap measured in this JVM after {@code System.gc()} would count whatever other tests left
   * behind.
   */
  @Test
  void manyContainerDirectories_discoveredWithinABoundedHeapAndAllMapped() throws Exception {
    int n = Integer.getInteger("vgpu.reliability.containers", 2_000);
    byte[] region = validRegion();
    long t0 = System.nanoTime();
    for (int i = 0; i < n; i++) {
      String uid = "%08x-0000-4000-8000-%012d".formatted(i, i);
      Path d = Files.createDirectories(root.resolve(uid + "_c"));
      TestRegions.writeSparse(d.resolve("a.cache"), region);
    }
    long t1 = System.nanoTime();
    long heapMib = BASE_HEAP_MIB + ((n + 1) * HEAP_PER_CONTAINER_KIB + 1023) / 1024;
    Path log = dir.resolve("bounded-child.log");
    int port;
    try (ServerSocket free = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = free.getLocalPort();
    }
    Process bounded =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx" + heapMib + "m",
                "-XX:+UseSerialGC",
                "-XX:+ExitOnOutOfMemoryError",
                "--enable-native-access=ALL-UNNAMED",
                "-cp",
                System.getProperty("java.class.path"),
                "io.vgpu.exporter.Main",
                "serve",
                "--path.cache-root=" + root,
                "--node-name=rel-node",
                "--kubernetes=false",
                "--nvml=false",
                "--attribution.feedback=false",
                "--collectors.disabled=attribution",
                "--discovery.rescan-interval=1h",
                "--discovery.max-containers=" + (n + 1),
                "--web.listen-address=127.0.0.1",
                "--web.listen-port=" + port)
            .redirectErrorStream(true)
            .redirectOutput(log.toFile())
            .start();
    long mapped;
    try {
      // /readyz answers 200 once the first discovery pass has finished.
      URI readyz = URI.create("http://127.0.0.1:" + port + "/readyz");
      try (HttpClient http = HttpClient.newHttpClient()) {
        Await.until(
            Duration.ofMinutes(5),
            () ->
                !bounded.isAlive()
                    || http.send(
                                HttpRequest.newBuilder(readyz).build(),
                                HttpResponse.BodyHandlers.discarding())
                            .statusCode()
                        == 200);
      }
      assertThat(bounded.isAlive())
          .as("serve with -Xmx%dm over %d containers survived discovery: %s", heapMib, n + 1, log)
          .isTrue();
      mapped = regionsMappedBy(bounded.pid());
    } finally {
      bounded.destroy();
      if (!bounded.waitFor(10, TimeUnit.SECONDS)) {
        bounded.destroyForcibly();
      }
    }
    assertThat(mapped).isEqualTo(n + 1);
    assertThat(Files.readString(log)).doesNotContain("OutOfMemoryError");
    long t2 = System.nanoTime();

    startAndWatch(Map.of("discovery.rescan-interval", "1h"));
    Await.until(
        Duration.ofMinutes(5), () -> ex.app.discovery().current().containers().size() == n + 1);
    long t3 = System.nanoTime();
    System.out.printf(
        "reliability: %d containers: written in %d ms, discovered within -Xmx%dm in a child in %d"
            + " ms, in this JVM in %d ms, mappings %d%n",
        n,
        (t1 - t0) / 1_000_000,
        heapMib,
        (t2 - t1) / 1_000_000,
        (t3 - t2) / 1_000_000,
        ex.app.discovery().openMappings());
    assertThat(ex.app.discovery().openMappings()).isEqualTo(n + 1);
    long t4 = System.nanoTime();
    Samples s = ex.scrape();
    System.out.printf(
        "reliability: %d containers: one scrape in %d ms%n",
        n, (System.nanoTime() - t4) / 1_000_000);
    assertHealthyNeighbour(s);
    assertThat(s.named("vgpu_container_memory_limit_bytes")).hasSize(n + 1);
    watch.assertUntouched();
  }

  /**
   * The exporter's fixed heap (measured: 13 MiB live after start-up, 16 MiB serves one container).
   */
  static final long BASE_HEAP_MIB = 32;

  /** Discovery's heap per container: about 2 KiB measured; a copied 2 MiB region blows it. */
  static final long HEAP_PER_CONTAINER_KIB = 8;

  /** Distinct region files under the cache root mapped by process {@code pid}. */
  private long regionsMappedBy(long pid) throws IOException {
    String prefix = root.toAbsolutePath().toString();
    try {
      return Files.readAllLines(Path.of("/proc", Long.toString(pid), "maps")).stream()
          .filter(l -> l.contains(prefix))
          .map(l -> l.substring(l.indexOf('/')))
          .distinct()
          .count();
    } catch (java.nio.file.NoSuchFileException e) {
      return -1; // exited
    }
  }

  @Test
  void directoryNames_separatorsNulsLongAndNonUtf8_neverBreakTheScrape() throws Exception {
    byte[] region = validRegion();
    // Path separators and NUL cannot be in a Linux file name: the nearest a tenant gets is a
    // backslash, a name of dots, control characters, quotes and newlines.
    List<String> names =
        List.of(
            EVIL_UID + "_a\\b",
            EVIL_UID + "_..",
            EVIL_UID + "_\u0001\u0007ctl",
            EVIL_UID + "_quote\"brace}",
            EVIL_UID + "_new\nline",
            EVIL_UID + "_" + "x".repeat(200),
            "x".repeat(255),
            "_nouid",
            "nounderscore");
    for (String n : names) {
      Path d = Files.createDirectories(root.resolve(n));
      Files.write(d.resolve("a.cache"), region);
    }
    // 0xff 0xfe are not UTF-8; made with raw bytes through the shell.
    Process p =
        new ProcessBuilder(
                "bash",
                "-c",
                "d=\"$1\"/$'"
                    + EVIL_UID
                    + "_\\xff\\xfe'; mkdir -p \"$d\" && cp \"$2\" \"$d\"/a.cache",
                "_",
                root.toString(),
                root.resolve(names.get(0)).resolve("a.cache").toString())
            .inheritIO()
            .start();
    assertThat(p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0).isTrue();
    startAndWatch();
    Samples s = assertContained(null); // parses as valid exposition
    assertThat(s.find("vgpu_exporter_build_info")).hasSize(1);
    for (String path : List.of("/api/v1/containers", "/")) {
      assertThat(ex.get(path).statusCode()).isEqualTo(200);
    }
    PromtoolLint.assertValid(ex.get("/metrics").body());
  }

  @Test
  void labels_tenantStringsInOneRegion_boundedBySixteenDevicesPerFile() throws Exception {
    // Long random uuids, lib version, pod uid and container name in the extension: every string a
    // tenant writes freely. The device table caps what becomes a label at 16 entries per file.
    RegionSpec.Builder b = RegionSpec.builder(Layout.V1_2);
    Random rnd = new Random(7);
    for (int d = 0; d < 16; d++) {
      b.device(
          "GPU-" + Long.toHexString(rnd.nextLong()) + "-\"{}=,\n" + "z".repeat(40), 1 << 20, 10);
    }
    b.deviceNum(1_000_000);
    RegionWriter.create(evilDir().resolve("a.cache"), b.build());
    startAndWatch();
    Samples s = assertContained(null);
    List<Samples.Sample> perDevice =
        s.find("vgpu_container_memory_limit_bytes", "pod_uid", EVIL_UID);
    assertThat(perDevice).hasSizeLessThanOrEqualTo(16);
    PromtoolLint.assertValid(ex.get("/metrics").body());
  }

  /**
   * A tenant may create any number of .cache files in its directory and each may name 16 devices
   * with made-up uuids. Only the first {@link CacheDiscovery#MAX_FILES_PER_CONTAINER} files by name
   * are mapped, so the tenant's series stay bounded by that cap x devices; the rest are counted as
   * parse errors with reason too_many_files.
   */
  @Test
  void labels_manyFilesOfMadeUpUuids_seriesBoundedByThePerContainerFileCap() throws Exception {
    Path evil = evilDir();
    int files = 50;
    int devices = 10;
    for (int i = 0; i < files; i++) {
      RegionSpec.Builder b = RegionSpec.builder(Layout.V1_2);
      for (int d = 0; d < devices; d++) {
        b.device("GPU-evil-" + i + "-" + d, 1 << 20, 10);
      }
      RegionWriter.create(evil.resolve("f" + i + ".cache"), b.build());
    }
    startAndWatch();
    Samples s = assertContained(null);
    long evilSeries =
        s.all().stream().filter(x -> EVIL_UID.equals(x.labels().get("pod_uid"))).count();
    long healthySeries =
        s.all().stream()
            .filter(x -> LiveExporter.HEALTHY_UID.equals(x.labels().get("pod_uid")))
            .count();
    System.out.printf(
        "reliability: cardinality: tenant with %d files x %d uuids -> %d series (a normal"
            + " one-device container: %d)%n",
        files, devices, evilSeries, healthySeries);
    assertThat(evilSeries)
        .isLessThanOrEqualTo(
            (long) CacheDiscovery.MAX_FILES_PER_CONTAINER * devices * healthySeries);
    assertThat(s.find("vgpu_exporter_parse_errors_total", "reason", "too_many_files"))
        .singleElement()
        .satisfies(
            x -> assertThat(x.value()).isEqualTo(files - CacheDiscovery.MAX_FILES_PER_CONTAINER));
  }

  static void mkfifo(Path p) throws IOException, InterruptedException {
    Process proc = new ProcessBuilder("mkfifo", p.toString()).inheritIO().start();
    assertThat(proc.waitFor(10, TimeUnit.SECONDS) && proc.exitValue() == 0).isTrue();
  }

  /**
   * Samples the JVM's open files and mappings every millisecond on a background thread and records
   * any path under the outside directory.
   */
  static final class OutsideWatch implements AutoCloseable {
    private final String prefix;
    private final Set<String> seen = ConcurrentHashMap.newKeySet();
    private final AtomicBoolean stop = new AtomicBoolean();
    private final AtomicLong samples = new AtomicLong();
    private final Thread thread;

    OutsideWatch(Path outside) {
      this.prefix = outside.toAbsolutePath().toString();
      this.thread =
          Thread.ofPlatform()
              .daemon()
              .name("outside-watch")
              .start(
                  () -> {
                    while (!stop.get()) {
                      try {
                        for (String p : LiveExporter.openedPaths()) {
                          if (p.startsWith(prefix)) {
                            seen.add(p);
                          }
                        }
                        samples.incrementAndGet();
                        Thread.sleep(1);
                      } catch (IOException | InterruptedException e) {
                        return;
                      }
                    }
                  });
    }

    void assertUntouched() {
      Await.until(Duration.ofSeconds(5), () -> samples.get() > 3);
      assertThat(seen).as("paths outside the cache root opened or mapped").isEmpty();
    }

    @Override
    public void close() {
      stop.set(true);
      try {
        thread.join(5000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}

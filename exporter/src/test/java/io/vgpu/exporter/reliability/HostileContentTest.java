package io.vgpu.exporter.reliability;

import static io.vgpu.exporter.reliability.LiveExporter.assertHealthyNeighbour;
import static org.assertj.core.api.Assertions.assertThat;

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
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * What a tenant writes, next to a healthy neighbour in a live exporter: random bytes behind a valid
 * magic, out-of-range counters, slots claiming the neighbour's pids, thousands of directories,
 * hostile directory names and label strings, many files of made-up uuids. Each asserts the exporter
 * keeps serving, the neighbour's values stay exact and the cost stays bounded (the kinds of entry a
 * tenant plants are {@link HostileFilesTest}).
 */
class HostileContentTest extends HostileDirFixture {

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
}

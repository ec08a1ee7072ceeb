package io.vgpu.exporter.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.TestRegions;
import io.vgpu.hostpid.testing.ProcEntry;
import io.vgpu.hostpid.testing.ProcTree;
import java.io.IOException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a tenant or a crowd of viewers can make the exporter spend: the status views' procfs pass is
 * shared and bounded in concurrency while /healthz and /metrics keep answering; a directory of 60
 * 000 excess files costs one listing per pass, not a quadratic bookkeeping.
 */
class BoundedCostTest {
  @TempDir Path dir;

  /**
   * 20 pod processes with 3.6 MB maps each (a procfs tree under --path.procfs) and 32 clients
   * asking for / at once: the model is computed at most once per --web.status-max-age and shared
   * (every page shows the same model time), a request beyond the handlers' bound gets 503 at once,
   * and /healthz and /metrics answer meanwhile. The procfs itself is read by the background
   * evidence pass, never by a view. Before, each request scanned procfs on its own (read from the
   * real /proc whatever --path.procfs said), without bound.
   */
  @Test
  void statusPage_thirtyTwoViewersOfAHeavyProcfs_oneSharedModelExcessRefusedProbesAnswer()
      throws Exception {
    Path root = Files.createDirectories(dir.resolve("containers"));
    LiveExporter.writeHealthy(root);
    Path proc = Files.createDirectories(dir.resolve("proc"));
    String maps = bigMaps(3_600_000);
    for (int i = 0; i < 20; i++) {
      podProcess(proc, 4000 + i, maps);
    }
    try (LiveExporter ex = LiveExporter.start(root, Map.of("path.procfs", proc.toString()))) {
      ex.awaitPass();
      int clients = 32;
      CountDownLatch go = new CountDownLatch(1);
      ConcurrentLinkedQueue<HttpResponse<String>> pages = new ConcurrentLinkedQueue<>();
      ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
      List<Thread> threads = new ArrayList<>();
      try (HttpClient http = HttpClient.newHttpClient()) {
        for (int c = 0; c < clients; c++) {
          threads.add(
              Thread.ofPlatform()
                  .start(
                      () -> {
                        try {
                          go.await();
                          pages.add(
                              http.send(
                                  HttpRequest.newBuilder(ex.uri("/"))
                                      .timeout(Duration.ofSeconds(60))
                                      .build(),
                                  HttpResponse.BodyHandlers.ofString()));
                        } catch (Exception e) {
                          failures.add(e);
                        }
                      }));
        }
        go.countDown();
        long t0 = System.nanoTime();
        HttpResponse<String> health = ex.get("/healthz");
        long healthMillis = (System.nanoTime() - t0) / 1_000_000;
        HttpResponse<String> metrics = ex.get("/metrics");
        for (Thread t : threads) {
          t.join(Duration.ofSeconds(90));
        }
        System.out.printf(
            "reliability: 32 viewers of / over 20 x 3.6 MB maps: /healthz in %d ms,"
                + " %d pages, %d busy%n",
            healthMillis,
            pages.stream().filter(p -> p.statusCode() == 200).count(),
            pages.stream().filter(p -> p.statusCode() == 503).count());
        assertThat(failures).isEmpty();
        assertThat(health.statusCode()).isEqualTo(200);
        assertThat(healthMillis).as("/healthz while 32 viewers load /").isLessThan(2_000);
        assertThat(metrics.statusCode()).isEqualTo(200);
        LiveExporter.assertHealthyNeighbour(io.vgpu.exporter.testing.Samples.parse(metrics.body()));
        assertThat(pages).hasSize(clients);
        // The views judge the background evidence pass instead of scanning procfs themselves, so
        // they are quick and need not refuse anyone; any they refuse answer 503 at once.
        assertThat(pages)
            .allSatisfy(p -> assertThat(p.statusCode()).isIn(200, 503))
            .anySatisfy(p -> assertThat(p.statusCode()).isEqualTo(200));
        assertThat(
                pages.stream()
                    .filter(p -> p.statusCode() == 200)
                    .map(p -> modelTime(p.body()))
                    .distinct())
            .as("model times shown by the pages (one shared computation)")
            .hasSize(1);
        HttpResponse<String> again = ex.get("/");
        assertThat(again.statusCode()).isEqualTo(200);
        assertThat(modelTime(again.body()))
            .isEqualTo(
                modelTime(
                    pages.stream()
                        .filter(p -> p.statusCode() == 200)
                        .findFirst()
                        .orElseThrow()
                        .body()));
        HttpResponse<String> api = ex.get("/api/v1/containers");
        assertThat(api.statusCode()).isEqualTo(200);
        assertThat(api.body()).contains(LiveExporter.HEALTHY_UID);
      }
    }
  }

  /**
   * 60 000 empty *.cache files in one tenant's directory: each pass lists them once and keeps only
   * the first few names, so another tenant's new pod is discovered within seconds (it took 132 s
   * when the excess bookkeeping was a removeIf over a list of every excess file).
   */
  @Test
  void sixtyThousandExcessFiles_anotherTenantsNewPodAppearsWithinSeconds() throws Exception {
    Path root = Files.createDirectories(dir.resolve("containers"));
    LiveExporter.writeHealthy(root);
    Path evil = Files.createDirectories(root.resolve("eeeeeeee-0000-4000-8000-00000000000e_evil"));
    int files = 60_000;
    for (int i = 0; i < files; i++) {
      Files.createFile(evil.resolve("f" + i + ".cache"));
    }
    try (LiveExporter ex = LiveExporter.start(root, Map.of("discovery.rescan-interval", "1s"))) {
      ex.awaitPass();
      assertThat(ex.parseErrors("too_many_files"))
          .isEqualTo(files - io.vgpu.exporter.discovery.CacheDiscovery.MAX_FILES_PER_CONTAINER);
      String uid = "bbbbbbbb-0000-4000-8000-00000000000b";
      long t0 = System.nanoTime();
      TestRegions.write(
          root, uid, "new", "a.cache", TestRegions.spec(1, 1024, 50, new int[] {7}, 100, 5, false));
      Await.until(
          Duration.ofSeconds(10),
          () ->
              ex.app.discovery().current().containers().stream()
                  .anyMatch(c -> c.key().podUid().equals(uid)));
      long millis = (System.nanoTime() - t0) / 1_000_000;
      System.out.printf(
          "reliability: 60 000 excess files next door: a new pod discovered in %d ms%n", millis);
      // Passes keep counting each excess file once, not once per pass.
      ex.awaitPass();
      assertThat(ex.parseErrors("too_many_files"))
          .isEqualTo(files - io.vgpu.exporter.discovery.CacheDiscovery.MAX_FILES_PER_CONTAINER);
      LiveExporter.assertHealthyNeighbour(ex.scrape());
    }
  }

  /**
   * 10 000 container directories under the launcher's own JVM flags (its heap included): every
   * /metrics answers 200 and the process lives. It used to answer 500 to every scrape
   * (OutOfMemoryError growing one buffer for the ~60 MB page): now at most
   * --discovery.max-containers directories are read (the rest named in /readyz) and a page larger
   * than an eighth of the heap is streamed instead of held.
   */
  @Test
  void tenThousandDirectories_launcherHeap_everyScrapeAnswers() throws Exception {
    Path root = Files.createDirectories(dir.resolve("containers"));
    byte[] region =
        io.vgpu.regioncodec.RegionWriter.encode(
            TestRegions.spec(1, 8192, 50, new int[] {100}, 256, 10, true));
    List<Integer> blocks = new ArrayList<>();
    for (int off = 0; off < region.length; off += 4096) {
      for (int i = off; i < Math.min(off + 4096, region.length); i++) {
        if (region[i] != 0) {
          blocks.add(off);
          break;
        }
      }
    }
    for (int i = 0; i < 10_000; i++) {
      Path d = Files.createDirectories(root.resolve("%08x-0000-4000-8000-%012d_c".formatted(i, i)));
      try (var ch =
          java.nio.channels.FileChannel.open(
              d.resolve("a.cache"),
              java.nio.file.StandardOpenOption.CREATE,
              java.nio.file.StandardOpenOption.WRITE)) {
        for (int off : blocks) {
          ch.write(java.nio.ByteBuffer.wrap(region, off, Math.min(4096, region.length - off)), off);
        }
        ch.truncate(region.length);
        if (ch.size() < region.length) {
          ch.write(java.nio.ByteBuffer.wrap(new byte[1]), region.length - 1L);
        }
      }
    }
    int port;
    try (java.net.ServerSocket s =
        new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(launcherJvmFlags());
    cmd.addAll(
        List.of(
            "-cp",
            System.getProperty("java.class.path"),
            "io.vgpu.exporter.Main",
            "serve",
            "--path.cache-root=" + root,
            "--kubernetes=false",
            "--nvml=false",
            "--node-name=rel-node",
            "--web.listen-address=127.0.0.1",
            "--web.listen-port=" + port,
            "--log.level=warn"));
    Path log = dir.resolve("exporter.log");
    Process p =
        new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    try (HttpClient http = HttpClient.newHttpClient()) {
      java.net.URI base = java.net.URI.create("http://127.0.0.1:" + port);
      Await.until(
          Duration.ofMinutes(2),
          () -> {
            assertThat(p.isAlive()).as("exporter alive; log: %s", Files.readString(log)).isTrue();
            try {
              return http.send(
                          HttpRequest.newBuilder(base.resolve("/readyz")).build(),
                          HttpResponse.BodyHandlers.ofString())
                      .statusCode()
                  == 200;
            } catch (IOException e) {
              return false;
            }
          });
      for (int i = 0; i < 3; i++) {
        HttpResponse<byte[]> r =
            send(
                http,
                p,
                log,
                HttpRequest.newBuilder(base.resolve("/metrics"))
                    .header("Accept-Encoding", i == 1 ? "gzip" : "identity")
                    .timeout(Duration.ofMinutes(2))
                    .build(),
                i);
        assertThat(r.statusCode())
            .as("scrape %d; log: %s", i, Files.readString(log))
            .isEqualTo(200);
        byte[] body = r.body();
        if (i == 1) {
          body =
              new java.util.zip.GZIPInputStream(new java.io.ByteArrayInputStream(body))
                  .readAllBytes();
        }
        String text = new String(body, StandardCharsets.UTF_8);
        assertThat(text).contains("vgpu_container_memory_limit_bytes{").endsWith("\n");
      }
      String ready =
          http.send(
                  HttpRequest.newBuilder(base.resolve("/readyz")).build(),
                  HttpResponse.BodyHandlers.ofString())
              .body();
      System.out.printf("reliability: 10 000 directories, launcher heap: %s", ready);
      assertThat(ready).contains("not read");
      assertThat(p.isAlive()).isTrue();
    } finally {
      p.destroy();
      if (!p.waitFor(10, java.util.concurrent.TimeUnit.SECONDS)) {
        p.destroyForcibly();
      }
    }
  }

  /**
   * One scrape; a connection the exporter drops (the process died) fails with the exporter's log
   * and exit status, which the temp dir would otherwise take with it.
   */
  private static HttpResponse<byte[]> send(
      HttpClient http, Process p, Path log, HttpRequest request, int scrape) throws Exception {
    try {
      return http.send(request, HttpResponse.BodyHandlers.ofByteArray());
    } catch (IOException e) {
      p.waitFor(5, java.util.concurrent.TimeUnit.SECONDS);
      throw new AssertionError(
          "scrape %d: %s; exporter alive: %s%s; log: %s"
              .formatted(
                  scrape,
                  e,
                  p.isAlive(),
                  p.isAlive() ? "" : ", exit status " + p.exitValue(),
                  Files.readString(log)),
          e);
    }
  }

  /** bin/vgpu-exporter's default JVM flags, read from the launcher so the test follows it. */
  private static List<String> launcherJvmFlags() throws IOException {
    Path launcher = null;
    for (Path d = Path.of("").toAbsolutePath(); d != null; d = d.getParent()) {
      if (Files.isRegularFile(d.resolve("bin/vgpu-exporter"))) {
        launcher = d.resolve("bin/vgpu-exporter");
        break;
      }
    }
    assertThat(launcher).as("bin/vgpu-exporter above the working directory").isNotNull();
    String text = Files.readString(launcher);
    Matcher m = Pattern.compile("default_opts=\\(([^)]*)\\)").matcher(text);
    assertThat(m.find()).as("default_opts in the launcher").isTrue();
    List<String> flags = List.of(m.group(1).trim().split("\\s+"));
    assertThat(flags).anyMatch(f -> f.startsWith("-Xmx"));
    return flags;
  }

  private static final Pattern MODEL_TIME =
      Pattern.compile("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?Z");

  private static String modelTime(String html) {
    Matcher m = MODEL_TIME.matcher(html);
    assertThat(m.find()).as("the page shows when its model was read").isTrue();
    return m.group();
  }

  /** Maps lines of a GPU process (libcuda mapped) padded to {@code bytes}. */
  private static String bigMaps(int bytes) {
    StringBuilder b = new StringBuilder(bytes + 200);
    b.append(
        "7f0000000000-7f0000100000 r-xp 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libcuda.so.1\n");
    long addr = 0x7f1000000000L;
    while (b.length() < bytes) {
      b.append(Long.toHexString(addr))
          .append('-')
          .append(Long.toHexString(addr + 4096))
          .append(" r--p 00000000 08:01 99 /opt/app/lib/libpadding-")
          .append(addr & 0xffff)
          .append(".so\n");
      addr += 4096;
    }
    return b.toString();
  }

  private static void podProcess(Path proc, int pid, String maps) {
    ProcTree tree = ProcTree.at(proc);
    ProcEntry.in(tree, pid, 7)
        .comm("p")
        .start(5000)
        .pod(LiveExporter.HEALTHY_UID)
        .withEnviron()
        .write();
    tree.write(pid, "maps", maps);
  }
}

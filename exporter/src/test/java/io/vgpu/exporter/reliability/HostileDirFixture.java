package io.vgpu.exporter.reliability;

import static io.vgpu.exporter.reliability.LiveExporter.assertHealthyNeighbour;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestRegions;
import io.vgpu.regioncodec.RegionWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.io.TempDir;

/**
 * What every hostile-tenant test of {@link HostileFilesTest} (what kind of entry a tenant plants
 * and what it does to a mapped file) and {@link HostileContentTest} (what a tenant writes: region
 * bytes, names, counts, label strings) shares: a cache root with a healthy neighbour, a live
 * exporter on its default serve path, a watch on a directory outside the cache root, and the common
 * verdict (serving, reason counted, neighbour exact, nothing outside touched).
 */
abstract class HostileDirFixture {
  static final String EVIL_UID = "eeeeeeee-0000-4000-8000-00000000000e";

  @TempDir Path dir;
  Path root;
  Path outside;
  LiveExporter ex;
  OutsideWatch watch;

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

  Path evilDir() throws IOException {
    return Files.createDirectories(root.resolve(EVIL_UID + "_evil"));
  }

  /** The exporter on its default serve path (fake NVML, attribution), watched from outside. */
  void startAndWatch() throws IOException {
    startAndWatch(Map.of());
  }

  void startAndWatch(Map<String, String> extra) throws IOException {
    Map<String, String> flags = new java.util.HashMap<>(LiveExporter.defaultServePath(dir));
    flags.putAll(extra);
    ex = LiveExporter.start(root, flags);
    watch = new OutsideWatch(outside);
    ex.awaitAttributed();
  }

  /** The common verdict: serving, reason counted, neighbour exact, nothing outside touched. */
  Samples assertContained(String reason) throws Exception {
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

  static byte[] validRegion() {
    return RegionWriter.encode(TestRegions.spec(1, 1024, 50, new int[] {7}, 100, 5, false));
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

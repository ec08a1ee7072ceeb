package io.vgpu.exporter.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestRegions;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * 100 concurrent scrapers against a node of 200 containers. Every response must be a complete,
 * correct exposition (the neighbour's values exact in a sample of them); p50/p99/max latency and
 * the JVM's RSS are printed. 10 s by default; {@code -Dvgpu.reliability.load-seconds=60} for the
 * issue's 60 s run ({@code make soak} passes it). The numbers come from the same JVM as the
 * clients, so RSS includes them.
 */
class LoadTest {
  @TempDir Path dir;

  private static long rssKib() throws Exception {
    for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
      if (l.startsWith("VmRSS:")) {
        return Long.parseLong(l.replaceAll("\\D", ""));
      }
    }
    return -1;
  }

  @Test
  void hundredConcurrentScrapers_twoHundredContainers_noErrorsAndLatencyReported()
      throws Exception {
    int seconds = Integer.getInteger("vgpu.reliability.load-seconds", 10);
    int scrapers = Integer.getInteger("vgpu.reliability.scrapers", 100);
    Path root = Files.createDirectories(dir.resolve("containers"));
    LiveExporter.writeHealthy(root);
    for (int i = 1; i < 200; i++) {
      TestRegions.write(
          root,
          "%08x-0000-4000-8000-%012d".formatted(i, i),
          "c" + i,
          "a.cache",
          TestRegions.spec(1 + i % 4, 8192, 25, new int[] {i, i + 1}, 64 + i, i % 100, i % 2 == 0));
    }
    try (LiveExporter ex = LiveExporter.start(root, Map.of("discovery.rescan-interval", "1s"))) {
      ex.awaitPass();
      Samples first = ex.scrape();
      LiveExporter.assertHealthyNeighbour(first);
      assertThat(first.named("vgpu_container_memory_limit_bytes")).hasSizeGreaterThan(400);
      long rssBefore = rssKib();
      AtomicLong errors = new AtomicLong();
      AtomicLong bytes = new AtomicLong();
      ConcurrentLinkedQueue<long[]> latencies = new ConcurrentLinkedQueue<>();
      ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
      CountDownLatch done = new CountDownLatch(scrapers);
      HttpRequest req =
          HttpRequest.newBuilder(ex.uri("/metrics")).timeout(Duration.ofSeconds(30)).build();
      for (int t = 0; t < scrapers; t++) {
        int id = t;
        Thread.ofPlatform()
            .name("scraper-" + t)
            .start(
                () -> {
                  List<Long> mine = new ArrayList<>();
                  try (HttpClient http = HttpClient.newHttpClient()) {
                    int n = 0;
                    while (System.nanoTime() < end) {
                      long t0 = System.nanoTime();
                      try {
                        HttpResponse<String> r =
                            http.send(req, HttpResponse.BodyHandlers.ofString());
                        mine.add(System.nanoTime() - t0);
                        bytes.addAndGet(r.body().length());
                        if (r.statusCode() != 200
                            || !r.body().contains("vgpu_exporter_build_info")) {
                          errors.incrementAndGet();
                          failures.add("status " + r.statusCode());
                        } else if (id == 0 && n++ % 10 == 0) {
                          LiveExporter.assertHealthyNeighbour(Samples.parse(r.body()));
                        }
                      } catch (Exception | AssertionError e) {
                        errors.incrementAndGet();
                        failures.add(e.toString());
                      }
                    }
                  } finally {
                    latencies.add(mine.stream().mapToLong(Long::longValue).toArray());
                    done.countDown();
                  }
                });
      }
      assertThat(done.await(seconds + 120L, TimeUnit.SECONDS)).isTrue();
      long rssAfter = rssKib();
      long[] all = latencies.stream().flatMapToLong(Arrays::stream).sorted().toArray();
      assertThat(all).isNotEmpty();
      double p50 = all[all.length / 2] / 1e6;
      double p99 = all[(int) Math.min(all.length - 1, Math.ceil(all.length * 0.99) - 1)] / 1e6;
      double max = all[all.length - 1] / 1e6;
      System.out.printf(
          "reliability: load: %d scrapers x %d s, 200 containers: %d scrapes (%.0f/s), %d errors,"
              + " latency p50 %.1f ms p99 %.1f ms max %.1f ms, %.1f MiB/scrape avg, RSS %d -> %d MiB"
              + " (JVM incl. clients)%n",
          scrapers,
          seconds,
          all.length,
          all.length / (double) seconds,
          errors.get(),
          p50,
          p99,
          max,
          bytes.get() / (double) all.length / (1 << 20),
          rssBefore >> 10,
          rssAfter >> 10);
      assertThat(errors.get()).as("errors: %s", failures.stream().limit(5).toList()).isZero();
      LiveExporter.assertHealthyNeighbour(ex.scrape());
    }
  }
}

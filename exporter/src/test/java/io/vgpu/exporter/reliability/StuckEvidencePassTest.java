package io.vgpu.exporter.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.k8s.PodMetadataSource;
import io.vgpu.exporter.k8s.SourceHealth;
import io.vgpu.exporter.k8s.StaticMetadataSource;
import io.vgpu.exporter.nvml.MutableClock;
import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.TestRegions;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Collection;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 31 item 9, the last line of defence: an evidence pass stuck where no per-file read deadline
 * reaches (here the node's metadata lookup of the pass never returns) is reported by {@code
 * /readyz} (503 with the reason) and by {@code vgpu_exporter_evidence_pass_stalled} = 1, while
 * {@code /metrics} and the status page keep answering (the page renders the latest pass instead of
 * waiting with the stuck one: before, every status request blocked behind it), and all of it clears
 * when the pass returns.
 */
class StuckEvidencePassTest {
  private static final String NEW_UID = "eeeeeeee-0000-4000-8000-000000000031";

  @TempDir Path dir;

  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void passThatNeverReturns_readyzUnreadyWithReason_metricSet_pagesAnswer_clearsAfter()
      throws Exception {
    Path root = Files.createDirectories(dir.resolve("containers"));
    LiveExporter.writeHealthy(root);
    MutableClock clock = new MutableClock(Instant.parse("2026-11-27T12:00:00Z"));
    StallingMetadata metadata = new StallingMetadata();
    try (LiveExporter ex = LiveExporter.start(root, Map.of(), metadata, clock)) {
      assertThat(ex.get("/readyz").statusCode()).isEqualTo(200);
      assertThat(ex.scrape().value("vgpu_exporter_evidence_pass_stalled")).isZero();

      // A new container: the background loop starts a pass over it at once, which never returns.
      metadata.stall = true;
      TestRegions.write(
          root,
          NEW_UID,
          "late",
          "a.cache",
          TestRegions.spec(1, 1024, 0, new int[] {5}, 10, 1, true));
      assertThat(metadata.entered.await(30, TimeUnit.SECONDS)).as("the pass started").isTrue();
      clock.advance(Duration.ofMinutes(2)); // past the loop's stuck threshold (1 min at least)

      HttpResponse<String> ready = ex.get("/readyz");
      assertThat(ready.statusCode()).as(ready.body()).isEqualTo(503);
      assertThat(ready.body()).contains("evidence loop stuck: pass running since");
      assertThat(ex.scrape().value("vgpu_exporter_evidence_pass_stalled")).isEqualTo(1.0);
      LiveExporter.assertHealthyNeighbour(ex.scrape());
      for (String view : new String[] {"/", "/api/v1/containers"}) {
        long t0 = System.nanoTime();
        HttpResponse<String> r = ex.get(view); // 30 s client timeout: an exception if it waits
        assertThat(r.statusCode()).as(view).isEqualTo(200);
        assertThat((System.nanoTime() - t0) / 1_000_000).as(view + " ms").isLessThan(20_000L);
      }

      metadata.stall = false;
      metadata.released.countDown();
      Await.until(Duration.ofSeconds(30), () -> ex.get("/readyz").statusCode() == 200);
      assertThat(ex.scrape().value("vgpu_exporter_evidence_pass_stalled")).isZero();
    } finally {
      metadata.released.countDown();
    }
  }

  /** Static metadata whose node lookup blocks on the evidence pass's thread while armed. */
  private static final class StallingMetadata implements PodMetadataSource {
    private final StaticMetadataSource delegate = StaticMetadataSource.disabled();
    final CountDownLatch entered = new CountDownLatch(1);
    final CountDownLatch released = new CountDownLatch(1);
    volatile boolean stall;

    @Override
    public void start() {
      delegate.start();
    }

    @Override
    public Optional<PodMeta> pod(String podUid) {
      return delegate.pod(podUid);
    }

    @Override
    public Collection<PodMeta> pods() {
      return delegate.pods();
    }

    @Override
    public NodeMeta node() {
      if (stall && Thread.currentThread().getName().equals("evidence-pass")) {
        entered.countDown();
        try {
          released.await();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      return delegate.node();
    }

    @Override
    public SourceHealth health() {
      return delegate.health();
    }

    @Override
    public void close() {
      delegate.close();
    }
  }
}

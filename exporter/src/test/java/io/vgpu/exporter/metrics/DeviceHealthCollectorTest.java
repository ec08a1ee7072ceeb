package io.vgpu.exporter.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.vgpu.exporter.nvml.FakeNvml;
import io.vgpu.exporter.nvml.JnaNvmlClient;
import io.vgpu.exporter.nvml.NvmlSampler;
import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestNode;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Instant;
import java.time.InstantSource;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The {@code health} collector's exposition, from a sampler on the fake libnvidia-ml. */
class DeviceHealthCollectorTest {
  private static final String H100 = "device 0 uuid=GPU-h100 name=H100 total=1000 used=0";
  private static final String T4 = "device 1 uuid=GPU-t4 name=T4 total=1000 used=0";
  private static final String MIG = "mig 0 0 uuid=MIG-h100-0 total=100 used=0";

  @TempDir Path root;
  @TempDir Path nvmlDir;
  private TestNode node;
  private NvmlSampler sampler;
  private FakeNvml fake;

  @BeforeEach
  void setUp() throws IOException {
    node = new TestNode(root);
    fake = FakeNvml.in(nvmlDir);
    sampler =
        new NvmlSampler(
            () -> JnaNvmlClient.load(FakeNvml.library().toString()),
            NvmlSampler.Settings.defaults(),
            InstantSource.fixed(Instant.parse("2026-11-27T21:00:00Z")));
  }

  @AfterEach
  void tearDown() {
    sampler.close();
    node.close();
  }

  private Samples scrape() throws IOException {
    PrometheusRegistry registry = new PrometheusRegistry();
    registry.register(
        new CollectorChain(
            List.of(new CollectorChain.Member("health", new DeviceHealthCollector(sampler))),
            node.states::build,
            new CollectorStats()));
    return Samples.parse(TestNode.text(registry));
  }

  private static String health(String clocks) {
    return "health 0 power=312500 temp=61 clocks="
        + clocks
        + " ecc=7,2,40,3 remap=5,1,1,0 events=1";
  }

  @Test
  void scrape_gpuWithEveryReading_exportsEachSeriesWithGpuLabels() throws IOException {
    fake.write(H100, MIG, health("0x5"));
    sampler.sampleOnce();
    Samples s = scrape();
    String[] g = {
      "device_uuid", "GPU-h100", "device_index", "0", "model", "H100", "node", "node-a"
    };
    assertThat(s.value("vgpu_gpu_power_watts", g)).isEqualTo(312.5);
    assertThat(s.value("vgpu_gpu_temperature_celsius", g)).isEqualTo(61.0);
    assertThat(s.find("vgpu_gpu_clock_event_reasons", g)).hasSize(10);
    assertThat(s.value("vgpu_gpu_clock_event_reasons", with(g, "reason", "gpu_idle"))).isEqualTo(1);
    assertThat(s.value("vgpu_gpu_clock_event_reasons", with(g, "reason", "sw_power_cap")))
        .isEqualTo(1);
    assertThat(s.value("vgpu_gpu_clock_event_reasons", with(g, "reason", "hw_slowdown")))
        .isEqualTo(0);
    assertThat(s.value("vgpu_gpu_clock_event_reasons", with(g, "reason", "other"))).isEqualTo(0);
    assertThat(s.value("vgpu_gpu_ecc_volatile_errors_total", with(g, "error", "corrected")))
        .isEqualTo(7);
    assertThat(s.value("vgpu_gpu_ecc_volatile_errors_total", with(g, "error", "uncorrected")))
        .isEqualTo(2);
    assertThat(s.value("vgpu_gpu_ecc_aggregate_errors_total", with(g, "error", "uncorrected")))
        .isEqualTo(3);
    assertThat(s.value("vgpu_gpu_remapped_rows", with(g, "cause", "correctable"))).isEqualTo(5);
    assertThat(s.value("vgpu_gpu_remapped_rows", with(g, "cause", "uncorrectable"))).isEqualTo(1);
    assertThat(s.value("vgpu_gpu_row_remap_pending", g)).isEqualTo(1);
    assertThat(s.value("vgpu_gpu_row_remap_failure", g)).isEqualTo(0);
    assertThat(s.named("vgpu_gpu_health_unavailable")).isEmpty();
    assertThat(s.named("vgpu_gpu_xid_errors_total")).isEmpty();
    assertThat(s.all())
        .as("a MIG device carries no health series of its own")
        .noneMatch(x -> "MIG-h100-0".equals(x.labels().get("device_uuid")));
  }

  @Test
  void scrape_unknownClockBit_setsOther_andXidCountedByNumber() throws IOException {
    fake.write(H100, health("0x400"));
    sampler.sampleOnce();
    fake.write(H100, health("0x400"), "xid 0 id=1 xid=79");
    sampler.sampleOnce();
    Samples s = scrape();
    assertThat(s.value("vgpu_gpu_clock_event_reasons", "reason", "other")).isEqualTo(1);
    assertThat(s.value("vgpu_gpu_clock_event_reasons", "reason", "gpu_idle")).isEqualTo(0);
    assertThat(s.value("vgpu_gpu_xid_errors_total", "device_uuid", "GPU-h100", "xid", "79"))
        .isEqualTo(1);
  }

  @Test
  void scrape_gpuWithoutReadings_absentWithReason_notZero() throws IOException {
    fake.write(H100, T4, health("0x1"));
    sampler.sampleOnce();
    Samples s = scrape();
    assertThat(s.find("vgpu_gpu_power_watts", "device_uuid", "GPU-t4")).isEmpty();
    assertThat(s.find("vgpu_gpu_ecc_volatile_errors_total", "device_uuid", "GPU-t4")).isEmpty();
    assertThat(s.find("vgpu_gpu_clock_event_reasons", "device_uuid", "GPU-t4")).isEmpty();
    assertThat(s.find("vgpu_gpu_health_unavailable", "device_uuid", "GPU-t4"))
        .extracting(x -> x.labels().get("field") + "=" + x.labels().get("reason") + ":" + x.value())
        .containsExactlyInAnyOrder(
            "power=not_supported:1.0",
            "temperature=not_supported:1.0",
            "clock_event_reasons=not_supported:1.0",
            "ecc_volatile=not_supported:1.0",
            "ecc_aggregate=not_supported:1.0",
            "remapped_rows=not_supported:1.0",
            "xid_events=not_supported:1.0");
    assertThat(s.find("vgpu_gpu_health_unavailable", "device_uuid", "GPU-h100")).isEmpty();
  }

  @Test
  void scrape_nvmlDown_noHealthSeries() throws IOException {
    fake.write(H100, health("0x1"), "fail nvmlInit 9");
    sampler.sampleOnce();
    Samples s = scrape();
    assertThat(s.all()).isEmpty();
  }

  @Test
  void scrape_whileAPollHoldsTheSampler_doesNotWait() throws Exception {
    fake.write(H100, health("0x1"));
    sampler.sampleOnce();
    NvmlSampler locked = sampler;
    java.util.concurrent.CountDownLatch held = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    Thread poll =
        Thread.ofPlatform()
            .start(
                () -> {
                  synchronized (locked) { // what a long NVML poll does
                    held.countDown();
                    try {
                      release.await();
                    } catch (InterruptedException e) {
                      Thread.currentThread().interrupt();
                    }
                  }
                });
    try {
      held.await();
      Samples s =
          org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(
              java.time.Duration.ofSeconds(5), this::scrape);
      assertThat(s.value("vgpu_gpu_power_watts", "device_uuid", "GPU-h100")).isEqualTo(312.5);
    } finally {
      release.countDown();
      poll.join();
    }
  }

  private static String[] with(String[] base, String k, String v) {
    String[] out = java.util.Arrays.copyOf(base, base.length + 2);
    out[base.length] = k;
    out[base.length + 1] = v;
    return out;
  }
}

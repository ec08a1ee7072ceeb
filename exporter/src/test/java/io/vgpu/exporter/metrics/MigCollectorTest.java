package io.vgpu.exporter.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.vgpu.exporter.nvml.FakeNvml;
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

/** The {@code mig} collector's exposition, from a sampler on the fake libnvidia-ml. */
class MigCollectorTest {
  private static final String A100 = "device 0 uuid=GPU-a100 name=A100 total=1000 used=0";
  private static final String MIG_A =
      "mig 0 0 uuid=MIG-a name=A100_MIG_1g.5gb gi=7 ci=0 total=500 used=100";
  private static final String MIG_B =
      "mig 0 1 uuid=MIG-b name=A100_MIG_2g.10gb gi=3 ci=0 total=400 used=0";

  @TempDir Path root;
  @TempDir Path nvmlDir;
  private TestNode node;
  private final NvmlSampler sampler =
      FakeNvml.sampler(
          NvmlSampler.Settings.defaults(),
          InstantSource.fixed(Instant.parse("2026-11-28T03:00:00Z")));
  private FakeNvml fake;

  @AfterEach
  void tearDown() {
    sampler.close();
    if (node != null) {
      node.close();
    }
  }

  @BeforeEach
  void nodeAndFake() throws IOException {
    node = new TestNode(root);
    fake = FakeNvml.in(nvmlDir);
  }

  private Samples scrape(boolean hamiCompat) throws IOException {
    PrometheusRegistry registry = new PrometheusRegistry();
    registry.register(
        new CollectorChain(
            List.of(
                new CollectorChain.Member(
                    "mig", new MigCollector(sampler, HolderSource.NONE, hamiCompat))),
            node.states::build,
            new CollectorStats()));
    return Samples.parse(TestNode.text(registry));
  }

  @Test
  void scrape_migGpuWithoutGpm_infoMemoryProcessesAndUnknownActivity_neverZero()
      throws IOException {
    fake.write(A100, MIG_A, MIG_B, "migprocess 0 0 pid=4100 used=100");
    sampler.sampleOnce();
    Samples s = scrape(true);
    String[] a = {"node", "node-a", "device_uuid", "GPU-a100", "mig_uuid", "MIG-a"};
    assertThat(
            s.value(
                "vgpu_mig_device_info",
                "node",
                "node-a",
                "device_index",
                "0",
                "device_uuid",
                "GPU-a100",
                "mig_uuid",
                "MIG-a",
                "gpu_instance_id",
                "7",
                "compute_instance_id",
                "0",
                "mig_profile",
                "1g.5gb"))
        .isEqualTo(1);
    assertThat(s.value("vgpu_mig_memory_used_bytes", a)).isEqualTo(100);
    assertThat(s.value("vgpu_mig_memory_total_bytes", a)).isEqualTo(500);
    assertThat(s.value("vgpu_mig_processes", a)).isEqualTo(1);
    assertThat(s.value("vgpu_mig_sm_activity_unknown", with(a, "reason", "gpm_unsupported")))
        .isEqualTo(1);
    assertThat(s.named("vgpu_mig_sm_activity_ratio")).as("unknown is never a 0").isEmpty();
    assertThat(s.named("vgpu_mig_device_info")).hasSize(2);
    assertThat(s.named("hami_mig_device_info")).as("no container holds a MIG device").isEmpty();
  }

  @Test
  void scrape_migDeviceDestroyedBetweenPolls_itsSeriesGo() throws IOException {
    fake.write(A100, MIG_A, MIG_B);
    sampler.sampleOnce();
    assertThat(scrape(false).named("vgpu_mig_memory_used_bytes")).hasSize(2);

    fake.write(A100, MIG_A);
    sampler.sampleOnce();
    Samples s = scrape(false);
    assertThat(s.named("vgpu_mig_device_info")).hasSize(1);
    assertThat(s.named("vgpu_mig_memory_used_bytes")).hasSize(1);
    assertThat(s.named("vgpu_mig_sm_activity_unknown")).hasSize(1);
    assertThat(s.find("vgpu_mig_memory_used_bytes", "mig_uuid", "MIG-b")).isEmpty();

    fake.write(A100);
    sampler.sampleOnce();
    assertThat(scrape(false).named("vgpu_mig_device_info")).isEmpty();
  }

  @Test
  void scrape_noMig_noSeries_descriptorsDeclared() throws IOException {
    fake.write(A100);
    sampler.sampleOnce();
    assertThat(scrape(true).named("vgpu_mig_device_info")).isEmpty();
    assertThat(new MigCollector(sampler, HolderSource.NONE, false).descriptors())
        .extracting(d -> d.getPrometheusName())
        .doesNotContain("hami_mig_device");
  }

  private static String[] with(String[] base, String k, String v) {
    String[] out = java.util.Arrays.copyOf(base, base.length + 2);
    out[base.length] = k;
    out[base.length + 1] = v;
    return out;
  }
}

package io.vgpu.exporter.http;

import static io.vgpu.exporter.testing.OperatorFixture.GPU0;
import static io.vgpu.exporter.testing.OperatorFixture.UID_A;
import static io.vgpu.exporter.testing.OperatorFixture.UID_B;
import static io.vgpu.exporter.testing.OperatorFixture.usage;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.vgpu.exporter.discovery.CacheDiscovery;
import io.vgpu.exporter.discovery.ParseErrors;
import io.vgpu.exporter.k8s.StaticMetadataSource;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.exporter.node.NodeStateProvider;
import io.vgpu.exporter.testing.OperatorFixture;
import io.vgpu.hostpid.ProcFs;
import java.nio.file.Path;
import java.time.Duration;
import java.time.InstantSource;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The status page's model: rows worst first, the GPU sharing view, and NVML's SM utilization of
 * each container summed over exactly the processes the judgment calls ALIVE.
 */
class StatusModelTest {
  @TempDir Path tmp;

  @Test
  void model_twoContainersOnOneGpu_worstFirstSharedGpuAndNvmlSmOfAliveProcessesOnly() {
    OperatorFixture fx = new OperatorFixture(tmp);
    // A: two live processes at 20 % and 15 % on GPU0. B: one live at 30 %, one gone.
    Path a =
        fx.region(
            UID_A,
            "train",
            OperatorFixture.v12(4L << 30, 50)
                .slot(7, 1007, 1, usage(1L << 30, 0))
                .slot(8, 1008, 1, usage(1L << 30, 0))
                .build());
    Path b =
        fx.region(
            UID_B,
            "serve",
            OperatorFixture.v12(4L << 30, 50)
                .slot(5, 2005, 1, usage(1L << 30, 0))
                .slot(6, 2006, 1, usage(1L << 30, 0))
                .build());
    fx.process(1007, 7).pod(UID_A).gpu(a).write();
    fx.process(1008, 8).pod(UID_A).gpu(a).write();
    fx.process(2005, 5).pod(UID_B).gpu(b).write();
    // NVML also lists 2006 at 50 %: its slot's process is gone from /proc, so it must not count.
    fx.nvmlUp(
        Map.of(1007, 1L << 30, 1008, 1L << 30, 2005, 1L << 30, 2006, 1L << 30),
        Map.of(1007, 0.20, 1008, 0.15, 2005, 0.30, 2006, 0.50));

    try (CacheDiscovery discovery =
        new CacheDiscovery(
            fx.cacheRoot, Duration.ofHours(1), InstantSource.system(), false, new ParseErrors())) {
      discovery.rescan();
      NodeState state =
          new NodeStateProvider(
                  "node-a",
                  discovery::current,
                  StaticMetadataSource.disabled(),
                  InstantSource.system(),
                  Duration.ofMinutes(5))
              .build();
      StatusModel m =
          new StatusPage(new ProcFs(fx.proc), () -> fx.nvml, InstantSource.system())
              .model(state, true, List.of(), "test", List.of("read-only (writes nothing)"));

      assertThat(m.containers()).hasSize(2);
      StatusModel.Row first = m.containers().get(0);
      StatusModel.Row second = m.containers().get(1);
      assertThat(first.state().key().podUid())
          .as("the container with a GONE slot first")
          .isEqualTo(UID_B);
      assertThat(first.verdict().exitCode()).isGreaterThan(second.verdict().exitCode());
      assertThat(first.judged().processes()).isEqualTo("1 ALIVE, 1 GONE");
      assertThat(first.nvmlSmUtilization(GPU0).getAsDouble()).isCloseTo(0.30, within(1e-9));
      assertThat(second.nvmlSmUtilization(GPU0).getAsDouble()).isCloseTo(0.35, within(1e-9));

      assertThat(m.gpus()).hasSize(1);
      StatusModel.Gpu gpu = m.gpus().getFirst();
      assertThat(gpu.uuid()).isEqualTo(GPU0);
      assertThat(gpu.name()).isEqualTo("NVIDIA H100");
      assertThat(gpu.sharers()).hasSize(2);

      String html = StatusPage.render(m);
      assertThat(html)
          .contains("30% (NVML)")
          .contains("35% (NVML)")
          .contains("Writes: read-only (writes nothing)");
      int containers = html.indexOf("<table id=\"containers\">");
      assertThat(html.indexOf("<table id=\"gpus\">"))
          .as("who shares each GPU first, then the problems, then the containers")
          .isLessThan(html.indexOf("<table id=\"doctor\">"))
          .isLessThan(containers);
      assertThat(html.indexOf(UID_B, containers))
          .as("worst container first")
          .isLessThan(html.indexOf(UID_A, containers));
    }
  }
}

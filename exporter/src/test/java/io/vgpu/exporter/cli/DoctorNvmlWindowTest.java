package io.vgpu.exporter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.nvml.FakeNvml;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The one-shot commands (doctor, inspect) read per-process utilization over a window as the serving
 * exporter does: NVML answers a per-process query with the recent periods only, so the window is
 * read all along, not only at its two ends (which read a container at 20 % as 10 %, and made the
 * doctor call a limiter misfiring where the exporter saw none).
 */
class DoctorNvmlWindowTest {
  private static final long P = 200_000;

  @TempDir Path dir;

  @Test
  void sampleNvml_driverKeepsRecentPeriodsOnly_readsTheWholeWindow() {
    long now = System.currentTimeMillis() * 1000 / P * P;
    List<String> script = new ArrayList<>();
    script.add("option realtime=1");
    script.add("option buffer=" + 3 * P); // the driver answers with the last 3 periods only
    script.add("device 0 uuid=GPU-0 name=H100 total=1000 used=10 util=50 memutil=1 period=" + P);
    script.add("process 0 pid=4242 used=10");
    // busy half of every period from 5 s ago to 20 s ahead, published as their time passes
    for (long ts = now - 5_000_000; ts <= now + 20_000_000; ts += P) {
      script.add("sample 0 pid=4242 sm=50 mem=1 ts=" + ts);
    }
    FakeNvml.in(dir).write(script.toArray(String[]::new));

    NvmlSnapshot nvml =
        NodeOptions.sampleNvml(FakeNvml.library().toString(), Duration.ofSeconds(2));

    assertThat(nvml.status().up()).isTrue();
    java.util.OptionalDouble util = nvml.byUuid("GPU-0").orElseThrow().smUtilizationOf(4242);
    assertThat(util).isPresent();
    assertThat(util.getAsDouble()).isBetween(0.45, 0.55);
  }
}

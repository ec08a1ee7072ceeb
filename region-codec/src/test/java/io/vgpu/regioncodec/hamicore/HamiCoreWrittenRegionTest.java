package io.vgpu.regioncodec.hamicore;

import static io.vgpu.regioncodec.hamicore.MiniJson.arr;
import static io.vgpu.regioncodec.hamicore.MiniJson.num;
import static io.vgpu.regioncodec.hamicore.MiniJson.str;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.regioncodec.DeviceHeader;
import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.ProcessSlot;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSnapshot;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Decodes region files written by HAMi-core's own code ({@code testdata/hami-core}) and compares
 * every field the codec exposes with the manifest, so a wrong offset, width or liveness rule fails
 * here rather than only against files this project wrote itself.
 */
class HamiCoreWrittenRegionTest {
  @TempDir Path dir;

  static Stream<Arguments> fixtures() {
    return HamiCoreFixtures.fixtures().stream().map(f -> Arguments.of(str(f, "file"), f));
  }

  @Test
  void manifest_coversTheRequiredStates() {
    List<Object> all = HamiCoreFixtures.fixtures();
    assertThat(all).hasSizeGreaterThanOrEqualTo(2);
    Object live = all.getFirst();
    assertThat(arr(live, "live_pids")).hasSize(2);
    assertThat(num(live, "device_num")).isEqualTo(2);
    // Two processes with distinct, non-zero usage on both devices.
    for (Object slot : arr(live, "slots")) {
      for (Object dev : arr(slot, "devices")) {
        assertThat(num(dev, "total_bytes")).isPositive();
      }
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("fixtures")
  void hamiWrittenFile_decodesToTheManifest(String name, Object fx) throws Exception {
    Path file = HamiCoreFixtures.extract(fx, dir, "hami.cache");
    assertThat(Files.size(file)).isEqualTo(num(fx, "file_size"));
    try (RegionFile region = RegionFile.openReadOnly(file)) {
      assertThat(region.layout()).isEqualTo(Layout.V1_2);
      assertThat(region.layout().label()).isEqualTo(str(fx, "layout"));
      RegionSnapshot s = region.snapshot();

      assertThat(s.majorVersion()).isEqualTo(num(fx, "major_version"));
      assertThat(s.minorVersion()).isEqualTo(num(fx, "minor_version"));
      assertThat(s.ownerPid()).isEqualTo(num(fx, "owner_pid"));
      assertThat(s.deviceCount()).isEqualTo(num(fx, "device_num"));
      assertThat(s.rawProcNum()).isEqualTo(num(fx, "proc_num"));
      assertThat(s.utilizationSwitch()).isEqualTo(num(fx, "utilization_switch"));
      assertThat(s.recentKernel()).isEqualTo(num(fx, "recent_kernel"));
      assertThat(s.priority()).isEqualTo(num(fx, "priority"));
      assertThat(s.lastKernelTimeEpochSeconds()).isEqualTo(num(fx, "last_kernel_time"));
      assertThat(s.bestEffort()).isFalse();
      assertThat(s.tornRetries()).isZero();
      assertThat(s.extension()).as("HAMi writes no libvgpu extension").isEmpty();

      List<DeviceHeader> expectedDevices = new ArrayList<>();
      for (Object d : arr(fx, "devices")) {
        expectedDevices.add(
            new DeviceHeader(
                (int) num(d, "index"),
                str(d, "uuid"),
                num(d, "memory_limit_bytes"),
                (int) num(d, "sm_limit_percent")));
      }
      assertThat(s.devices()).containsExactlyElementsOf(expectedDevices);

      List<ProcessSlot> expectedLive = new ArrayList<>();
      for (Object slot : arr(fx, "slots")) {
        if (num(slot, "pid") == 0 || num(slot, "status") == 0) {
          continue;
        }
        List<DeviceUsage> usage = new ArrayList<>();
        for (Object d : arr(slot, "devices")) {
          usage.add(
              new DeviceUsage(
                  (int) num(d, "index"),
                  num(d, "context_bytes"),
                  num(d, "module_bytes"),
                  num(d, "data_bytes"),
                  num(d, "total_bytes"),
                  num(d, "monitor_used_bytes"),
                  num(d, "sm_util_percent")));
        }
        expectedLive.add(
            new ProcessSlot(
                (int) num(slot, "slot"),
                (int) num(slot, "pid"),
                (int) num(slot, "hostpid"),
                (int) num(slot, "status"),
                usage,
                java.util.Optional.empty()));
      }
      assertThat(s.processes()).containsExactlyElementsOf(expectedLive);
      assertThat(s.processes())
          .extracting(p -> (Object) (long) p.pid())
          .containsExactlyElementsOf(arr(fx, "live_pids"));
      List<Object> used = arr(fx, "used_bytes_live");
      for (int d = 0; d < s.deviceCount(); d++) {
        assertThat(s.usedBytes(d)).as("device %d", d).isEqualTo(used.get(d));
      }
    }
  }
}

package io.vgpu.exporter.nvml;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.List;
import java.util.OptionalLong;
import java.util.Set;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The JNA binding against the repository's fake libnvidia-ml, through the production loader. */
class JnaNvmlClientTest {
  private static final String TWO_GPUS =
      """
      device 0 uuid=GPU-aaaa name=NVIDIA_H100 total=85899345920 used=1073741824 util=42 memutil=7
      device 1 uuid=GPU-bbbb name=NVIDIA_H100 total=85899345920 used=0 util=0 memutil=0
      process 0 pid=4242 used=536870912
      process 0 pid=4343 used=268435456
      process 0 pid=4444 used=1048576
      """;

  @TempDir Path dir;
  private NvmlClient client;
  private boolean initialised;

  @AfterEach
  void shutdown() {
    if (client != null) {
      if (initialised) {
        client.shutdown();
      }
      client.close();
    }
  }

  private NvmlClient init(Set<String> hidden) {
    client = JnaNvmlClient.load(FakeNvml.library().toString(), hidden).orElse(null);
    assertThat(client).isNotNull();
    assertThat(client.init()).isEqualTo(NvmlReturn.SUCCESS);
    initialised = true;
    return client;
  }

  private NvmlClient init(FakeNvml unused) {
    return init(Set.of());
  }

  private DeviceHandle handle(int i) {
    return client.deviceHandle(i).orElse(null);
  }

  @Test
  void load_missingLibrary_returnsLibraryNotFound() {
    NvmlResult<NvmlClient> r = JnaNvmlClient.load(dir.resolve("libnvidia-ml.so.1").toString());
    assertThat(r).isEqualTo(NvmlResult.err("dlopen", NvmlReturn.LIBRARY_NOT_FOUND));
  }

  @Test
  void devices_configuredFake_reportsIdentityMemoryAndUtilization() {
    FakeNvml fake = FakeNvml.in(dir).write(TWO_GPUS);
    init(fake);
    assertThat(client.deviceCount()).isEqualTo(NvmlResult.ok(2));
    assertThat(client.identity(handle(1)))
        .isEqualTo(NvmlResult.ok(new GpuIdentity(1, -1, "GPU-bbbb", "NVIDIA_H100")));
    assertThat(client.memory(handle(0)))
        .isEqualTo(NvmlResult.ok(new MemoryInfo(85899345920L, 1073741824L)));
    assertThat(client.utilization(handle(0))).isEqualTo(NvmlResult.ok(new Utilization(42, 7)));
    assertThat(client.migDevices(handle(0))).isEqualTo(NvmlResult.ok(List.of()));
    assertThat(client.driverVersion()).isEqualTo(NvmlResult.ok("580.00-fake"));
  }

  @Test
  void migDevices_migEnabled_enumeratesHandlesAndTheirProcesses() {
    FakeNvml fake =
        FakeNvml.in(dir)
            .write(
                TWO_GPUS,
                "mig 1 0 uuid=MIG-aaaa name=1g.10gb total=10737418240 used=1073741824",
                "mig 1 3 uuid=MIG-bbbb total=10737418240 used=0",
                "migprocess 1 0 pid=5151 used=1073741824");
    init(fake);
    List<DeviceHandle> migs = client.migDevices(handle(1)).orElse(List.of());
    assertThat(migs).extracting(DeviceHandle::migIndex).containsExactly(0, 3);
    assertThat(client.identity(migs.getFirst()))
        .isEqualTo(NvmlResult.ok(new GpuIdentity(1, 0, "MIG-aaaa", "1g.10gb")));
    assertThat(client.runningProcesses(migs.getFirst()))
        .isEqualTo(NvmlResult.ok(List.of(new RunningProcess(5151, OptionalLong.of(1073741824)))));
    assertThat(client.processUtilization(migs.getFirst(), 0))
        .isEqualTo(NvmlResult.err("nvmlDeviceGetProcessUtilization", NvmlReturn.NOT_SUPPORTED));
    assertThat(client.migDevices(handle(0))).isEqualTo(NvmlResult.ok(List.of()));
  }

  @Test
  void deviceQuery_beforeInit_returnsUninitialized() {
    FakeNvml.in(dir).write(TWO_GPUS);
    client = FakeNvml.in(dir).client();
    assertThat(client.deviceCount())
        .isEqualTo(NvmlResult.err("nvmlDeviceGetCount_v2", NvmlReturn.UNINITIALIZED));
  }

  @ParameterizedTest
  @ValueSource(ints = {16, 24, 32})
  void runningProcesses_v3WithAnyDriverStride_readsEveryProcess(int stride) {
    FakeNvml fake = FakeNvml.in(dir).write(TWO_GPUS, "option v3_stride=" + stride);
    init(fake);
    assertThat(client.runningProcesses(handle(0)))
        .isEqualTo(
            NvmlResult.ok(
                List.of(
                    new RunningProcess(4242, OptionalLong.of(536870912)),
                    new RunningProcess(4343, OptionalLong.of(268435456)),
                    new RunningProcess(4444, OptionalLong.of(1048576)))));
    assertThat(fake.calls("nvmlDeviceGetComputeRunningProcesses_v3")).isPositive();
    assertThat(fake.calls("nvmlDeviceGetComputeRunningProcesses_v2")).isZero();
  }

  @Test
  void runningProcesses_withoutV3_fallsBackToV2ThenV1() {
    FakeNvml fake = FakeNvml.in(dir).write(TWO_GPUS);
    init(Set.of("nvmlDeviceGetComputeRunningProcesses_v3"));
    assertThat(client.runningProcesses(handle(0)).orElse(List.of()))
        .extracting(RunningProcess::pid)
        .containsExactly(4242, 4343, 4444);
    assertThat(fake.calls("nvmlDeviceGetComputeRunningProcesses_v2")).isPositive();
    client.shutdown();
    client.close();

    init(
        Set.of(
            "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"));
    assertThat(client.runningProcesses(handle(0)).orElse(List.of()))
        .extracting(RunningProcess::pid)
        .containsExactly(4242, 4343, 4444);
    assertThat(fake.calls("nvmlDeviceGetComputeRunningProcesses")).isPositive();
  }

  @Test
  void runningProcesses_idleGpu_returnsEmptyList() {
    init(FakeNvml.in(dir).write(TWO_GPUS));
    assertThat(client.runningProcesses(handle(1))).isEqualTo(NvmlResult.ok(List.of()));
  }

  @Test
  void memory_withoutV2_fallsBackToV1() {
    FakeNvml fake = FakeNvml.in(dir).write(TWO_GPUS);
    init(Set.of("nvmlDeviceGetMemoryInfo_v2"));
    assertThat(client.memory(handle(0)))
        .isEqualTo(NvmlResult.ok(new MemoryInfo(85899345920L, 1073741824L)));
    assertThat(fake.calls("nvmlDeviceGetMemoryInfo")).isEqualTo(1);
  }

  @Test
  void processUtilization_cursor_returnsOnlyNewerSamples() {
    FakeNvml fake =
        FakeNvml.in(dir)
            .write(
                TWO_GPUS,
                "sample 0 pid=900001 sm=80 mem=10 ts=1000",
                "sample 0 pid=900002 sm=20 mem=5 ts=1000",
                "sample 0 pid=900001 sm=90 mem=11 ts=2000",
                "sample 1 pid=900003 sm=50 mem=1 ts=2500");
    init(fake);
    assertThat(client.processUtilization(handle(0), 0).orElse(List.of())).hasSize(3);
    assertThat(client.processUtilization(handle(0), 1000))
        .isEqualTo(NvmlResult.ok(List.of(new ProcessSample(900001, 2000, 90, 11))));
    assertThat(client.processUtilization(handle(0), 2000)).isEqualTo(NvmlResult.ok(List.of()));
  }

  @Test
  void processUtilization_manySamples_followsSizingProtocol() {
    String[] lines =
        IntStream.range(0, 300)
            .mapToObj(
                i -> "sample 0 pid=" + (1000 + i) + " sm=" + (i % 101) + " mem=0 ts=" + (i + 1))
            .toArray(String[]::new);
    FakeNvml fake = FakeNvml.in(dir).write(TWO_GPUS).write(concat(TWO_GPUS, lines));
    init(fake);
    List<ProcessSample> samples = client.processUtilization(handle(0), 0).orElse(List.of());
    assertThat(samples).hasSize(300);
    assertThat(samples.get(299)).isEqualTo(new ProcessSample(1299, 300, 299 % 101, 0));
  }

  @Test
  void utilizationSampleTimes_everyTickOfTheGpu_newerThanTheCursor() {
    FakeNvml fake =
        FakeNvml.in(dir)
            .write(
                "device 0 uuid=GPU-aaaa name=H100 total=10 used=0 util=30 memutil=0 period=200000",
                "device 1 uuid=GPU-bbbb name=H100 total=10 used=0 util=0 memutil=0",
                "sample 0 pid=900001 sm=80 mem=10 ts=10000030");
    init(fake);
    // a tick every 200 ms up to the newest sample, whether or not a process ran in it
    List<Long> all = client.utilizationSampleTimes(handle(0), 0).orElse(List.of());
    assertThat(all).hasSize(50).startsWith(200_000L, 400_000L).endsWith(10_000_000L);
    assertThat(client.utilizationSampleTimes(handle(0), 9_000_000))
        .isEqualTo(
            NvmlResult.ok(List.of(9_200_000L, 9_400_000L, 9_600_000L, 9_800_000L, 10_000_000L)));
    assertThat(client.utilizationSampleTimes(handle(0), 10_000_000))
        .isEqualTo(NvmlResult.ok(List.of()));
    // a GPU (or driver) without device samples
    assertThat(client.utilizationSampleTimes(handle(1), 0))
        .isEqualTo(NvmlResult.err("nvmlDeviceGetSamples", NvmlReturn.NOT_SUPPORTED));
  }

  private static String[] concat(String head, String[] tail) {
    String[] out = new String[tail.length + 1];
    out[0] = head;
    System.arraycopy(tail, 0, out, 1, tail.length);
    return out;
  }

  @Test
  void init_noDriver_returnsDriverNotLoaded() {
    FakeNvml.in(dir).write("fail nvmlInit 9");
    client = FakeNvml.in(dir).client();
    assertThat(client.init()).isEqualTo(NvmlReturn.DRIVER_NOT_LOADED);
  }

  @Test
  void queries_gpuLostMidRun_returnGpuIsLost() {
    FakeNvml fake = FakeNvml.in(dir).write(TWO_GPUS);
    init(fake);
    DeviceHandle h = handle(0);
    assertThat(client.memory(h).isOk()).isTrue();
    fake.write(TWO_GPUS, "fail * 15");
    assertThat(client.memory(h))
        .isEqualTo(NvmlResult.err("nvmlDeviceGetMemoryInfo_v2", NvmlReturn.GPU_IS_LOST));
    assertThat(client.runningProcesses(h))
        .isEqualTo(
            NvmlResult.err("nvmlDeviceGetComputeRunningProcesses_v3", NvmlReturn.GPU_IS_LOST));
    assertThat(client.processUtilization(h, 0))
        .isEqualTo(NvmlResult.err("nvmlDeviceGetProcessUtilization", NvmlReturn.GPU_IS_LOST));
  }

  @Test
  void config_rewritten_isReadAgain() {
    FakeNvml fake = FakeNvml.in(dir).write(TWO_GPUS);
    init(fake);
    assertThat(client.deviceCount()).isEqualTo(NvmlResult.ok(2));
    fake.write("device 0 uuid=GPU-only total=10 used=1 util=3 memutil=0");
    assertThat(client.deviceCount()).isEqualTo(NvmlResult.ok(1));
    assertThat(client.identity(handle(0)).map(GpuIdentity::uuid))
        .isEqualTo(NvmlResult.ok("GPU-only"));
  }

  @Test
  void config_badLines_areIgnoredAndGoodOnesKept() {
    FakeNvml fake =
        FakeNvml.in(dir)
            .write(
                "device 0 uuid=GPU-good total=100 used=10 util=5 memutil=1",
                "device 99 uuid=GPU-out-of-range",
                "device 1 total=ten",
                "process 0 pid=-4",
                "process 0 pid=77 used=5 colour=blue",
                "sample 0 pid=77 sm=500 ts=1",
                "fail nvmlInit",
                "garbage here",
                "process 0 pid=78 used=6");
    init(fake);
    assertThat(client.deviceCount()).isEqualTo(NvmlResult.ok(1));
    assertThat(client.runningProcesses(handle(0)).orElse(List.of()))
        .containsExactly(new RunningProcess(78, OptionalLong.of(6)));
    assertThat(client.processUtilization(handle(0), 0)).isEqualTo(NvmlResult.ok(List.of()));
  }
}

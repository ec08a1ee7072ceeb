package io.vgpu.exporter.nvml;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The MIG and GPM bindings against the fake libnvidia-ml, and the fake's lifetime rules they rely
 * on: empty slots, handles of destroyed instances, samples freed or of two instances.
 */
class JnaNvmlMigTest {
  private static final String H100 = "device 0 uuid=GPU-0 name=H100 total=1000 used=0 gpm=1";
  private static final String MIG_A = "mig 0 0 uuid=MIG-a gi=3 ci=1 sm=50 total=100 used=10";
  private static final String MIG_C = "mig 0 2 uuid=MIG-c gi=5 sm=10 total=100 used=0";

  @TempDir Path dir;
  private NvmlClient client;
  private FakeNvml fake;

  @AfterEach
  void shutdown() {
    if (client != null) {
      client.shutdown();
      client.close();
    }
  }

  private DeviceHandle gpu() {
    client = fake.client();
    assertThat(client.init()).isEqualTo(NvmlReturn.SUCCESS);
    return client.deviceHandle(0).orElse(null);
  }

  @Test
  void migDevices_emptySlotsSkipped_idsPerHandle_physicalGpuHasNone() {
    fake = FakeNvml.in(dir).write(H100, MIG_A, MIG_C);
    DeviceHandle gpu = gpu();
    List<DeviceHandle> migs = client.migDevices(gpu).orElse(List.of());
    assertThat(migs).extracting(DeviceHandle::migIndex).containsExactly(0, 2);
    assertThat(client.migInstanceIds(migs.get(0))).isEqualTo(NvmlResult.ok(new MigIds(3, 1)));
    assertThat(client.migInstanceIds(migs.get(1))).isEqualTo(NvmlResult.ok(new MigIds(5, 0)));
    assertThat(client.migInstanceIds(gpu))
        .as("a physical GPU: INVALID_ARGUMENT, as an H100 answers (mig_gpm_probe.py)")
        .isEqualTo(NvmlResult.err("nvmlDeviceGetGpuInstanceId", NvmlReturn.INVALID_ARGUMENT));
    assertThat(fake.calls("nvmlDeviceGetMigDeviceHandleByIndex")).isEqualTo(7); // max count
  }

  @Test
  void migHandle_instanceDestroyed_invalidArgument_notAGpuLoss() {
    fake = FakeNvml.in(dir).write(H100, MIG_A, MIG_C);
    DeviceHandle gpu = gpu();
    DeviceHandle c = client.migDevices(gpu).orElse(List.of()).get(1);
    fake.write(H100, MIG_A);
    assertThat(client.memory(c))
        .isEqualTo(NvmlResult.err("nvmlDeviceGetMemoryInfo_v2", NvmlReturn.INVALID_ARGUMENT));
    assertThat(client.migDevices(gpu).orElse(List.of()))
        .extracting(DeviceHandle::migIndex)
        .containsExactly(0);
    fake.write(H100);
    assertThat(client.migDevices(gpu)).isEqualTo(NvmlResult.ok(List.of()));
  }

  @Test
  void gpm_twoSamplesOfOneInstance_smUtilFromBusyTime_wrongUseIsAnError() throws Exception {
    fake = FakeNvml.in(dir).write(H100, MIG_A, MIG_C);
    DeviceHandle gpu = gpu();
    assertThat(client.gpmSupported(gpu)).isEqualTo(NvmlResult.ok(true));
    GpmSample s1 = client.gpmSampleAlloc().orElse(null);
    GpmSample s2 = client.gpmSampleAlloc().orElse(null);
    GpmSample other = client.gpmSampleAlloc().orElse(null);
    assertThat(client.gpmMigSampleGet(gpu, 3, s1)).isEqualTo(NvmlReturn.SUCCESS);
    Thread.sleep(50);
    assertThat(client.gpmMigSampleGet(gpu, 3, s2)).isEqualTo(NvmlReturn.SUCCESS);
    assertThat(client.gpmMigSampleGet(gpu, 5, other)).isEqualTo(NvmlReturn.SUCCESS);
    assertThat(client.gpmSmUtilPercent(s1, s2).orElse(-1.0)).isCloseTo(50.0, within(1e-6));

    assertThat(client.gpmSmUtilPercent(s2, s1).orElse(-1.0))
        .as("second sample older: answered, as an H100 answers (mig_gpm_probe.py)")
        .isCloseTo(50.0, within(1e-6));
    assertThat(client.gpmSmUtilPercent(s1, other))
        .as("two instances")
        .isEqualTo(NvmlResult.err("nvmlGpmMetricsGet", NvmlReturn.INVALID_ARGUMENT));
    assertThat(client.gpmMigSampleGet(gpu, 4, other))
        .as("no such GPU instance")
        .isEqualTo(NvmlReturn.NOT_FOUND);

    assertThat(client.gpmSampleFree(s1)).isEqualTo(NvmlReturn.SUCCESS);
    assertThat(client.gpmSmUtilPercent(s1, s2))
        .as("a freed sample")
        .isEqualTo(NvmlResult.err("nvmlGpmMetricsGet", NvmlReturn.INVALID_ARGUMENT));
    assertThat(client.gpmSampleFree(s1)).as("freed twice").isEqualTo(NvmlReturn.INVALID_ARGUMENT);
    assertThat(client.gpmSampleFree(s2)).isEqualTo(NvmlReturn.SUCCESS);
    assertThat(client.gpmSampleFree(other)).isEqualTo(NvmlReturn.SUCCESS);
  }

  @Test
  void gpm_gpuWithoutCounters_unsupported_samplesOutliveNoShutdown() {
    fake = FakeNvml.in(dir).write(H100.replace(" gpm=1", ""), MIG_A);
    DeviceHandle gpu = gpu();
    assertThat(client.gpmSupported(gpu)).isEqualTo(NvmlResult.ok(false));
    GpmSample s = client.gpmSampleAlloc().orElse(null);
    assertThat(client.gpmMigSampleGet(gpu, 3, s)).isEqualTo(NvmlReturn.NOT_SUPPORTED);
    assertThat(client.shutdown()).isEqualTo(NvmlReturn.SUCCESS);
    assertThat(client.init()).isEqualTo(NvmlReturn.SUCCESS);
    assertThat(client.gpmSampleFree(s))
        .as("a sample from before nvmlShutdown")
        .isEqualTo(NvmlReturn.INVALID_ARGUMENT);
  }
}

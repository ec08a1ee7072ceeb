package io.vgpu.exporter.nvml;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.vgpu.exporter.nvml.SmActivity.Reason;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * MIG devices and their GPM SM activity through the sampler on the fake libnvidia-ml: enumeration,
 * instance ids, profiles, memory, processes (each on its MIG device only), the activity the fake
 * models, unknown with a reason where GPM cannot give it, and instances destroyed between polls.
 */
class MigSamplerTest {
  private static final Instant START = Instant.parse("2026-11-28T03:00:00Z");
  private static final long GIB = 1L << 30;
  private static final String H100 =
      "device 0 uuid=GPU-h100 name=NVIDIA_H100_80GB_HBM3 total=" + 80 * GIB + " used=0 gpm=1";
  private static final String A100 =
      "device 0 uuid=GPU-a100 name=NVIDIA_A100 total=" + 40 * GIB + " used=0";
  private static final String MIG_A =
      "mig 0 0 uuid=MIG-a name=NVIDIA_H100_80GB_HBM3_MIG_1g.10gb gi=9 ci=0 sm=40 total="
          + 10 * GIB
          + " used="
          + GIB;
  private static final String MIG_B =
      "mig 0 1 uuid=MIG-b name=NVIDIA_H100_80GB_HBM3_MIG_3g.40gb gi=2 ci=0 sm=75 total="
          + 40 * GIB
          + " used="
          + 3 * GIB;

  @TempDir Path dir;
  private final MutableClock clock = new MutableClock(START);
  private NvmlSampler sampler;

  @AfterEach
  void close() {
    if (sampler != null) {
      sampler.close();
    }
  }

  private NvmlSampler sampler(Set<String> hiddenSymbols) {
    sampler =
        FakeNvml.sampler(
            new NvmlSampler.Settings(
                Duration.ofSeconds(1), Duration.ofSeconds(3), Duration.ofSeconds(8)),
            clock,
            hiddenSymbols.toArray(String[]::new));
    return sampler;
  }

  /** One poll after {@code realGap} of wall time: GPM samples are timed by the driver's clock. */
  private void pollAfter(Duration realGap) throws InterruptedException {
    Thread.sleep(realGap.toMillis());
    clock.advance(Duration.ofSeconds(1));
    sampler.sampleOnce();
  }

  private GpuSnapshot gpu(String uuid) {
    return sampler.latest().byUuid(uuid).orElseThrow();
  }

  private SmActivity activity(String uuid) {
    return gpu(uuid).mig().orElseThrow().smActivity();
  }

  @Test
  void poll_twoMigDevicesOnOneGpu_idsProfilesMemoryAndProcessesOnTheirOwnDevice() {
    FakeNvml.in(dir)
        .write(
            H100,
            MIG_A,
            MIG_B,
            "process 0 pid=700 used=" + GIB, // a process on the parent itself (not a MIG's)
            "migprocess 0 0 pid=701 used=" + GIB,
            "migprocess 0 1 pid=702 used=" + 2 * GIB,
            "migprocess 0 1 pid=703 used=" + GIB);
    sampler(Set.of()).sampleOnce();

    assertThat(sampler.latest().gpus())
        .extracting(g -> g.identity().uuid())
        .containsExactly("GPU-h100", "MIG-a", "MIG-b");
    MigInstance a = gpu("MIG-a").mig().orElseThrow();
    assertThat(a.parentUuid()).isEqualTo("GPU-h100");
    assertThat(a.ids()).contains(new MigIds(9, 0));
    assertThat(a.profile()).isEqualTo("1g.10gb");
    assertThat(gpu("MIG-b").mig().orElseThrow().profile()).isEqualTo("3g.40gb");
    assertThat(gpu("MIG-b").mig().orElseThrow().ids()).contains(new MigIds(2, 0));
    assertThat(gpu("MIG-a").memory()).contains(new MemoryInfo(10 * GIB, GIB));
    assertThat(gpu("MIG-b").memory()).contains(new MemoryInfo(40 * GIB, 3 * GIB));
    assertThat(gpu("MIG-a").processes().orElseThrow())
        .containsExactly(new RunningProcess(701, OptionalLong.of(GIB)));
    assertThat(gpu("MIG-b").processes().orElseThrow())
        .extracting(RunningProcess::pid)
        .containsExactly(702, 703);
    // NVML lists every MIG process on the parent too (its aggregate view): each is counted once,
    // on its MIG device, and the parent keeps only its own.
    assertThat(gpu("GPU-h100").processes().orElseThrow())
        .containsExactly(new RunningProcess(700, OptionalLong.of(GIB)));
    assertThat(gpu("GPU-h100").mig()).isEmpty();
    assertThat(sampler.errorCounts()).isEmpty();
  }

  @Test
  void poll_gpmSupported_smActivityIsTheModelledBusyShareBetweenTwoPolls() throws Exception {
    FakeNvml fake = FakeNvml.in(dir).write(H100, MIG_A, MIG_B);
    sampler(Set.of()).sampleOnce();
    assertThat(activity("MIG-a")).isEqualTo(SmActivity.unknown(Reason.FIRST_SAMPLE));

    pollAfter(Duration.ofMillis(200));
    assertThat(activity("MIG-a").ratio().orElseThrow()).isCloseTo(0.40, within(1e-6));
    assertThat(activity("MIG-b").ratio().orElseThrow()).isCloseTo(0.75, within(1e-6));

    // The instance gets busier: the next interval's share lies between the old and the new rate
    // (the rewrite happens during the interval) and the one after is the new rate.
    fake.write(H100, MIG_A.replace("sm=40", "sm=90"), MIG_B);
    pollAfter(Duration.ofMillis(200));
    pollAfter(Duration.ofMillis(200));
    assertThat(activity("MIG-a").ratio().orElseThrow()).isCloseTo(0.90, within(1e-6));
    assertThat(sampler.errorCounts()).isEmpty();

    sampler.close();
    sampler = null;
    assertThat(fake.calls("nvmlGpmSampleFree"))
        .as("every GPM sample freed (one kept per instance between polls)")
        .isEqualTo(fake.calls("nvmlGpmSampleAlloc"));
  }

  @Test
  void poll_gpuWithoutGpm_activityUnknownWithReason_neverZero() throws Exception {
    FakeNvml.in(dir).write(A100, MIG_A, MIG_B);
    sampler(Set.of()).sampleOnce();
    pollAfter(Duration.ofMillis(50));
    assertThat(activity("MIG-a")).isEqualTo(SmActivity.unknown(Reason.GPM_UNSUPPORTED));
    assertThat(activity("MIG-b").ratio()).isEmpty();
    assertThat(sampler.errorCounts()).as("an A100 without GPM is no error").isEmpty();
  }

  @Test
  void poll_driverWithoutGpmFunctions_unknownDriverWithoutGpm() throws Exception {
    FakeNvml.in(dir).write(H100, MIG_A);
    sampler(Set.of("nvmlGpmQueryDeviceSupport")).sampleOnce();
    pollAfter(Duration.ofMillis(50));
    assertThat(activity("MIG-a")).isEqualTo(SmActivity.unknown(Reason.DRIVER_WITHOUT_GPM));
  }

  @Test
  void poll_gpmCallsFail_unknownGpmErrorCountedByCode_thenRecovers() throws Exception {
    FakeNvml fake = FakeNvml.in(dir).write(H100, MIG_A, "fail nvmlGpmMigSampleGet 999");
    sampler(Set.of()).sampleOnce();
    pollAfter(Duration.ofMillis(50));
    assertThat(activity("MIG-a")).isEqualTo(SmActivity.unknown(Reason.GPM_ERROR));
    assertThat(sampler.errorCounts()).containsKey(NvmlReturn.UNKNOWN);

    fake.write(H100, MIG_A, "fail nvmlGpmQueryDeviceSupport 999");
    pollAfter(Duration.ofMillis(50));
    assertThat(activity("MIG-a")).isEqualTo(SmActivity.unknown(Reason.GPM_ERROR));

    fake.write(H100, MIG_A);
    pollAfter(Duration.ofMillis(50));
    assertThat(activity("MIG-a")).isEqualTo(SmActivity.unknown(Reason.FIRST_SAMPLE));
    pollAfter(Duration.ofMillis(200));
    assertThat(activity("MIG-a").ratio().orElseThrow()).isCloseTo(0.40, within(1e-6));
    sampler.close();
    sampler = null;
    assertThat(fake.calls("nvmlGpmSampleFree")).isEqualTo(fake.calls("nvmlGpmSampleAlloc"));
  }

  @Test
  void poll_instanceIdsUnknown_activityUnknownInstanceUnknown_deviceStillReported() {
    FakeNvml.in(dir).write(H100, MIG_A, "fail nvmlDeviceGetGpuInstanceId 999");
    sampler(Set.of()).sampleOnce();
    MigInstance a = gpu("MIG-a").mig().orElseThrow();
    assertThat(a.ids()).isEmpty();
    assertThat(a.smActivity()).isEqualTo(SmActivity.unknown(Reason.INSTANCE_UNKNOWN));
    assertThat(gpu("MIG-a").memory()).isPresent();
  }

  @Test
  void poll_migDeviceDestroyedBetweenPolls_goneFromTheSnapshot_itsSampleFreed() throws Exception {
    FakeNvml fake =
        FakeNvml.in(dir).write(H100, MIG_A, MIG_B, "migprocess 0 1 pid=702 used=" + GIB);
    sampler(Set.of()).sampleOnce();
    pollAfter(Duration.ofMillis(100));
    long freedBefore = fake.calls("nvmlGpmSampleFree");

    fake.write(H100, MIG_A);
    pollAfter(Duration.ofMillis(100));
    assertThat(sampler.latest().gpus())
        .extracting(g -> g.identity().uuid())
        .containsExactly("GPU-h100", "MIG-a");
    assertThat(sampler.latest().byUuid("MIG-b")).isEmpty();
    // MIG-a's previous sample and MIG-b's (no longer read) were freed.
    assertThat(fake.calls("nvmlGpmSampleFree") - freedBefore).isEqualTo(2);
    assertThat(activity("MIG-a").ratio()).isPresent();

    fake.write(H100); // MIG mode off: no MIG device left
    pollAfter(Duration.ofMillis(50));
    assertThat(sampler.latest().gpus())
        .extracting(g -> g.identity().uuid())
        .containsExactly("GPU-h100");
    assertThat(fake.calls("nvmlGpmSampleFree")).isEqualTo(fake.calls("nvmlGpmSampleAlloc"));
    assertThat(sampler.latest().status().up()).isTrue();
  }

  @Test
  void poll_migNameWithoutAProfile_profileEmpty_noGarbageInLabels() {
    FakeNvml.in(dir)
        .write(
            H100,
            "mig 0 0 uuid=MIG-x name=NVIDIA_MIG_1g.10gb\";evil{} gi=1 total=" + GIB + " used=0",
            "mig 0 1 uuid=MIG-y name=" + "x".repeat(90) + " gi=2 total=" + GIB + " used=0");
    sampler(Set.of()).sampleOnce();
    assertThat(gpu("MIG-x").mig().map(MigInstance::profile)).isEqualTo(Optional.of(""));
    assertThat(gpu("MIG-y").mig().map(MigInstance::profile)).isEqualTo(Optional.of(""));
    assertThat(List.of(gpu("MIG-x").identity().uuid(), gpu("MIG-y").identity().uuid()))
        .containsExactly("MIG-x", "MIG-y");
  }

  /**
   * A poll that was waiting for the sampler's lock while it closed (the executor's in-flight task)
   * must not initialise NVML again: it would hold NVML and GPM samples that nothing frees.
   */
  @Test
  void sampleOnce_afterClose_doesNotInitialiseNvmlAgain_noSampleLeaks() {
    FakeNvml fake = FakeNvml.in(dir).write(H100, MIG_A);
    sampler(Set.of()).sampleOnce();
    sampler.close();
    long inits = fake.calls("nvmlInit_v2");
    sampler.sampleOnce();
    assertThat(fake.calls("nvmlInit_v2")).isEqualTo(inits);
    assertThat(fake.calls("nvmlGpmSampleFree")).isEqualTo(fake.calls("nvmlGpmSampleAlloc"));
  }
}

package io.vgpu.exporter.nvml;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The sampler on the fake libnvidia-ml through JNA, with a hand-moved clock. */
class NvmlSamplerTest {
  private static final Instant START = Instant.parse("2026-11-26T02:00:00Z");
  private static final Duration SECOND = Duration.ofSeconds(1);

  @TempDir Path dir;
  private final MutableClock clock = new MutableClock(START);
  private NvmlSampler sampler;

  @AfterEach
  void close() {
    if (sampler != null) {
      sampler.close();
    }
  }

  private NvmlSampler sampler(FakeNvml unused, Duration maxBackoff) {
    sampler =
        new NvmlSampler(
            () -> JnaNvmlClient.load(FakeNvml.library().toString()),
            new NvmlSampler.Settings(SECOND, Duration.ofSeconds(3), maxBackoff),
            clock);
    return sampler;
  }

  /** A GPU with two processes and 200 ms samples up to the clock's current time. */
  private String[] busyGpu(int pidA, int smA, int pidB, int smB) {
    List<String> lines = new ArrayList<>();
    lines.add("device 0 uuid=GPU-0 name=H100 total=1000000 used=500000 util=70 memutil=9");
    lines.add("process 0 pid=" + pidA + " used=300000");
    lines.add("process 0 pid=" + pidB + " used=100000");
    long now = clock.micros();
    for (long t = now - 4_000_000; t <= now; t += 200_000) {
      lines.add("sample 0 pid=" + pidA + " sm=" + smA + " mem=1 ts=" + t);
      lines.add("sample 0 pid=" + pidB + " sm=" + smB + " mem=1 ts=" + t);
    }
    return lines.toArray(String[]::new);
  }

  @Test
  void sampleOnce_healthyGpu_publishesWindowedPerProcessUtilization() {
    FakeNvml fake = FakeNvml.in(dir).write(busyGpu(101, 60, 102, 10));
    sampler(fake, Duration.ofSeconds(8)).sampleOnce();

    NvmlSnapshot s = sampler.latest();
    assertThat(s.status().up()).isTrue();
    assertThat(s.status().driverVersion()).contains("580.00-fake");
    GpuSnapshot gpu = s.byUuid("GPU-0").orElseThrow();
    assertThat(gpu.memory()).contains(new MemoryInfo(1000000, 500000));
    assertThat(gpu.utilizationRatio().getAsDouble()).isCloseTo(0.70, within(1e-9));
    assertThat(gpu.smUtilizationOf(101).getAsDouble()).isCloseTo(0.60, within(1e-9));
    assertThat(gpu.smUtilizationOf(102).getAsDouble()).isCloseTo(0.10, within(1e-9));
    assertThat(gpu.memoryOf(101)).hasValue(300000);
  }

  @Test
  void sampleOnce_processWithoutSamples_readsZeroNotUnknown() {
    FakeNvml fake =
        FakeNvml.in(dir)
            .write(
                "device 0 uuid=GPU-0 total=10 used=1 util=0 memutil=0", "process 0 pid=55 used=1");
    sampler(fake, SECOND).sampleOnce();
    GpuSnapshot gpu = sampler.latest().gpus().getFirst();
    assertThat(gpu.processUtilizationAvailable()).isTrue();
    assertThat(gpu.smUtilizationOf(55)).hasValue(0.0);
  }

  @Test
  void sampleOnce_cursorAdvances_eachSampleFetchedOnce() {
    FakeNvml fake = FakeNvml.in(dir).write(busyGpu(101, 60, 102, 10));
    sampler(fake, SECOND);
    for (int i = 0; i < 5; i++) {
      sampler.sampleOnce();
      clock.advance(SECOND);
    }
    // samples stay put in the config, so after the first poll the cursor filters all of them out
    assertThat(sampler.errorCounts()).isEmpty();
    assertThat(fake.calls("nvmlInit_v2")).isEqualTo(1);
    assertThat(fake.calls("nvmlDeviceGetProcessUtilization")).isEqualTo(2 + 4);
  }

  /**
   * The fake keeps every sample it was ever given and returns those newer than the cursor, as NVML
   * does. New samples arrive every second; polls and the between-poll collector run in turn. Each
   * sample must reach the sampler exactly once: none fetched twice (the cursor advances), none
   * skipped (it does not run ahead).
   */
  @Test
  void pollsAndCollections_samplesArrivingOverTime_eachFetchedExactlyOnce() {
    FakeNvml fake = FakeNvml.in(dir);
    List<String> config = new ArrayList<>();
    config.add("device 0 uuid=GPU-0 name=H100 total=1000000 used=500000 util=70 memutil=9");
    config.add("process 0 pid=101 used=300000");
    config.add("process 0 pid=102 used=100000");
    List<String> written = new ArrayList<>();
    List<String> fetched = new ArrayList<>();
    sampler =
        new NvmlSampler(
            () ->
                JnaNvmlClient.load(FakeNvml.library().toString())
                    .map(c -> new RecordingClient(c, fetched)),
            new NvmlSampler.Settings(SECOND, Duration.ofSeconds(3), SECOND),
            clock);
    long last = clock.micros() - 2_000_000;
    for (int round = 0; round < 6; round++) {
      for (long t = last + 200_000; t <= clock.micros(); t += 200_000) {
        for (int pid : new int[] {101, 102}) {
          config.add("sample 0 pid=" + pid + " sm=" + (pid == 101 ? 60 : 10) + " mem=1 ts=" + t);
          written.add(pid + "@" + t);
        }
        last = t;
      }
      fake.write(config.toArray(String[]::new));
      if (round % 2 == 0) {
        sampler.sampleOnce();
      } else {
        sampler.collectProcessSamples();
      }
      clock.advance(SECOND);
    }
    sampler.sampleOnce(); // nothing new since the last round: must fetch nothing

    assertThat(sampler.errorCounts()).isEmpty();
    assertThat(written).hasSize(2 * (10 + 5 * 5));
    assertThat(fetched).doesNotHaveDuplicates().containsExactlyInAnyOrderElementsOf(written);
    GpuSnapshot gpu = sampler.latest().byUuid("GPU-0").orElseThrow();
    assertThat(gpu.smUtilizationOf(101).getAsDouble()).isCloseTo(0.60, within(1e-9));
  }

  /** Passes every call through and records each per-process sample NVML returned. */
  private record RecordingClient(NvmlClient delegate, List<String> fetched) implements NvmlClient {
    @Override
    public NvmlResult<List<ProcessSample>> processUtilization(DeviceHandle d, long lastSeen) {
      NvmlResult<List<ProcessSample>> r = delegate.processUtilization(d, lastSeen);
      if (r instanceof NvmlResult.Ok<List<ProcessSample>> ok) {
        ok.value().forEach(x -> fetched.add(x.pid() + "@" + x.timestampMicros()));
      }
      return r;
    }

    @Override
    public NvmlReturn init() {
      return delegate.init();
    }

    @Override
    public NvmlReturn shutdown() {
      return delegate.shutdown();
    }

    @Override
    public NvmlResult<String> driverVersion() {
      return delegate.driverVersion();
    }

    @Override
    public NvmlResult<Integer> deviceCount() {
      return delegate.deviceCount();
    }

    @Override
    public NvmlResult<DeviceHandle> deviceHandle(int index) {
      return delegate.deviceHandle(index);
    }

    @Override
    public NvmlResult<List<DeviceHandle>> migDevices(DeviceHandle parent) {
      return delegate.migDevices(parent);
    }

    @Override
    public NvmlResult<GpuIdentity> identity(DeviceHandle d) {
      return delegate.identity(d);
    }

    @Override
    public NvmlResult<MemoryInfo> memory(DeviceHandle d) {
      return delegate.memory(d);
    }

    @Override
    public NvmlResult<Utilization> utilization(DeviceHandle d) {
      return delegate.utilization(d);
    }

    @Override
    public NvmlResult<List<RunningProcess>> runningProcesses(DeviceHandle d) {
      return delegate.runningProcesses(d);
    }

    @Override
    public void close() {
      delegate.close();
    }
  }

  @Test
  void sampleOnce_noDriver_degradesWithReasonAndCountsReturnCode() {
    FakeNvml fake = FakeNvml.in(dir).write("fail nvmlInit 9");
    sampler(fake, Duration.ofSeconds(8)).sampleOnce();
    NvmlSnapshot s = sampler.latest();
    assertThat(s.status().up()).isFalse();
    assertThat(s.status().reason()).contains("driver_not_loaded (9)");
    assertThat(s.gpus()).isEmpty();
    assertThat(sampler.errorCounts()).isEqualTo(Map.of(NvmlReturn.DRIVER_NOT_LOADED, 1L));
  }

  @Test
  void sampleOnce_afterFailures_backsOffExponentiallyUpToTheCap() {
    FakeNvml fake = FakeNvml.in(dir).write("fail nvmlInit 9");
    sampler(fake, Duration.ofSeconds(4));
    List<Duration> waits = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      sampler.sampleOnce();
      Duration wait = Duration.between(clock.instant(), sampler.nextAttempt());
      waits.add(wait);
      sampler.sampleOnce(); // before the back-off: no attempt
      clock.advance(wait);
    }
    assertThat(waits)
        .containsExactly(
            SECOND,
            Duration.ofSeconds(2),
            Duration.ofSeconds(4),
            Duration.ofSeconds(4),
            Duration.ofSeconds(4));
    assertThat(fake.calls("nvmlInit_v2")).isEqualTo(5);
    assertThat(sampler.initAttempts()).isEqualTo(5);
  }

  @Test
  void sampleOnce_driverComesBack_recoversByItself() {
    FakeNvml fake = FakeNvml.in(dir).write("fail nvmlInit 9");
    sampler(fake, SECOND).sampleOnce();
    assertThat(sampler.latest().status().up()).isFalse();

    fake.write(busyGpu(101, 60, 102, 10));
    clock.advance(SECOND);
    sampler.sampleOnce();
    assertThat(sampler.latest().status().up()).isTrue();
    assertThat(sampler.latest().gpus()).hasSize(1);
  }

  @ParameterizedTest
  @ValueSource(ints = {15, 999})
  void sampleOnce_gpuLostMidRun_goesDownThenRecovers(int code) {
    FakeNvml fake = FakeNvml.in(dir).write(busyGpu(101, 60, 102, 10));
    sampler(fake, SECOND).sampleOnce();
    assertThat(sampler.latest().status().up()).isTrue();

    String[] lost = busyGpu(101, 60, 102, 10);
    String[] withFail = java.util.Arrays.copyOf(lost, lost.length + 1);
    withFail[lost.length] = "fail * " + code;
    fake.write(withFail);
    clock.advance(SECOND);
    sampler.sampleOnce();
    NvmlSnapshot down = sampler.latest();
    assertThat(down.status().up()).isFalse();
    assertThat(down.status().lastError()).contains(new NvmlReturn(code));
    assertThat(down.gpus()).isEmpty();
    assertThat(sampler.errorCounts()).containsKey(new NvmlReturn(code));
    assertThat(fake.calls("nvmlShutdown")).isEqualTo(1);

    fake.write(busyGpu(101, 60, 102, 10));
    clock.advance(SECOND);
    sampler.sampleOnce();
    assertThat(sampler.latest().status().up()).isTrue();
    assertThat(fake.calls("nvmlInit_v2")).isEqualTo(2);
  }

  @Test
  void sampleOnce_oneGpuLost_keepsTheOthers() {
    FakeNvml fake =
        FakeNvml.in(dir)
            .write(
                "device 0 uuid=GPU-0 total=10 used=1 util=5 memutil=0",
                "device 1 uuid=GPU-1 total=10 used=1 util=5 memutil=0");
    sampler(fake, SECOND).sampleOnce();
    assertThat(sampler.latest().gpus()).hasSize(2);
    // only index 1 configured: the fake reports index 0 as lost (GPU_IS_LOST)
    fake.write("device 1 uuid=GPU-1 total=10 used=1 util=5 memutil=0");
    clock.advance(SECOND);
    sampler.sampleOnce();
    assertThat(sampler.latest().status().up()).isTrue();
    assertThat(sampler.latest().gpus())
        .extracting(g -> g.identity().uuid())
        .containsExactly("GPU-1");
    assertThat(sampler.errorCounts()).containsEntry(NvmlReturn.GPU_IS_LOST, 1L);
  }

  @Test
  void sampleOnce_libraryMissing_reportsLibraryNotFound() {
    sampler =
        new NvmlSampler(
            () -> JnaNvmlClient.load(dir.resolve("nope.so").toString()),
            new NvmlSampler.Settings(SECOND, SECOND, SECOND),
            clock);
    sampler.sampleOnce();
    assertThat(sampler.latest().status().reason()).contains("library_not_found (12)");
  }

  @Test
  void latest_whilePollIsStuckInsideNvml_returnsAtOnce() throws Exception {
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    NvmlClient stuck = new StuckClient(entered, release);
    sampler =
        new NvmlSampler(
            () -> NvmlResult.ok(stuck), new NvmlSampler.Settings(SECOND, SECOND, SECOND), clock);
    sampler.start();
    assertThat(entered.await(10, TimeUnit.SECONDS)).isTrue();
    NvmlSnapshot s = assertTimeoutPreemptively(Duration.ofSeconds(5), sampler::latest);
    assertThat(s.status().reason()).contains("not polled yet");
    release.countDown();
  }

  @Test
  void start_backgroundThread_publishesSnapshots() throws Exception {
    FakeNvml fake = FakeNvml.in(dir).write(busyGpu(101, 60, 102, 10));
    sampler =
        new NvmlSampler(
            () -> JnaNvmlClient.load(FakeNvml.library().toString()),
            new NvmlSampler.Settings(Duration.ofMillis(20), SECOND, SECOND),
            java.time.InstantSource.system());
    sampler.start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (!sampler.latest().status().up() && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertThat(sampler.latest().status().up()).isTrue();
    sampler.close();
    assertThat(fake.calls("nvmlInit_v2")).isEqualTo(1);
    assertThat(fake.calls("nvmlShutdown")).isEqualTo(1);
  }

  /** A client whose device count blocks until released, as a hung driver call would. */
  private record StuckClient(CountDownLatch entered, CountDownLatch release) implements NvmlClient {
    @Override
    public NvmlReturn init() {
      return NvmlReturn.SUCCESS;
    }

    @Override
    public NvmlReturn shutdown() {
      return NvmlReturn.SUCCESS;
    }

    @Override
    public NvmlResult<String> driverVersion() {
      return NvmlResult.ok("stuck");
    }

    @Override
    public NvmlResult<Integer> deviceCount() {
      entered.countDown();
      try {
        release.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return NvmlResult.ok(0);
    }

    @Override
    public NvmlResult<DeviceHandle> deviceHandle(int index) {
      throw new UnsupportedOperationException();
    }

    @Override
    public NvmlResult<List<DeviceHandle>> migDevices(DeviceHandle parent) {
      throw new UnsupportedOperationException();
    }

    @Override
    public NvmlResult<GpuIdentity> identity(DeviceHandle device) {
      throw new UnsupportedOperationException();
    }

    @Override
    public NvmlResult<MemoryInfo> memory(DeviceHandle device) {
      throw new UnsupportedOperationException();
    }

    @Override
    public NvmlResult<Utilization> utilization(DeviceHandle device) {
      throw new UnsupportedOperationException();
    }

    @Override
    public NvmlResult<List<RunningProcess>> runningProcesses(DeviceHandle device) {
      throw new UnsupportedOperationException();
    }

    @Override
    public NvmlResult<List<ProcessSample>> processUtilization(DeviceHandle d, long lastSeen) {
      throw new UnsupportedOperationException();
    }

    @Override
    public void close() {}
  }
}

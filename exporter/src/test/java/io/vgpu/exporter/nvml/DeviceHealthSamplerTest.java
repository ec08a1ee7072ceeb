package io.vgpu.exporter.nvml;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Device health and XID events through the sampler on the fake libnvidia-ml. */
class DeviceHealthSamplerTest {
  private static final Instant START = Instant.parse("2026-11-27T21:00:00Z");
  private static final String H100 = "device 0 uuid=GPU-0 name=H100 total=1000 used=0";
  private static final String T4 = "device 1 uuid=GPU-1 name=T4 total=1000 used=0";
  private static final String H100_HEALTH =
      "health 0 power=250000 temp=55 clocks=0x5 ecc=1,0,9,2 remap=3,0,0,1 events=1";

  @TempDir Path dir;
  private final MutableClock clock = new MutableClock(START);
  private NvmlSampler sampler;

  @AfterEach
  void close() {
    if (sampler != null) {
      sampler.close();
    }
  }

  private NvmlSampler sampler() {
    sampler =
        new NvmlSampler(
            () -> JnaNvmlClient.load(FakeNvml.library().toString()),
            new NvmlSampler.Settings(
                Duration.ofSeconds(1), Duration.ofSeconds(3), Duration.ofSeconds(8)),
            clock);
    return sampler;
  }

  private DeviceHealth health(String uuid) {
    return sampler.latest().byUuid(uuid).orElseThrow().health();
  }

  private void poll() {
    clock.advance(Duration.ofSeconds(1));
    sampler.sampleOnce();
  }

  @Test
  void poll_supportedGpu_publishesEveryReading_unsupportedGpu_absentWithReasonNotError() {
    FakeNvml.in(dir).write(H100, T4, H100_HEALTH);
    sampler().sampleOnce();

    DeviceHealth h = health("GPU-0");
    assertThat(h.powerMilliwatts()).hasValue(250000);
    assertThat(h.temperatureCelsius()).hasValue(55);
    assertThat(h.clockEventReasons()).hasValue(0x5);
    assertThat(h.volatileEcc()).contains(new EccCounts(1, 0));
    assertThat(h.aggregateEcc()).contains(new EccCounts(9, 2));
    assertThat(h.remappedRows()).contains(new RemappedRows(3, 0, false, true));
    assertThat(h.unavailable()).isEmpty();
    assertThat(h.xidErrors()).isEmpty();

    DeviceHealth t4 = health("GPU-1");
    assertThat(t4.powerMilliwatts()).isEmpty();
    assertThat(t4.volatileEcc()).isEmpty();
    assertThat(t4.unavailable())
        .containsOnlyKeys(HealthField.values())
        .allSatisfy((f, code) -> assertThat(code).isEqualTo(NvmlReturn.NOT_SUPPORTED));
    assertThat(sampler.errorCounts()).as("NOT_SUPPORTED is no error").isEmpty();
  }

  @Test
  void poll_healthQueryFails_countedByCodeAndAbsentWithThatReason() {
    FakeNvml.in(dir).write(H100, H100_HEALTH, "fail nvmlDeviceGetPowerUsage 4");
    sampler().sampleOnce();
    DeviceHealth h = health("GPU-0");
    assertThat(h.powerMilliwatts()).isEmpty();
    assertThat(h.unavailable())
        .containsExactly(Map.entry(HealthField.POWER, NvmlReturn.NO_PERMISSION));
    assertThat(h.temperatureCelsius()).hasValue(55);
    assertThat(sampler.errorCounts()).containsExactly(Map.entry(NvmlReturn.NO_PERMISSION, 1L));
  }

  @Test
  void xid_eventsAfterStart_countedOncePerEvent_byXid() {
    FakeNvml fake = FakeNvml.in(dir).write(H100, H100_HEALTH, "xid 0 id=1 xid=31");
    sampler().sampleOnce(); // registers; the XID from before is history
    assertThat(health("GPU-0").xidErrors()).isEmpty();

    fake.write(H100, H100_HEALTH, "xid 0 id=1 xid=31", "xid 0 id=2 xid=79", "xid 0 id=3 xid=79");
    poll();
    assertThat(health("GPU-0").xidErrors()).isEqualTo(Map.of("79", 2L));
    fake.write(
        H100,
        H100_HEALTH,
        "xid 0 id=1 xid=31",
        "xid 0 id=2 xid=79",
        "xid 0 id=3 xid=79",
        "xid 0 id=4 xid=48");
    poll();
    poll();
    assertThat(health("GPU-0").xidErrors()).isEqualTo(Map.of("79", 2L, "48", 1L));
    assertThat(fake.calls("nvmlEventSetCreate")).isEqualTo(1);
    assertThat(fake.calls("nvmlDeviceRegisterEvents")).isEqualTo(1);
  }

  @Test
  void xid_manyDistinctNumbers_boundedLabels_restCountedAsOther() {
    FakeNvml fake = FakeNvml.in(dir).write(H100, H100_HEALTH);
    sampler().sampleOnce();
    List<String> lines = new ArrayList<>(List.of(H100, H100_HEALTH));
    int distinct = XidEventWatcher.MAX_XID_LABELS + 5;
    for (int i = 1; i <= distinct; i++) {
      lines.add("xid 0 id=" + i + " xid=" + (100 + i));
    }
    lines.add("xid 0 id=" + (distinct + 1) + " xid=101"); // a known label stays its own
    lines.add("xid 0 id=" + (distinct + 2) + " xid=4294967296"); // beyond MAX_XID
    fake.write(lines.toArray(String[]::new));
    poll();
    Map<String, Long> xids = health("GPU-0").xidErrors();
    assertThat(xids).hasSize(XidEventWatcher.MAX_XID_LABELS + 1);
    assertThat(xids.get("101")).isEqualTo(2L);
    assertThat(xids.get("other")).isEqualTo(5L + 1L);
    assertThat(xids.values().stream().mapToLong(Long::longValue).sum())
        .as("every event counted")
        .isEqualTo(distinct + 2L);
  }

  @Test
  void xid_moreEventsThanOnePollReads_restComeNextPoll_nothingLost() {
    FakeNvml fake = FakeNvml.in(dir).write(H100, H100_HEALTH);
    sampler().sampleOnce();
    List<String> lines = new ArrayList<>(List.of(H100, H100_HEALTH));
    int events = XidEventWatcher.MAX_EVENTS_PER_POLL + 44;
    for (int i = 1; i <= events; i++) {
      lines.add("xid 0 id=" + i + " xid=13");
    }
    fake.write(lines.toArray(String[]::new));
    poll();
    assertThat(health("GPU-0").xidErrors())
        .isEqualTo(Map.of("13", (long) XidEventWatcher.MAX_EVENTS_PER_POLL));
    poll();
    assertThat(health("GPU-0").xidErrors()).isEqualTo(Map.of("13", (long) events));
  }

  @Test
  void xid_gpuWithoutEvents_absentWithReason_otherGpuStillWatched() {
    FakeNvml fake = FakeNvml.in(dir).write(H100, T4, H100_HEALTH, "health 1 power=70000");
    sampler().sampleOnce();
    fake.write(H100, T4, H100_HEALTH, "health 1 power=70000", "xid 0 id=1 xid=94");
    poll();
    poll();
    assertThat(health("GPU-1").unavailable())
        .containsEntry(HealthField.XID_EVENTS, NvmlReturn.NOT_SUPPORTED);
    assertThat(health("GPU-0").xidErrors()).isEqualTo(Map.of("94", 1L));
    assertThat(fake.calls("nvmlDeviceRegisterEvents"))
        .as("NOT_SUPPORTED is not retried")
        .isEqualTo(2);
    assertThat(sampler.errorCounts()).isEmpty();
  }

  @Test
  void driverLost_eventSetFreedBeforeShutdown_countsKeptAcrossReinit() {
    FakeNvml fake = FakeNvml.in(dir).write(H100, H100_HEALTH);
    sampler().sampleOnce();
    fake.write(H100, H100_HEALTH, "xid 0 id=1 xid=79");
    poll();
    assertThat(health("GPU-0").xidErrors()).isEqualTo(Map.of("79", 1L));

    fake.write(H100, H100_HEALTH, "xid 0 id=1 xid=79", "fail nvmlDeviceGetCount 9");
    poll();
    assertThat(sampler.latest().status().up()).isFalse();
    assertThat(fake.calls("nvmlEventSetFree")).isEqualTo(1);

    fake.write(H100, H100_HEALTH, "xid 0 id=1 xid=79");
    clock.advance(Duration.ofSeconds(2));
    sampler.sampleOnce();
    assertThat(sampler.latest().status().up()).isTrue();
    assertThat(fake.calls("nvmlEventSetCreate")).isEqualTo(2);
    fake.write(H100, H100_HEALTH, "xid 0 id=1 xid=79", "xid 0 id=2 xid=79");
    poll();
    assertThat(health("GPU-0").xidErrors())
        .as("the old event is not delivered again")
        .isEqualTo(Map.of("79", 2L));
    sampler.close();
    sampler = null;
    assertThat(fake.calls("nvmlEventSetFree")).isEqualTo(fake.calls("nvmlEventSetCreate"));
  }

  @Test
  void eventSetWaitFails_countedNotFatal() {
    FakeNvml fake = FakeNvml.in(dir).write(H100, H100_HEALTH);
    sampler().sampleOnce();
    fake.write(H100, H100_HEALTH, "fail nvmlEventSetWait 999");
    poll();
    assertThat(sampler.latest().status().up()).isTrue();
    assertThat(sampler.errorCounts()).containsEntry(NvmlReturn.UNKNOWN, 1L);
    assertThat(health("GPU-0").powerMilliwatts()).hasValue(250000);
    assertThat(health("GPU-0").unavailable()).doesNotContainKey(HealthField.XID_EVENTS);
    assertThat(Optional.of(health("GPU-0").xidErrors())).contains(Map.of());
  }

  @Test
  void xid_registrationOrSetCreationRefused_countedOnceNotEveryPoll_reasonKept() {
    FakeNvml fake =
        FakeNvml.in(dir).write(H100, T4, H100_HEALTH, "fail nvmlDeviceRegisterEvents 4");
    sampler().sampleOnce();
    poll();
    poll();
    assertThat(health("GPU-0").unavailable())
        .containsEntry(HealthField.XID_EVENTS, NvmlReturn.NO_PERMISSION);
    assertThat(sampler.errorCounts())
        .as("once per GPU over three polls")
        .containsExactly(Map.entry(NvmlReturn.NO_PERMISSION, 2L));

    fake.write(H100, H100_HEALTH, "fail nvmlEventSetCreate 999", "fail nvmlDeviceGetCount 9");
    poll(); // NVML lost: the set is freed; the next initialisation cannot create one
    fake.write(H100, H100_HEALTH, "fail nvmlEventSetCreate 999");
    clock.advance(Duration.ofSeconds(2));
    sampler.sampleOnce();
    poll();
    poll();
    assertThat(sampler.latest().status().up()).isTrue();
    assertThat(health("GPU-0").unavailable())
        .containsExactly(Map.entry(HealthField.XID_EVENTS, NvmlReturn.UNKNOWN));
    assertThat(health("GPU-0").powerMilliwatts()).hasValue(250000);
    assertThat(sampler.errorCounts()).containsEntry(NvmlReturn.UNKNOWN, 1L);
    assertThat(fake.calls("nvmlEventSetCreate")).isEqualTo(2);
  }
}

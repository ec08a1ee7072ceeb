package io.vgpu.exporter.nvml;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The health and event queries of the JNA binding against the fake libnvidia-ml: values, NVML's
 * NOT_SUPPORTED, the throttle-reasons fallback of older drivers, and event set lifetimes.
 */
class JnaNvmlHealthTest {
  private static final String GPUS =
      """
      device 0 uuid=GPU-aaaa name=H100 total=1000 used=0
      device 1 uuid=GPU-bbbb name=T4 total=1000 used=0
      health 0 power=312500 temp=61 clocks=0x84 ecc=7,2,40,3 remap=5,1,1,0 events=1
      mig 0 0 uuid=MIG-aaaa total=100 used=0
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

  private DeviceHandle handle(int i) {
    return client.deviceHandle(i).orElse(null);
  }

  @Test
  void health_gpuWithEverything_readsEachValue() {
    FakeNvml.in(dir).write(GPUS);
    init(Set.of());
    DeviceHandle h = handle(0);
    assertThat(client.powerMilliwatts(h)).isEqualTo(NvmlResult.ok(312500L));
    assertThat(client.temperatureCelsius(h)).isEqualTo(NvmlResult.ok(61L));
    assertThat(client.clockEventReasons(h)).isEqualTo(NvmlResult.ok(0x84L));
    assertThat(client.eccErrors(h, false)).isEqualTo(NvmlResult.ok(new EccCounts(7, 2)));
    assertThat(client.eccErrors(h, true)).isEqualTo(NvmlResult.ok(new EccCounts(40, 3)));
    assertThat(client.remappedRows(h))
        .isEqualTo(NvmlResult.ok(new RemappedRows(5, 1, true, false)));
  }

  @Test
  void health_gpuWithoutSensors_andMigHandle_answerNotSupported() {
    FakeNvml.in(dir).write(GPUS);
    init(Set.of());
    DeviceHandle mig = client.migDevices(handle(0)).orElse(java.util.List.of()).getFirst();
    for (DeviceHandle h : new DeviceHandle[] {handle(1), mig}) {
      assertThat(client.powerMilliwatts(h))
          .isEqualTo(NvmlResult.err("nvmlDeviceGetPowerUsage", NvmlReturn.NOT_SUPPORTED));
      assertThat(client.temperatureCelsius(h))
          .isEqualTo(NvmlResult.err("nvmlDeviceGetTemperature", NvmlReturn.NOT_SUPPORTED));
      assertThat(client.eccErrors(h, true))
          .isEqualTo(NvmlResult.err("nvmlDeviceGetTotalEccErrors", NvmlReturn.NOT_SUPPORTED));
      assertThat(client.remappedRows(h))
          .isEqualTo(NvmlResult.err("nvmlDeviceGetRemappedRows", NvmlReturn.NOT_SUPPORTED));
    }
  }

  @Test
  void clockEventReasons_driverBeforeR535_fallsBackToThrottleReasons() {
    FakeNvml fake = FakeNvml.in(dir).write(GPUS);
    init(Set.of("nvmlDeviceGetCurrentClocksEventReasons"));
    assertThat(client.clockEventReasons(handle(0))).isEqualTo(NvmlResult.ok(0x84L));
    assertThat(fake.calls("nvmlDeviceGetCurrentClocksThrottleReasons")).isEqualTo(1);
    assertThat(fake.calls("nvmlDeviceGetCurrentClocksEventReasons")).isZero();
  }

  @Test
  void events_xidAfterRegistration_deliveredOnceThenTimeout() {
    FakeNvml fake = FakeNvml.in(dir).write(GPUS, "xid 0 id=1 xid=13");
    init(Set.of());
    EventSet set = client.eventSetCreate().orElse(null);
    assertThat(set).isNotNull();
    assertThat(client.registerEvents(handle(0), NvmlEvent.XID_CRITICAL_ERROR, set))
        .isEqualTo(NvmlReturn.SUCCESS);
    // The XID from before the registration is history: never delivered.
    assertThat(client.eventSetWait(set, 0)).isEqualTo(NvmlResult.ok(Optional.empty()));

    fake.write(GPUS, "xid 0 id=1 xid=13", "xid 0 id=2 xid=79", "xid 0 id=3 xid=48");
    assertThat(client.eventSetWait(set, 0))
        .isEqualTo(
            NvmlResult.ok(
                Optional.of(new NvmlEvent(handle(0).address(), NvmlEvent.XID_CRITICAL_ERROR, 79))));
    assertThat(client.eventSetWait(set, 0).orElse(Optional.empty()))
        .map(NvmlEvent::eventData)
        .contains(48L);
    assertThat(client.eventSetWait(set, 0)).isEqualTo(NvmlResult.ok(Optional.empty()));
    assertThat(client.eventSetFree(set)).isEqualTo(NvmlReturn.SUCCESS);
  }

  @Test
  void eventSetWait_shortTimeout_waitsAboutThatLongThenTimesOut() {
    FakeNvml.in(dir).write(GPUS);
    init(Set.of());
    EventSet set = client.eventSetCreate().orElse(null);
    assertThat(client.registerEvents(handle(0), NvmlEvent.XID_CRITICAL_ERROR, set))
        .isEqualTo(NvmlReturn.SUCCESS);
    long t0 = System.nanoTime();
    assertThat(client.eventSetWait(set, 50)).isEqualTo(NvmlResult.ok(Optional.empty()));
    long waitedMs = (System.nanoTime() - t0) / 1_000_000;
    assertThat(waitedMs).isBetween(45L, 2000L);
    t0 = System.nanoTime();
    assertThat(client.eventSetWait(set, 0)).isEqualTo(NvmlResult.ok(Optional.empty()));
    assertThat((System.nanoTime() - t0) / 1_000_000).isLessThan(45L);
    client.eventSetFree(set);
  }

  @Test
  void registerEvents_gpuWithoutEvents_notSupported() {
    FakeNvml.in(dir).write(GPUS);
    init(Set.of());
    EventSet set = client.eventSetCreate().orElse(null);
    assertThat(client.registerEvents(handle(1), NvmlEvent.XID_CRITICAL_ERROR, set))
        .isEqualTo(NvmlReturn.NOT_SUPPORTED);
    client.eventSetFree(set);
  }

  @Test
  void eventSet_freedOrFromBeforeShutdown_isInvalid() {
    FakeNvml.in(dir).write(GPUS);
    init(Set.of());
    EventSet freed = client.eventSetCreate().orElse(null);
    assertThat(client.eventSetFree(freed)).isEqualTo(NvmlReturn.SUCCESS);
    assertThat(client.eventSetWait(freed, 0))
        .isEqualTo(NvmlResult.err("nvmlEventSetWait_v2", NvmlReturn.INVALID_ARGUMENT));
    assertThat(client.eventSetFree(freed)).isEqualTo(NvmlReturn.INVALID_ARGUMENT);

    EventSet stale = client.eventSetCreate().orElse(null);
    assertThat(client.shutdown()).isEqualTo(NvmlReturn.SUCCESS);
    assertThat(client.init()).isEqualTo(NvmlReturn.SUCCESS);
    assertThat(client.registerEvents(handle(0), NvmlEvent.XID_CRITICAL_ERROR, stale))
        .isEqualTo(NvmlReturn.INVALID_ARGUMENT);
  }

  @Test
  void eventSetCreate_everySetLeaked_failsWithMemory() {
    FakeNvml.in(dir).write(GPUS);
    init(Set.of());
    java.util.List<EventSet> sets = new java.util.ArrayList<>();
    NvmlResult<EventSet> r = client.eventSetCreate();
    while (r.isOk()) {
      sets.add(r.orElse(null));
      assertThat(sets).hasSizeLessThan(100);
      r = client.eventSetCreate();
    }
    assertThat(r).isEqualTo(NvmlResult.err("nvmlEventSetCreate", new NvmlReturn(20)));
    sets.forEach(s -> assertThat(client.eventSetFree(s)).isEqualTo(NvmlReturn.SUCCESS));
    assertThat(client.eventSetCreate().isOk()).isTrue();
  }
}

package io.vgpu.exporter.attribution;

import static io.vgpu.exporter.attribution.World.GIB;
import static io.vgpu.exporter.attribution.World.GPU0;
import static io.vgpu.exporter.attribution.World.GPU1;
import static io.vgpu.exporter.attribution.World.input;
import static io.vgpu.exporter.attribution.World.key;
import static io.vgpu.exporter.attribution.World.spec;
import static io.vgpu.exporter.attribution.World.usage;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The reconciler on a simulated node: real region files, a procfs tree read by the real
 * hostpid-resolver, and the fake libnvidia-ml through JNA and the sampler.
 */
class ReconcilerTest {
  @TempDir Path dir;
  private World w;
  private final Reconciler reconciler =
      new Reconciler(
          new Reconciler.Settings(
              Duration.ofSeconds(30), Duration.ofMinutes(10), Duration.ofSeconds(60)));
  private History history = History.EMPTY;

  @BeforeEach
  void world() {
    w = new World(dir);
  }

  @AfterEach
  void close() {
    w.close();
  }

  private AttributionResult reconcile(NvmlSnapshot nvml, ContainerInput... inputs) {
    AttributionResult r =
        reconciler.reconcile(List.of(inputs), nvml, w.resolver, history, w.clock.instant());
    history = r.history();
    return r;
  }

  private static DeviceAttribution device(AttributionResult r, ContainerKey key, int index) {
    return r.container(key).orElseThrow().devices().get(index);
  }

  /**
   * The zero-utilization bug (seed 001, HAMi-core #112): on drivers 535-560 HAMi-core, calling NVML
   * inside the container, records the in-container pid as hostpid and its watcher never matches a
   * sample, so the region claims 0. From the host the exporter resolves the real host pid.
   */
  @Test
  void reconcile_hamiCoreRecordedContainerPid_reportsNvmlUtilizationNotZero() {
    ContainerKey k = key(1, "train");
    w.podProcess(4001, 777, 1, 1, 1);
    Path r = w.region(k, spec(GPU0).slot(1, 1, 1, usage(0, 2 * GIB, 0)).build());
    NvmlSnapshot nvml =
        w.gpu(0, GPU0, 70).gpuProcess(0, 4001, 2 * GIB + 300_000_000L).busy(0, 4001, 65).poll();

    AttributionResult res = reconcile(nvml, input(k, 1, r));

    DeviceAttribution d = device(res, k, 0);
    assertThat(d.smUtilization().getAsDouble()).isCloseTo(0.65, within(1e-6));
    assertThat(d.regionSmUtilization()).isZero();
    assertThat(d.nvmlMemoryBytes()).hasValue(2 * GIB + 300_000_000L);
    ContainerAttribution c = res.container(k).orElseThrow();
    assertThat(c.mismatches()).containsEntry(MismatchReason.CONTAINER_PID, 1L);
    assertThat(c.hostPids()).containsExactly(4001);
    assertThat(res.gpu(GPU0).orElseThrow().unattributedProcesses()).isZero();
  }

  /**
   * The mixed-namespace driver as the fake can script it: the running-process list in container
   * pids, utilization samples in host pids. Utilization still follows the host pid.
   */
  @Test
  void reconcile_runningListInContainerPidsSamplesInHostPids_utilizationStillAttributed() {
    ContainerKey k = key(1, "train");
    w.podProcess(4001, 777, 1, 1, 7);
    w.hostProcess(1, 5);
    Path r = w.region(k, spec(GPU0).slot(7, 7, 1, usage(0, GIB, 0)).build());
    NvmlSnapshot nvml = w.gpu(0, GPU0, 50).gpuProcess(0, 7, GIB).busy(0, 4001, 48).poll();

    AttributionResult res = reconcile(nvml, input(k, 1, r));

    assertThat(device(res, k, 0).smUtilization().getAsDouble()).isCloseTo(0.48, within(1e-6));
  }

  @Test
  void reconcile_busyMediumIdle_eachReadsItsOwnAndIdleIsZeroNotUnknown() {
    ContainerKey busy = key(1, "a");
    ContainerKey medium = key(2, "b");
    ContainerKey idle = key(3, "c");
    w.podProcess(5001, 1, 1, 1, 1).podProcess(5002, 2, 2, 2, 1).podProcess(5003, 3, 3, 3, 1);
    Path r1 = w.region(busy, spec(GPU0).slot(1, 1, 1, usage(0, GIB, 80)).build());
    Path r2 = w.region(medium, spec(GPU0).slot(1, 1, 1, usage(0, GIB, 20)).build());
    Path r3 = w.region(idle, spec(GPU0).slot(1, 0, 1, usage(0, GIB, 0)).build());
    NvmlSnapshot nvml =
        w.gpu(0, GPU0, 100)
            .gpuProcess(0, 5001, GIB)
            .gpuProcess(0, 5002, GIB)
            .gpuProcess(0, 5003, GIB)
            .busy(0, 5001, 60)
            .busy(0, 5002, 40)
            .poll();

    AttributionResult res =
        reconcile(nvml, input(busy, 1, r1), input(medium, 2, r2), input(idle, 3, r3));

    double a = device(res, busy, 0).smUtilization().getAsDouble();
    double b = device(res, medium, 0).smUtilization().getAsDouble();
    double c = device(res, idle, 0).smUtilization().getAsDouble();
    assertThat(a).isCloseTo(0.60, within(1e-6));
    assertThat(b).isCloseTo(0.40, within(1e-6));
    assertThat(c).isZero();
    assertThat(a + b + c).isLessThanOrEqualTo(1.0);
    assertThat(device(res, busy, 0).regionSmUtilization()).isCloseTo(0.80, within(1e-9));
    assertThat(res.container(idle).orElseThrow().mismatches())
        .containsEntry(MismatchReason.ZERO, 1L);
    assertThat(res.gpu(GPU0).orElseThrow().containers()).isEqualTo(3);
  }

  /** A tenant writes the host pid of another pod's busy process into its own slot. */
  @Test
  void reconcile_tenantClaimsAnotherPodsHostPid_isNotAttributedTheOtherPodsWork() {
    ContainerKey victim = key(1, "victim");
    ContainerKey tenant = key(2, "tenant");
    w.podProcess(6001, 1, 1, 1, 1).podProcess(6002, 2, 2, 2, 1);
    Path rv = w.region(victim, spec(GPU0).slot(1, 6001, 1, usage(0, GIB, 90)).build());
    Path rt = w.region(tenant, spec(GPU0).slot(1, 6001, 1, usage(0, GIB, 90)).build());
    NvmlSnapshot nvml =
        w.gpu(0, GPU0, 90)
            .gpuProcess(0, 6001, GIB)
            .gpuProcess(0, 6002, GIB)
            .busy(0, 6001, 90)
            .poll();

    AttributionResult res = reconcile(nvml, input(victim, 1, rv), input(tenant, 2, rt));

    assertThat(device(res, victim, 0).smUtilization().getAsDouble()).isCloseTo(0.90, within(1e-6));
    assertThat(device(res, tenant, 0).smUtilization()).hasValue(0.0);
    assertThat(res.container(tenant).orElseThrow().mismatches())
        .containsEntry(MismatchReason.OTHER_POD, 1L);
    assertThat(res.container(tenant).orElseThrow().hostPids()).containsExactly(6002);
  }

  /** A tenant writes an in-container pid that no process of its pod has: never attributed. */
  @Test
  void reconcile_slotPidNotInPod_unknownThenZombieAfterGrace() {
    ContainerKey k = key(1, "main");
    w.podProcess(7001, 1, 1, 1, 1);
    w.podProcess(7099, 9, 2, 2, 42); // pid 42 exists, but in another pod
    Path r =
        w.region(
            k,
            spec(GPU0)
                .slot(1, 7001, 1, usage(0, GIB, 0))
                .slot(42, 7099, 1, usage(0, 3 * GIB, 0))
                .build());
    NvmlSnapshot nvml = w.gpu(0, GPU0, 50).gpuProcess(0, 7099, GIB).busy(0, 7099, 50).poll();

    AttributionResult first = reconcile(nvml, input(k, 1, r));
    assertThat(device(first, k, 0).unknown()).contains(UnknownReason.PID_UNRESOLVED);
    assertThat(first.container(k).orElseThrow().zombieSlots()).isZero();

    w.advance(Duration.ofSeconds(31));
    nvml = w.busy(0, 7099, 50).poll();
    AttributionResult later = reconcile(nvml, input(k, 1, r));
    DeviceAttribution d = device(later, k, 0);
    assertThat(d.smUtilization()).hasValue(0.0);
    assertThat(d.zombieBytes()).isEqualTo(3 * GIB);
    assertThat(d.usedBytes()).isEqualTo(GIB);
    assertThat(later.container(k).orElseThrow().zombieSlots()).isEqualTo(1);
    assertThat(later.gpu(GPU0).orElseThrow().unattributedProcesses()).isEqualTo(1);
  }

  /** SIGKILL leaves status 1 and the usage behind; once resolved, a vanished process is gone. */
  @Test
  void reconcile_processKilled_slotBecomesZombieAtOnceAndLeavesUsed() {
    ContainerKey k = key(1, "main");
    w.podProcess(7101, 1, 1, 1, 1).podProcess(7102, 2, 1, 1, 2);
    Path r =
        w.region(
            k,
            spec(GPU0)
                .slot(1, 7101, 1, usage(0, GIB, 0))
                .slot(2, 7102, 1, usage(0, 2 * GIB, 0))
                .build());
    NvmlSnapshot nvml =
        w.gpu(0, GPU0, 0).gpuProcess(0, 7101, GIB).gpuProcess(0, 7102, 2 * GIB).poll();
    assertThat(device(reconcile(nvml, input(k, 1, r)), k, 0).usedBytes()).isEqualTo(3 * GIB);

    w.kill(7102);
    w.advance(Duration.ofSeconds(2));
    nvml = w.clearNvml().gpu(0, GPU0, 0).gpuProcess(0, 7101, GIB).poll();
    AttributionResult res = reconcile(nvml, input(k, 1, r));

    assertThat(res.container(k).orElseThrow().slots())
        .filteredOn(SlotVerdict::isZombie)
        .singleElement()
        .satisfies(v -> assertThat(v.zombie()).contains(ZombieReason.PROCESS_GONE));
    assertThat(device(res, k, 0).usedBytes()).isEqualTo(GIB);
    assertThat(device(res, k, 0).zombieBytes()).isEqualTo(2 * GIB);
    assertThat(device(res, k, 0).smUtilization()).hasValue(0.0);
  }

  /** libvgpu records each slot's start time: a live process with the same pid is another one. */
  @Test
  void reconcile_pidReusedPerStartTime_isZombieNotAttributed() {
    ContainerKey k = key(1, "main");
    w.podProcess(7201, 5555, 1, 1, 3); // pid 3 now belongs to a process started at 5555
    Path r =
        w.region(
            k,
            spec(GPU0)
                .extension(World.extension(1))
                .slot(World.slotWithStart(3, 7200, 1234, usage(0, GIB, 0)))
                .build());
    NvmlSnapshot nvml = w.gpu(0, GPU0, 30).gpuProcess(0, 7201, GIB).busy(0, 7201, 30).poll();

    AttributionResult res = reconcile(nvml, input(k, 1, r));

    ContainerAttribution c = res.container(k).orElseThrow();
    assertThat(c.slots().getFirst().zombie()).contains(ZombieReason.PID_REUSED);
    // the new process with that pid has a GPU context but no slot: it is the container's, unslotted
    assertThat(c.unslottedProcesses()).isEqualTo(1);
    assertThat(device(res, k, 0).smUtilization().getAsDouble()).isCloseTo(0.30, within(1e-6));
    assertThat(device(res, k, 0).zombieBytes()).isEqualTo(GIB);
  }

  /** HAMi-core (no start times): the slot's real recorded hostpid is dead, the pid lives on. */
  @Test
  void reconcile_pidReusedRecordedHostPidDead_isZombie() {
    ContainerKey k = key(1, "main");
    w.podProcess(7301, 1, 1, 1, 5);
    Path r = w.region(k, spec(GPU0).slot(5, 7300, 1, usage(0, GIB, 0)).build());
    NvmlSnapshot nvml = w.gpu(0, GPU0, 0).poll();

    ContainerAttribution c = reconcile(nvml, input(k, 1, r)).container(k).orElseThrow();

    assertThat(c.slots().getFirst().zombie()).contains(ZombieReason.PID_REUSED);
  }

  @Test
  void reconcile_gpuProcessWithoutSlot_isUnslottedAndCounted() {
    ContainerKey k = key(1, "main");
    w.podProcess(7401, 1, 1, 1, 1).podProcess(7402, 2, 1, 1, 9);
    Path r = w.region(k, spec(GPU0).slot(1, 7401, 1, usage(0, GIB, 10)).build());
    NvmlSnapshot nvml =
        w.gpu(0, GPU0, 60)
            .gpuProcess(0, 7401, GIB)
            .gpuProcess(0, 7402, 4 * GIB)
            .busy(0, 7401, 10)
            .busy(0, 7402, 50)
            .poll();

    AttributionResult res = reconcile(nvml, input(k, 1, r));

    assertThat(res.container(k).orElseThrow().unslottedProcesses()).isEqualTo(1);
    assertThat(device(res, k, 0).smUtilization().getAsDouble()).isCloseTo(0.60, within(1e-6));
    assertThat(device(res, k, 0).nvmlMemoryBytes()).hasValue(5 * GIB);
  }

  @Test
  void reconcile_hostDaemonOnGpu_isUnattributedWithItsMemory() {
    ContainerKey k = key(1, "main");
    w.podProcess(7501, 1, 1, 1, 1).hostProcess(900, 1);
    Path r = w.region(k, spec(GPU0).slot(1, 7501, 1, usage(0, GIB, 0)).build());
    NvmlSnapshot nvml =
        w.gpu(0, GPU0, 0).gpuProcess(0, 7501, GIB).gpuProcess(0, 900, 3 * GIB).poll();

    GpuAttribution g = reconcile(nvml, input(k, 1, r)).gpu(GPU0).orElseThrow();

    assertThat(g.processes()).isEqualTo(2);
    assertThat(g.unattributedProcesses()).isEqualTo(1);
    assertThat(g.unattributedBytes()).isEqualTo(3 * GIB);
  }

  /** Pause and app are both pid 1 in the pod; without a container id /proc cannot choose. */
  @Test
  void reconcile_pidOneAmbiguousWithoutContainerId_settledByTheGpuProcess() {
    ContainerKey k = key(1, "main");
    w.podProcess(7601, 1, 1, 1, 1); // app
    w.podProcess(7600, 1, 1, 99, 1); // pause
    Path r = w.region(k, spec(GPU0).slot(1, 1, 1, usage(0, GIB, 0)).build());
    NvmlSnapshot nvml = w.gpu(0, GPU0, 40).gpuProcess(0, 7601, GIB).busy(0, 7601, 40).poll();

    AttributionResult res = reconcile(nvml, input(k, -1, r));

    assertThat(res.container(k).orElseThrow().hostPids()).containsExactly(7601);
    assertThat(device(res, k, 0).smUtilization().getAsDouble()).isCloseTo(0.40, within(1e-6));
  }

  @Test
  void reconcile_pidOneAmbiguousAndNoGpuProcess_isUnknownNotZero() {
    ContainerKey k = key(1, "main");
    w.podProcess(7601, 1, 1, 1, 1).podProcess(7600, 1, 1, 99, 1);
    Path r = w.region(k, spec(GPU0).slot(1, 1, 1, usage(0, GIB, 0)).build());
    NvmlSnapshot nvml = w.gpu(0, GPU0, 0).poll();

    DeviceAttribution d = device(reconcile(nvml, input(k, -1, r)), k, 0);

    assertThat(d.smUtilization()).isEmpty();
    assertThat(d.unknown()).contains(UnknownReason.PID_UNRESOLVED);
  }

  @Test
  void reconcile_nvmlNotLoaded_utilizationUnknownWithReasonRegionValuesKept() {
    ContainerKey k = key(1, "main");
    w.podProcess(7701, 1, 1, 1, 1);
    Path r = w.region(k, spec(GPU0).slot(1, 7701, 1, usage(0, GIB, 33)).build());
    NvmlSnapshot nvml = w.nvmlLine("fail nvmlInit 9").poll();

    DeviceAttribution d = device(reconcile(nvml, input(k, 1, r)), k, 0);

    assertThat(d.unknown()).contains(UnknownReason.NVML_UNAVAILABLE);
    assertThat(d.smUtilization()).isEmpty();
    assertThat(d.nvmlMemoryBytes()).isEmpty();
    assertThat(d.usedBytes()).isEqualTo(GIB);
    assertThat(d.regionSmUtilization()).isCloseTo(0.33, within(1e-9));
  }

  @Test
  void reconcile_gpuLostMidRunThenBack_unknownThenAttributedAgain() {
    ContainerKey k = key(1, "main");
    w.podProcess(7801, 1, 1, 1, 1);
    Path r = w.region(k, spec(GPU0).slot(1, 7801, 1, usage(0, GIB, 0)).build());
    NvmlSnapshot nvml = w.gpu(0, GPU0, 50).gpuProcess(0, 7801, GIB).busy(0, 7801, 50).poll();
    assertThat(device(reconcile(nvml, input(k, 1, r)), k, 0).smUtilization()).isPresent();

    w.advance(Duration.ofSeconds(1));
    nvml = w.nvmlLine("fail * 15").poll();
    DeviceAttribution lost = device(reconcile(nvml, input(k, 1, r)), k, 0);
    assertThat(lost.unknown()).contains(UnknownReason.NVML_UNAVAILABLE);

    w.advance(Duration.ofSeconds(2));
    nvml = w.clearNvml().gpu(0, GPU0, 50).gpuProcess(0, 7801, GIB).busy(0, 7801, 50).poll();
    assertThat(device(reconcile(nvml, input(k, 1, r)), k, 0).smUtilization().getAsDouble())
        .isCloseTo(0.50, within(1e-6));
  }

  /** NVML has no per-process utilization on MIG devices: unknown, but memory is still known. */
  @Test
  void reconcile_containerOnMigDevice_utilizationUnsupportedMemoryAttributed() {
    ContainerKey k = key(1, "main");
    w.podProcess(7951, 1, 1, 1, 1);
    Path r = w.region(k, spec("MIG-aaaa").slot(1, 7951, 1, usage(0, GIB, 0)).build());
    NvmlSnapshot nvml =
        w.gpu(0, GPU0, 0)
            .nvmlLine("mig 0 0 uuid=MIG-aaaa total=" + 10 * GIB + " used=" + GIB)
            .nvmlLine("migprocess 0 0 pid=7951 used=" + 2 * GIB)
            .poll();

    DeviceAttribution d = device(reconcile(nvml, input(k, 1, r)), k, 0);

    assertThat(nvml.gpus()).extracting(g -> g.identity().uuid()).containsExactly(GPU0, "MIG-aaaa");
    assertThat(d.unknown()).contains(UnknownReason.NVML_UNSUPPORTED);
    assertThat(d.nvmlMemoryBytes()).hasValue(2 * GIB);
  }

  @Test
  void reconcile_regionUuidUnknownToNvml_unknownGpuNotInNvml() {
    ContainerKey k = key(1, "main");
    w.podProcess(7901, 1, 1, 1, 1);
    Path r = w.region(k, spec(GPU0, GPU1).slot(1, 7901, 1, usage(0, GIB, 0)).build());
    NvmlSnapshot nvml = w.gpu(0, GPU0, 0).gpuProcess(0, 7901, GIB).poll();

    AttributionResult res = reconcile(nvml, input(k, 1, r));

    assertThat(device(res, k, 0).smUtilization()).hasValue(0.0);
    assertThat(device(res, k, 1).unknown()).contains(UnknownReason.GPU_NOT_IN_NVML);
  }

  @Test
  void reconcile_recordedHostPidDeadOrZero_countedByReason() {
    ContainerKey k = key(1, "main");
    w.podProcess(8001, 1, 1, 1, 1).podProcess(8002, 2, 1, 1, 2).podProcess(8003, 3, 1, 1, 3);
    w.hostProcess(950, 1);
    Path r =
        w.region(
            k,
            spec(GPU0)
                .slot(1, 0, 1, usage(0, 1, 0))
                .slot(2, 950, 1, usage(0, 1, 0))
                .slot(3, 8003, 1, usage(0, 1, 0))
                .build());
    NvmlSnapshot nvml = w.gpu(0, GPU0, 0).poll();

    Map<MismatchReason, Long> m =
        reconcile(nvml, input(k, 1, r)).container(k).orElseThrow().mismatches();

    assertThat(m)
        .containsEntry(MismatchReason.ZERO, 1L)
        .containsEntry(MismatchReason.OTHER, 1L)
        .containsEntry(MismatchReason.CONTAINER_PID, 0L)
        .containsEntry(MismatchReason.DEAD, 0L);
  }

  @Test
  void reconcile_overTime_accumulatesBlockedAndOverLimitSecondsAndIdleMemory() {
    ContainerKey k = key(1, "main");
    w.podProcess(8101, 1, 1, 1, 1);
    Path r =
        w.region(
            k,
            World.spec()
                .device(GPU0, 8 * GIB, 30)
                .recentKernel(-1)
                .lastKernelTime(World.START.getEpochSecond() - 100)
                .slot(1, 8101, 1, usage(0, GIB, 0))
                .build());
    NvmlSnapshot nvml = w.gpu(0, GPU0, 50).gpuProcess(0, 8101, GIB).busy(0, 8101, 50).poll();
    ContainerAttribution first = reconcile(nvml, input(k, 1, r)).container(k).orElseThrow();
    assertThat(first.priorityBlocked()).isTrue();
    assertThat(first.memoryIdleSeconds()).contains(0.0); // busy right now per NVML

    w.advance(Duration.ofSeconds(10));
    nvml = w.busy(0, 8101, 50).poll();
    ContainerAttribution second = reconcile(nvml, input(k, 1, r)).container(k).orElseThrow();
    assertThat(second.priorityBlockedSeconds()).isCloseTo(10.0, within(1e-9));
    assertThat(second.overSmLimitSeconds()).containsEntry(0, 10.0);

    // NVML goes quiet; memory stays held: idle time grows from the last activity
    w.advance(Duration.ofMinutes(11));
    nvml = w.clearNvml().gpu(0, GPU0, 0).gpuProcess(0, 8101, GIB).poll();
    ContainerAttribution third = reconcile(nvml, input(k, 1, r)).container(k).orElseThrow();
    assertThat(third.memoryIdleSeconds().orElseThrow()).isCloseTo(660.0, within(1.0));
    assertThat(third.leakSuspected()).isTrue();
    assertThat(third.priorityBlockedSeconds()).isCloseTo(70.0, within(1e-9)); // gap capped at 60 s
  }

  @Test
  void reconcile_noSlotsNoGpuProcesses_utilizationIsKnownZero() {
    ContainerKey k = key(1, "main");
    Path r = w.region(k, spec(GPU0).build());
    NvmlSnapshot nvml = w.gpu(0, GPU0, 0).poll();

    DeviceAttribution d = device(reconcile(nvml, input(k, 1, r)), k, 0);

    assertThat(d.smUtilization()).hasValue(0.0);
    assertThat(d.unknown()).isEqualTo(Optional.empty());
  }
}

package io.vgpu.exporter.doctor;

import static io.vgpu.exporter.testing.OperatorFixture.GPU0;
import static io.vgpu.exporter.testing.OperatorFixture.NOW;
import static io.vgpu.exporter.testing.OperatorFixture.UID_A;
import static io.vgpu.exporter.testing.OperatorFixture.usage;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.k8s.NodeAnnotations;
import io.vgpu.exporter.testing.OperatorFixture;
import io.vgpu.regioncodec.ExtensionDevice;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionExtension;
import io.vgpu.regioncodec.RegionSpec;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Each of the seventeen checks against a healthy node (passes) and against that node with exactly
 * one thing broken (fails). The node is real files: regions written by the codec's writer and a
 * procfs tree; evidence comes from the real collector.
 */
class DoctorChecksTest {
  static final long GIB = 1L << 30;
  static final int CPID = 7;
  static final int HPID = 1007;

  @TempDir Path tmp;
  OperatorFixture fx;

  @BeforeEach
  void setUp() {
    fx = new OperatorFixture(tmp);
  }

  /** A healthy container: v1.2, 4 GiB / 50 % SM, one process using 1 GiB at 30 %. */
  RegionSpec.Builder healthySpec() {
    return OperatorFixture.v12(4 * GIB, 50)
        .slot(CPID, HPID, 1, usage(GIB, 30))
        .lastKernelTime(NOW.getEpochSecond());
  }

  Path healthy(RegionSpec spec) {
    Path region = fx.region(UID_A, "main", spec);
    fx.process(HPID, CPID).gpu(region).write();
    fx.nvmlUp(Map.of(HPID, GIB + (100L << 20)), Map.of(HPID, 0.30));
    fx.node =
        Optional.of(
            NodeAnnotations.decode(
                Map.of(
                    NodeAnnotations.HANDSHAKE,
                    Long.toString(NOW.getEpochSecond() - 20),
                    NodeAnnotations.NVIDIA_REGISTER,
                    "[{\"id\":\""
                        + GPU0
                        + "\",\"index\":0,\"count\":10,\"devmem\":81920,\"devcore\":100,\"type\":\"NVIDIA-H100\",\"numa\":0,\"mode\":\"hami-core\",\"health\":true}]")));
    return region;
  }

  Path healthy() {
    return healthy(healthySpec().build());
  }

  static RegionExtension ext(int holder, long sinceNanos, List<ExtensionDevice> devices) {
    return new RegionExtension(
        1, 0, 0, 1, "libvgpu 0.1.0", UID_A, "main", holder, sinceNanos, devices);
  }

  static long nanos(java.time.Instant t) {
    return t.getEpochSecond() * 1_000_000_000L + t.getNano();
  }

  @Test
  void healthyNode_everyCheck_okOrSkip() {
    healthy();
    DoctorReport r = fx.doctor();
    assertThat(r.findings())
        .extracting(Finding::check)
        .containsAll(List.of(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    assertThat(r.findings())
        .allSatisfy(
            f -> assertThat(f.severity()).as(f.toString()).isIn(Severity.OK, Severity.SKIP));
    assertThat(r.exitCode()).isZero();
  }

  // 1 -----------------------------------------------------------------------------------------
  @Test
  void libraryNotLoaded_healthy_ok() {
    healthy();
    assertThat(fx.verdict(1)).isEqualTo(Severity.OK);
  }

  @Test
  void libraryNotLoaded_gpuProcessWithoutLibvgpu_failsWithPreloadAndDisableControl() {
    Path region = healthy();
    fx.process(1010, 10).mapsLibcuda().noPreload().env("CUDA_DISABLE_CONTROL", "true").write();
    List<Finding> f = fx.findings(1);
    assertThat(fx.verdict(1)).isEqualTo(Severity.FAIL);
    assertThat(f.getFirst().evidence())
        .anyMatch(l -> l.contains("host pid 1010"))
        .anyMatch(l -> l.contains("CUDA_DISABLE_CONTROL=true"))
        .anyMatch(l -> l.contains("ld.so.preload is missing"));
    assertThat(f.getFirst().fix()).contains("CUDA_DISABLE_CONTROL");
    assertThat(region).exists();
  }

  // 2 -----------------------------------------------------------------------------------------
  @Test
  void cacheFileMissing_regionPresent_ok() {
    healthy();
    assertThat(fx.verdict(2)).isEqualTo(Severity.OK);
  }

  @Test
  void cacheFileMissing_gpuProcessButNoFile_fails() {
    fx.emptyContainer(UID_A, "main");
    fx.process(HPID, CPID).mapsLibcuda().write();
    assertThat(fx.verdict(2)).isEqualTo(Severity.FAIL);
    assertThat(fx.findings(2).getFirst().summary()).contains("no cache file");
  }

  @Test
  void cacheFileMissing_noGpuUseYet_ok() {
    fx.emptyContainer(UID_A, "main");
    assertThat(fx.verdict(2)).isEqualTo(Severity.OK);
  }

  // 3 -----------------------------------------------------------------------------------------
  @Test
  void regionVersion_v12_ok() {
    healthy();
    assertThat(fx.verdict(3)).isEqualTo(Severity.OK);
  }

  @Test
  void regionVersion_brokenLayout_fails() {
    healthy(
        RegionSpec.builder(Layout.V1_1_BROKEN)
            .device(GPU0, 4 * GIB, 50)
            .slot(CPID, HPID, 1, usage(GIB, 30))
            .build());
    assertThat(fx.verdict(3)).isEqualTo(Severity.FAIL);
    assertThat(fx.findings(3).getFirst().summary()).contains("v1.1-broken");
  }

  @Test
  void regionVersion_v11_warns() {
    healthy(
        RegionSpec.builder(Layout.V1_1)
            .device(GPU0, 4 * GIB, 50)
            .slot(CPID, HPID, 1, usage(GIB, 30))
            .build());
    assertThat(fx.verdict(3)).isEqualTo(Severity.WARN);
  }

  // 4 -----------------------------------------------------------------------------------------
  @Test
  void mixedLibraries_oneLibrary_ok() {
    healthy();
    assertThat(fx.verdict(4)).isEqualTo(Severity.OK);
  }

  @Test
  void mixedLibraries_twoLibvgpuFilesInOnePod_fails() {
    Path region = healthy();
    fx.process(1011, 11)
        .mapsLibcuda()
        .mapsLibvgpu("/opt/app/lib/libvgpu.so", 5555)
        .mapsRegion(region)
        .write();
    assertThat(fx.verdict(4)).isEqualTo(Severity.FAIL);
    assertThat(fx.findings(4).getFirst().evidence())
        .anyMatch(l -> l.contains("/opt/app/lib/libvgpu.so"));
  }

  // 5 -----------------------------------------------------------------------------------------
  @Test
  void deadLockHolder_liveHolder_ok() {
    healthy(healthySpec().ownerPid(CPID).build());
    assertThat(fx.verdict(5)).isEqualTo(Severity.OK);
  }

  @Test
  void deadLockHolder_ownerPidGone_fails() {
    healthy(healthySpec().ownerPid(99).build());
    assertThat(fx.verdict(5)).isEqualTo(Severity.FAIL);
    assertThat(fx.findings(5).getFirst().fix()).contains("unlock --uid " + UID_A);
  }

  // 6 -----------------------------------------------------------------------------------------
  @Test
  void longLockHold_briefHold_ok() {
    healthy(healthySpec().extension(ext(CPID, nanos(NOW.minusMillis(200)), List.of())).build());
    assertThat(fx.verdict(6)).isEqualTo(Severity.OK);
  }

  @Test
  void longLockHold_liveHolderForAMinute_warns() {
    healthy(healthySpec().extension(ext(CPID, nanos(NOW.minusSeconds(60)), List.of())).build());
    assertThat(fx.verdict(6)).isEqualTo(Severity.WARN);
    assertThat(fx.findings(6).getFirst().evidence()).anyMatch(l -> l.contains("held for 60.0 s"));
    assertThat(fx.verdict(5)).isEqualTo(Severity.OK);
  }

  // 7 -----------------------------------------------------------------------------------------
  @Test
  void slotTableFull_room_ok() {
    healthy();
    assertThat(fx.verdict(7)).isEqualTo(Severity.OK);
  }

  @Test
  void slotTableFull_1024Entries_fails() {
    healthy(healthySpec().procNum(1024).build());
    assertThat(fx.verdict(7)).isEqualTo(Severity.FAIL);
  }

  // 8 -----------------------------------------------------------------------------------------
  @Test
  void zombieSlots_allAlive_ok() {
    healthy();
    assertThat(fx.verdict(8)).isEqualTo(Severity.OK);
  }

  @Test
  void zombieSlots_killedProcessHoldsMemory_fails() {
    healthy(healthySpec().slot(8, 1008, 1, usage(512L << 20, 0)).build());
    assertThat(fx.verdict(8)).isEqualTo(Severity.FAIL);
    assertThat(fx.findings(8).getFirst().summary()).contains("512 MiB");
  }

  @Test
  void zombieSlots_pidReusedWithAnotherStartTime_fails() {
    var slot =
        RegionSpec.SlotSpec.of(CPID, HPID, 1, List.of(usage(GIB, 30)))
            .withExtension(new io.vgpu.regioncodec.SlotExtension(1111, 0, 2));
    healthy(OperatorFixture.v12(4 * GIB, 50).slot(slot).extension(ext(0, 0, List.of())).build());
    assertThat(fx.verdict(8)).isEqualTo(Severity.FAIL);
  }

  @Test
  void zombieSlots_noPodProcessesVisibleButVerifiedHostPid_alive() {
    Path region =
        fx.region(
            UID_A, "main", OperatorFixture.v12(GIB, 0).slot(5, 2005, 1, usage(GIB, 0)).build());
    fx.process(2005, 5).outsidePods().write();
    assertThat(fx.verdict(8)).isEqualTo(Severity.OK);
    assertThat(fx.verdict(9)).isEqualTo(Severity.OK);
    assertThat(region).exists();
  }

  @Test
  void zombieSlots_hostPidEqualsPidAndPodInvisible_cannotJudgeWarnsAndCleanupKeepsIt() {
    fx.region(UID_A, "main", OperatorFixture.v12(GIB, 0).slot(5, 5, 1, usage(GIB, 0)).build());
    assertThat(fx.verdict(8)).isEqualTo(Severity.WARN);
    assertThat(fx.findings(8).getFirst().summary()).contains("cannot be judged");
    assertThat(fx.verdict(9)).isEqualTo(Severity.WARN);
    RepairPlan plan = RepairPlan.cleanup(fx.evidence());
    assertThat(plan.actions()).isEmpty();
    assertThat(plan.skipped()).anyMatch(l -> l.contains("cannot be judged"));
    // The same word on every surface: inspect called this slot GONE while doctor could not judge
    // it and cleanup kept it.
    assertThat(fx.findings(8).getFirst().summary()).contains("UNKNOWN");
    assertThat(plan.skipped()).anyMatch(l -> l.contains("UNKNOWN"));
    assertThat(Inspection.text(fx.evidence()))
        .contains("UNKNOWN")
        .doesNotContain("GONE")
        .contains("container main: WARN");
  }

  @Test
  void inspect_procNumAboveTheListedSlots_saysHowManyAreLiveAndWhatProcNumSays() {
    // HAMi-core leaves proc_num high after a process exits without compaction: inspect printed
    // "2 slot(s) in use" and listed one.
    fx.region(
        UID_A,
        "main",
        OperatorFixture.v12(GIB, 0).slot(5, 2005, 1, usage(GIB, 0)).procNum(2).build());
    String text = Inspection.text(fx.evidence());
    assertThat(text).contains("1 live slot(s) (proc_num 2)").doesNotContain("2 slot(s) in use");
    assertThat(text.lines().filter(l -> l.trim().startsWith("slot "))).hasSize(1);
  }

  @Test
  void fixTexts_tenantNamesThatAreNotOneShellWord_neverBecomePartOfACommand() {
    // The directory and file names are the tenant's; a pasted fix must not run "touch x".
    fx.region(
        UID_A, "main;touch x", OperatorFixture.v12(GIB, 0).slot(5, 2005, 1, usage(GIB, 0)).build());
    String fix = fx.findings(8).getFirst().fix();
    assertThat(fix).contains("cleanup --uid " + UID_A + " --apply").contains("-c CONTAINER ");
    assertThat(fix).doesNotContain("touch");
  }

  @Test
  void zombieSlots_hostNamespaceProcessWithSamePid_notMistakenForTheSlot() {
    // pid 5 exists in the host namespace, but a host process never verifies a slot (pid == hostpid
    // trivially).
    fx.region(UID_A, "main", OperatorFixture.v12(GIB, 0).slot(5, 5, 1, usage(GIB, 0)).build());
    fx.process(5, 5).outsidePods().write();
    assertThat(fx.evidence().processes()).isEmpty();
    assertThat(fx.verdict(8)).isEqualTo(Severity.WARN);
  }

  // 9 -----------------------------------------------------------------------------------------
  @Test
  void hostPidWrong_recordedRight_ok() {
    healthy();
    assertThat(fx.verdict(9)).isEqualTo(Severity.OK);
  }

  @Test
  void hostPidWrong_hostPidEqualsContainerPid_failsAsZeroUtilBug() {
    healthy(OperatorFixture.v12(4 * GIB, 50).slot(CPID, CPID, 1, usage(GIB, 0)).build());
    assertThat(fx.verdict(9)).isEqualTo(Severity.FAIL);
    assertThat(fx.findings(9).getFirst().summary()).contains("zero-utilization");
    assertThat(fx.findings(9).getFirst().evidence())
        .anyMatch(l -> l.contains("recorded host pid 7, real host pid 1007"));
  }

  @Test
  void hostPidWrong_neverDetected_warns() {
    healthy(OperatorFixture.v12(4 * GIB, 50).slot(CPID, 0, 1, usage(GIB, 0)).build());
    assertThat(fx.verdict(9)).isEqualTo(Severity.WARN);
  }

  // 10 ----------------------------------------------------------------------------------------
  @Test
  void memoryGap_withinTolerance_ok() {
    healthy();
    assertThat(fx.verdict(10)).isEqualTo(Severity.OK);
  }

  @Test
  void memoryGap_nvmlSeesThreeTimesMore_warns() {
    healthy();
    fx.nvmlUp(Map.of(HPID, 3 * GIB), Map.of(HPID, 0.30));
    assertThat(fx.verdict(10)).isEqualTo(Severity.WARN);
    assertThat(fx.findings(10).getFirst().summary()).contains("2048 MiB more");
  }

  // 11 ----------------------------------------------------------------------------------------
  @Test
  void smLimit_belowLimit_ok() {
    healthy();
    assertThat(fx.verdict(11)).isEqualTo(Severity.OK);
  }

  @Test
  void smLimit_ninetyPercentAgainstFifty_fails() {
    healthy();
    fx.nvmlUp(Map.of(HPID, GIB), Map.of(HPID, 0.90));
    assertThat(fx.verdict(11)).isEqualTo(Severity.FAIL);
    assertThat(fx.findings(11).getFirst().evidence().getFirst())
        .contains("SM limit 50%")
        .contains("90%");
  }

  // 12 ----------------------------------------------------------------------------------------
  static final long THROTTLED_NS_DEV0 = 2008960L + 448 + 16;

  void throttleBetweenSamples(Path region, long addNanos) {
    fx.window = Duration.ofSeconds(5);
    fx.betweenSamples =
        () -> {
          try (FileChannel ch =
              FileChannel.open(region, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
            ch.read(b, THROTTLED_NS_DEV0);
            long v = b.flip().getLong();
            ch.write(
                ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, v + addNanos),
                THROTTLED_NS_DEV0);
          } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
          }
        };
  }

  List<ExtensionDevice> limiterDev() {
    List<ExtensionDevice> d = new ArrayList<>();
    d.add(new ExtensionDevice(0, 0, 0, 1_000_000, 3, 1000, 0, 0));
    return d;
  }

  @Test
  void limiterMisfiring_throttlingNearTheLimit_ok() {
    Path region = healthy(healthySpec().extension(ext(0, 0, limiterDev())).build());
    fx.nvmlUp(Map.of(HPID, GIB), Map.of(HPID, 0.48));
    throttleBetweenSamples(region, 2_000_000_000L);
    assertThat(fx.verdict(12)).isEqualTo(Severity.OK);
  }

  @Test
  void limiterMisfiring_throttledAtTenPercentOfFifty_warns() {
    Path region = healthy(healthySpec().extension(ext(0, 0, limiterDev())).build());
    fx.nvmlUp(Map.of(HPID, GIB), Map.of(HPID, 0.10));
    throttleBetweenSamples(region, 2_000_000_000L);
    assertThat(fx.verdict(12)).isEqualTo(Severity.WARN);
    assertThat(fx.findings(12).getFirst().evidence().getFirst()).contains("2000 ms throttled");
  }

  @Test
  void limiterMisfiring_hamiRegion_skipped() {
    healthy();
    assertThat(fx.verdict(12)).isEqualTo(Severity.SKIP);
  }

  // 13 ----------------------------------------------------------------------------------------
  @Test
  void nvml_up_ok() {
    healthy();
    assertThat(fx.verdict(13)).isEqualTo(Severity.OK);
  }

  @Test
  void nvml_initFailed_fails() {
    healthy();
    fx.nvml = io.vgpu.exporter.nvml.NvmlSnapshot.unavailable(NOW, "nvmlInit_v2: DRIVER_NOT_LOADED");
    assertThat(fx.verdict(13)).isEqualTo(Severity.FAIL);
    assertThat(fx.findings(13).getFirst().evidence())
        .anyMatch(l -> l.contains("DRIVER_NOT_LOADED"));
    assertThat(fx.verdict(10)).isEqualTo(Severity.SKIP);
  }

  @Test
  void nvml_beforeTheSamplersFirstPoll_isNotAFailure() {
    // An evidence pass that runs before the sampler's first poll once put "NVML is not usable"
    // (FAIL) on a freshly started, healthy node.
    healthy();
    fx.nvml =
        io.vgpu.exporter.nvml.NvmlSnapshot.unavailable(
            NOW, io.vgpu.exporter.nvml.NvmlStatus.NOT_POLLED_YET);
    assertThat(fx.verdict(13)).isEqualTo(Severity.SKIP);
    assertThat(fx.findings(13).getFirst().summary()).contains("not polled yet");
  }

  // 14 ----------------------------------------------------------------------------------------
  @Test
  void handshake_fresh_ok() {
    healthy();
    assertThat(fx.verdict(14)).isEqualTo(Severity.OK);
  }

  @Test
  void handshake_tenMinutesOld_fails() {
    healthy();
    fx.node =
        Optional.of(
            NodeAnnotations.decode(
                Map.of(
                    NodeAnnotations.HANDSHAKE,
                    Long.toString(NOW.getEpochSecond() - 600),
                    NodeAnnotations.NVIDIA_REGISTER,
                    "[{\"id\":\"" + GPU0 + "\",\"count\":10}]")));
    assertThat(fx.verdict(14)).isEqualTo(Severity.FAIL);
    assertThat(fx.findings(14).getFirst().evidence()).anyMatch(l -> l.contains("age 600 s"));
  }

  @Test
  void handshake_undecodable_fails() {
    healthy();
    fx.node =
        Optional.of(NodeAnnotations.decode(Map.of(NodeAnnotations.HANDSHAKE, "yesterday-ish")));
    assertThat(fx.verdict(14)).isEqualTo(Severity.FAIL);
  }

  @Test
  void handshake_noApiAccess_skipped() {
    healthy();
    fx.node = Optional.empty();
    assertThat(fx.verdict(14)).isEqualTo(Severity.SKIP);
  }

  // 15 ----------------------------------------------------------------------------------------
  @Test
  void registration_present_ok() {
    healthy();
    assertThat(fx.verdict(15)).isEqualTo(Severity.OK);
  }

  @Test
  void registration_missing_fails() {
    healthy();
    fx.node =
        Optional.of(
            NodeAnnotations.decode(
                Map.of(NodeAnnotations.HANDSHAKE, Long.toString(NOW.getEpochSecond()))));
    assertThat(fx.verdict(15)).isEqualTo(Severity.FAIL);
  }

  @Test
  void registration_undecodable_fails() {
    healthy();
    fx.node =
        Optional.of(
            NodeAnnotations.decode(
                Map.of(
                    NodeAnnotations.HANDSHAKE,
                    Long.toString(NOW.getEpochSecond()),
                    NodeAnnotations.NVIDIA_REGISTER,
                    "{{{not a registration")));
    assertThat(fx.verdict(15)).isEqualTo(Severity.FAIL);
  }

  // 16 ----------------------------------------------------------------------------------------
  @Test
  void degraded_noSideFile_ok() {
    healthy();
    assertThat(fx.verdict(16)).isEqualTo(Severity.OK);
  }

  @Test
  void degraded_sideFileOfAnUnregisteredPid_failsWithCauseAndFix() throws IOException {
    Path region = healthy();
    java.nio.file.Files.writeString(
        region.resolveSibling("vgpu.cache.degraded"),
        "libvgpu-degraded v1 cause=slot-table-full pid=42 time=" + NOW.getEpochSecond() + "\n");
    List<Finding> f = fx.findings(16);
    assertThat(fx.verdict(16)).isEqualTo(Severity.FAIL);
    assertThat(f.getFirst().summary()).contains("slot-table-full").contains("per process tree");
    assertThat(f.getFirst().fix()).contains("cleanup --uid " + UID_A);
  }

  @Test
  void degraded_sideFileWhosePidNowHoldsASlot_ok() throws IOException {
    Path region = healthy();
    java.nio.file.Files.writeString(
        region.resolveSibling("vgpu.cache.degraded"),
        "libvgpu-degraded v1 cause=no-space pid=" + CPID + " time=" + NOW.getEpochSecond() + "\n");
    assertThat(fx.verdict(16)).isEqualTo(Severity.OK);
  }

  @Test
  void degraded_garbageSideFile_warnsWithoutShowingIt() throws IOException {
    Path region = healthy();
    java.nio.file.Files.writeString(region.resolveSibling("vgpu.cache.degraded"), "SECRET-ish\n");
    List<Finding> f = fx.findings(16);
    assertThat(fx.verdict(16)).isEqualTo(Severity.WARN);
    assertThat(f.toString()).doesNotContain("SECRET");
  }

  // report --------------------------------------------------------------------------------------
  @Test
  void report_exitCodeAndJson_reflectWorstFinding() {
    healthy(healthySpec().ownerPid(99).build());
    DoctorReport r = fx.doctor();
    assertThat(r.exitCode()).isEqualTo(2);
    assertThat(r.toJson()).contains("\"verdict\":\"fail\"").contains("\"id\":\"lock-dead-holder\"");
    assertThat(r.toText()).contains("[FAIL]  5 lock-dead-holder").contains("fix: ");
    assertThat(
            Doctor.standard()
                .run(fx.evidence().forPod("00000000-0000-4000-8000-000000000000"))
                .findings())
        .noneMatch(f -> f.subject().contains(UID_A));
  }
}

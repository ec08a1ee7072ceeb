package io.vgpu.hostpid;

import static io.vgpu.hostpid.testing.ProcTree.containerId;
import static io.vgpu.hostpid.testing.ProcTree.podUid;
import static io.vgpu.hostpid.testing.ProcTree.systemdCgroup;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vgpu.hostpid.Unresolved.Reason;
import io.vgpu.hostpid.testing.ProcTree;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class HostPidResolverTest {

  private static final Duration INTERVAL = Duration.ofSeconds(10);
  private static final String POD_A = podUid(1);
  private static final String POD_B = podUid(2);
  private static final String APP_A = containerId(1);
  private static final String PAUSE_A = containerId(2);
  private static final String APP_B = containerId(3);

  @TempDir Path dir;
  private ProcTree tree;
  private final AtomicLong ticker = new AtomicLong(1_000_000_000L);
  private HostPidResolver resolver;

  @BeforeEach
  void setUp() {
    tree = ProcTree.at(dir.resolve("proc"));
    tree.process(1, 10, ProcTree.hostCgroup(), 1);
    tree.process(4100, 500, systemdCgroup(POD_A, APP_A, "burstable"), 4100, 1);
    tree.process(4101, 490, systemdCgroup(POD_A, PAUSE_A, "burstable"), 4101, 1);
    tree.process(4102, 510, systemdCgroup(POD_A, APP_A, "burstable"), 4102, 7);
    tree.process(5200, 600, ProcTree.cgroupfsV1Cgroup(POD_B, APP_B, "besteffort"), 5200, 1);
    tree.process(5201, 610, ProcTree.cgroupfsV1Cgroup(POD_B, APP_B, "besteffort"), 5201, 9);
    resolver = new HostPidResolver(new ProcFs(tree.root()), INTERVAL, ticker::get);
  }

  @Test
  void resolve_singleMatchInPod_returnsHostPidAndStartTime() {
    Map<Integer, PidResolution> result = resolver.resolve(POD_A, Optional.empty(), List.of(7));

    assertThat(result).containsExactly(Map.entry(7, new Resolved(4102, 510)));
  }

  @Test
  void resolve_pid1WithPauseAndAppContainers_isAmbiguousWithoutContainerId() {
    assertThat(resolver.resolve(POD_A, Optional.empty(), List.of(1)))
        .containsExactly(Map.entry(1, Unresolved.of(Reason.AMBIGUOUS)));
  }

  @Test
  void resolve_pid1WithContainerId_resolvesToThatContainersProcess() {
    assertThat(resolver.resolve(POD_A, Optional.of("containerd://" + APP_A), List.of(1, 7)))
        .containsExactly(
            Map.entry(1, new Resolved(4100, 500)), Map.entry(7, new Resolved(4102, 510)));
    assertThat(resolver.resolve(POD_A, Optional.of(PAUSE_A), List.of(1, 7)))
        .containsExactly(
            Map.entry(1, new Resolved(4101, 490)), Map.entry(7, Unresolved.of(Reason.NOT_IN_POD)));
  }

  @Test
  void resolve_twoPodsBothWithPid1_resolveToDifferentHostPids() {
    PidResolution a = resolver.resolve(POD_A, Optional.of(APP_A), List.of(1)).get(1);
    PidResolution b = resolver.resolve(POD_B, Optional.empty(), List.of(1)).get(1);

    assertThat(a).isEqualTo(new Resolved(4100, 500));
    assertThat(b).isEqualTo(new Resolved(5200, 600));
  }

  @Test
  void resolve_foreignPidsWrittenByTenant_neverResolveIntoAnotherPod() {
    // pod A claims pod B's in-container pid 9, pod B's host pids, and the host's pid 1 process.
    Map<Integer, PidResolution> result =
        resolver.resolve(POD_A, Optional.of(APP_A), List.of(9, 5200, 5201, 4101));

    assertThat(result.values()).containsOnly(Unresolved.of(Reason.NOT_IN_POD));
    assertThat(resolver.resolve(POD_B, Optional.empty(), List.of(7)).get(7))
        .isEqualTo(Unresolved.of(Reason.NOT_IN_POD));
  }

  @Test
  void resolve_invalidAndDuplicatePids_areReportedOncePerPid() {
    List<Integer> pids = new ArrayList<>(Arrays.asList(0, -4, 7, 7, null));

    Map<Integer, PidResolution> result = resolver.resolve(POD_A, Optional.empty(), pids);

    assertThat(result)
        .containsExactly(
            Map.entry(0, Unresolved.of(Reason.INVALID_PID)),
            Map.entry(-4, Unresolved.of(Reason.INVALID_PID)),
            Map.entry(7, new Resolved(4102, 510)));
  }

  @Test
  void resolve_podUidSpelledWithUnderscoresOrUppercase_matches() {
    assertThat(resolver.resolve(POD_A.replace('-', '_'), Optional.empty(), List.of(7)).get(7))
        .isEqualTo(new Resolved(4102, 510));
    assertThat(
            resolver.resolve(POD_A.toUpperCase(Locale.ROOT), Optional.empty(), List.of(7)).get(7))
        .isEqualTo(new Resolved(4102, 510));
  }

  @Test
  void resolve_unparsableUidOrContainerId_matchesNothing() {
    assertThat(resolver.resolve("not-a-uid", Optional.empty(), List.of(7)).get(7))
        .isEqualTo(Unresolved.of(Reason.NOT_IN_POD));
    assertThat(resolver.resolve(POD_A, Optional.of("containerd://xyz"), List.of(7)).get(7))
        .isEqualTo(Unresolved.of(Reason.NOT_IN_POD));
  }

  @Test
  void resolve_withinScanInterval_answersFromIndexWithoutReadingProcfs() {
    resolver.resolve(POD_A, Optional.empty(), List.of(7));
    tree.remove(4102);
    ticker.addAndGet(INTERVAL.toNanos() - 1);

    assertThat(resolver.resolve(POD_A, Optional.empty(), List.of(7)).get(7))
        .isEqualTo(new Resolved(4102, 510));
    assertThat(resolver.lastScan().scans()).isEqualTo(1);
  }

  @Test
  void resolve_processExited_isProcessGoneAfterNextScan() {
    resolver.resolve(POD_A, Optional.empty(), List.of(7));
    tree.remove(4102);
    ticker.addAndGet(INTERVAL.toNanos());

    assertThat(resolver.resolve(POD_A, Optional.empty(), List.of(7)).get(7))
        .isEqualTo(Unresolved.of(Reason.PROCESS_GONE));
    assertThat(resolver.lastScan().scans()).isEqualTo(2);
  }

  @Test
  void resolve_newProcess_isNoticedWithinOneScanInterval() {
    resolver.resolve(POD_B, Optional.empty(), List.of(12));
    tree.process(5202, 700, ProcTree.cgroupfsV1Cgroup(POD_B, APP_B, "besteffort"), 5202, 12);

    ticker.addAndGet(INTERVAL.toNanos() / 2);
    assertThat(resolver.resolve(POD_B, Optional.empty(), List.of(12)).get(12))
        .isEqualTo(Unresolved.of(Reason.NOT_IN_POD));
    ticker.addAndGet(INTERVAL.toNanos() / 2);
    assertThat(resolver.resolve(POD_B, Optional.empty(), List.of(12)).get(12))
        .isEqualTo(new Resolved(5202, 700));
  }

  @Test
  void resolve_pidReusedByAnotherPodsProcess_followsTheNewProcess() {
    assertThat(resolver.resolve(POD_A, Optional.empty(), List.of(7)).get(7))
        .isEqualTo(new Resolved(4102, 510));
    // 4102 exits; the kernel hands the same host pid to a new process of pod B.
    tree.process(4102, 900, ProcTree.cgroupfsV1Cgroup(POD_B, APP_B, "besteffort"), 4102, 7);
    resolver.refresh();

    assertThat(resolver.resolve(POD_A, Optional.empty(), List.of(7)).get(7))
        .isEqualTo(Unresolved.of(Reason.PROCESS_GONE));
    assertThat(resolver.resolve(POD_B, Optional.empty(), List.of(7)).get(7))
        .isEqualTo(new Resolved(4102, 900));
    assertThat(resolver.ownerOf(4102).orElseThrow().podUid()).isEqualTo(POD_B);
    assertThat(resolver.isAlive(4102, 510)).isFalse();
    assertThat(resolver.isAlive(4102, 900)).isTrue();
  }

  @Test
  void refresh_steadyState_readsOnlyStatOfKnownProcesses() throws Exception {
    resolver.refresh();
    assertThat(resolver.lastScan().cacheMisses()).isEqualTo(6);
    // status and cgroup are not read again for a known (pid, start time): deleting them changes
    // nothing, which would be impossible if the scan re-read them.
    for (int pid : new int[] {4100, 4101, 4102, 5200, 5201}) {
      Files.delete(tree.root().resolve(pid + "/status"));
      Files.delete(tree.root().resolve(pid + "/cgroup"));
    }
    ticker.addAndGet(HostPidResolver.CGROUP_SETTLE_NANOS);

    resolver.refresh();

    assertThat(resolver.lastScan().cacheHits()).isEqualTo(6);
    assertThat(resolver.lastScan().cacheMisses()).isZero();
    assertThat(resolver.resolve(POD_B, Optional.empty(), List.of(9)).get(9))
        .isEqualTo(new Resolved(5201, 610));
  }

  @Test
  void refresh_processCaughtBeforeItsCgroupMove_isReadAgainUntilSettled() {
    tree.process(6000, 800, ProcTree.hostCgroup(), 6000, 1);
    resolver.refresh();
    assertThat(resolver.ownerOf(6000)).isEmpty();
    // the runtime moves it into the container's cgroup right after cloning it
    tree.write(6000, "cgroup", systemdCgroup(POD_B, APP_B, "besteffort"));

    ticker.addAndGet(HostPidResolver.CGROUP_SETTLE_NANOS / 2);
    resolver.refresh();

    assertThat(resolver.ownerOf(6000).orElseThrow().podUid()).isEqualTo(POD_B);
  }

  @Test
  void refresh_hostProcessOlderThanSettleTime_isNotReadAgain() {
    resolver.refresh();
    ticker.addAndGet(HostPidResolver.CGROUP_SETTLE_NANOS);
    resolver.refresh();
    tree.write(1, "cgroup", systemdCgroup(POD_B, APP_B, "besteffort"));

    resolver.refresh();

    assertThat(resolver.lastScan().cacheMisses()).isZero();
    assertThat(resolver.ownerOf(1)).isEmpty();
  }

  @Test
  void ownerOf_podProcess_returnsPodContainerAndInnermostPid() {
    assertThat(resolver.ownerOf(4102))
        .contains(new ProcessOwner(4102, 510, POD_A, Optional.of(APP_A), 7));
    assertThat(resolver.ownerOf(5200))
        .contains(new ProcessOwner(5200, 600, POD_B, Optional.of(APP_B), 1));
  }

  @Test
  void ownerOf_hostOrMissingOrInvalidPid_isEmpty() {
    assertThat(resolver.ownerOf(1)).isEmpty();
    assertThat(resolver.ownerOf(31337)).isEmpty();
    assertThat(resolver.ownerOf(0)).isEmpty();
    assertThat(resolver.ownerOf(-1)).isEmpty();
  }

  @Test
  void ownerOf_processStartedSinceLastScan_isReadDirectly() {
    resolver.refresh();
    tree.process(7000, 990, systemdCgroup(POD_A, APP_A, "burstable"), 7000, 3, 1);

    assertThat(resolver.ownerOf(7000))
        .contains(new ProcessOwner(7000, 990, POD_A, Optional.of(APP_A), 1));
    assertThat(resolver.lastScan().scans()).isEqualTo(1);
  }

  @Test
  void isAlive_checksPidAndStartTime() {
    assertThat(resolver.isAlive(4100, 500)).isTrue();
    assertThat(resolver.isAlive(4100, 501)).isFalse();
    tree.write(4100, "stat", ProcTree.stat(4100, "zombie", 'Z', 500));
    assertThat(resolver.isAlive(4100, 500)).isFalse();
    tree.remove(4100);
    assertThat(resolver.isAlive(4100, 500)).isFalse();
    assertThat(resolver.isAlive(0, 0)).isFalse();
  }

  @Test
  void processesOf_podAndContainer_listsTheirProcesses() {
    assertThat(resolver.processesOf(POD_A, Optional.empty()))
        .extracting(ProcessInfo::hostPid)
        .containsExactlyInAnyOrder(4100, 4101, 4102);
    assertThat(resolver.processesOf(POD_A, Optional.of(APP_A)))
        .extracting(ProcessInfo::hostPid)
        .containsExactlyInAnyOrder(4100, 4102);
    assertThat(resolver.processesOf("nope", Optional.empty())).isEmpty();
  }

  @Test
  void lastScan_countsWhatTheScanSaw() {
    tree.write(8000, "stat", ProcTree.stat(8000, "x", 'S', 5)); // no status: exits mid-read
    tree.process(8001, 5, "0::/kubepods/oops\n", 8001);
    tree.write(8002, "stat", "garbage");

    resolver.refresh();

    ScanStats stats = resolver.lastScan();
    assertThat(stats.processes()).isEqualTo(7);
    assertThat(stats.podProcesses()).isEqualTo(5);
    assertThat(stats.unknownCgroup()).isEqualTo(1);
    assertThat(stats.gone()).isEqualTo(1);
    assertThat(stats.unusable()).isEqualTo(1);
  }

  @Test
  void refresh_bigNodeScannedInParallel_indexesEveryProcessOnce(@TempDir Path big) {
    int containers = 100;
    int perContainer = 10;
    ProcTree node = ProcTree.node(big, 200, containers, perContainer);
    HostPidResolver bigResolver =
        new HostPidResolver(new ProcFs(node.root()), INTERVAL, ticker::get);

    bigResolver.refresh();

    ScanStats cold = bigResolver.lastScan();
    assertThat(cold.processes()).isEqualTo(200 + containers * perContainer);
    assertThat(cold.processes()).isGreaterThanOrEqualTo(HostPidResolver.PARALLEL_SCAN_THRESHOLD);
    assertThat(cold.podProcesses()).isEqualTo(containers * perContainer);
    assertThat(cold.cacheMisses()).isEqualTo(cold.processes());
    for (int c = 0; c < containers; c += 7) {
      Map<Integer, PidResolution> result =
          bigResolver.resolve(ProcTree.podUid(c / 2), Optional.of(containerId(c)), List.of(1, 10));
      int firstHostPid = 1000 + c * perContainer;
      assertThat(result)
          .containsExactly(
              Map.entry(1, new Resolved(firstHostPid, 5000L + firstHostPid)),
              Map.entry(10, new Resolved(firstHostPid + 9, 5000L + firstHostPid + 9)));
    }
    ticker.addAndGet(HostPidResolver.CGROUP_SETTLE_NANOS);
    bigResolver.refresh();
    assertThat(bigResolver.lastScan().cacheHits()).isEqualTo(cold.processes());
  }

  @Test
  void resolve_procRootMissing_throwsProcFsUnavailable() {
    HostPidResolver broken =
        new HostPidResolver(new ProcFs(dir.resolve("absent")), INTERVAL, ticker::get);

    assertThatThrownBy(() -> broken.resolve(POD_A, Optional.empty(), List.of(1)))
        .isInstanceOf(ProcFsUnavailableException.class)
        .hasMessageContaining("absent");
  }

  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void resolve_concurrentCallersWhileScanning_allGetConsistentAnswers() throws Exception {
    HostPidResolver shared =
        new HostPidResolver(new ProcFs(tree.root()), Duration.ZERO, ticker::get);
    ConcurrentLinkedQueue<Object> wrong = new ConcurrentLinkedQueue<>();
    AtomicBoolean stop = new AtomicBoolean();
    CountDownLatch done = new CountDownLatch(4);
    List<Thread> threads = new ArrayList<>();
    for (int t = 0; t < 4; t++) {
      threads.add(
          Thread.ofPlatform()
              .start(
                  () -> {
                    try {
                      for (int i = 0; i < 300 && !stop.get(); i++) {
                        Map<Integer, PidResolution> a =
                            shared.resolve(POD_A, Optional.of(APP_A), List.of(1, 7));
                        Map<Integer, PidResolution> b =
                            shared.resolve(POD_B, Optional.empty(), List.of(1, 9));
                        if (!a.equals(
                                Map.of(1, new Resolved(4100, 500), 7, new Resolved(4102, 510)))
                            || !b.equals(
                                Map.of(1, new Resolved(5200, 600), 9, new Resolved(5201, 610)))) {
                          wrong.add(List.of(a, b));
                        }
                        if (shared.ownerOf(5201).isEmpty()) {
                          wrong.add("ownerOf(5201) empty");
                        }
                      }
                    } catch (RuntimeException e) {
                      wrong.add(e);
                    } finally {
                      done.countDown();
                    }
                  }));
    }
    // a scan is due on every call (interval 0), so scans and reads overlap all the time
    for (int i = 0; i < 100 && done.getCount() > 0; i++) {
      shared.refresh();
    }
    assertThat(done.await(50, TimeUnit.SECONDS)).isTrue();
    stop.set(true);
    for (Thread thread : threads) {
      thread.join();
    }

    assertThat(wrong).isEmpty();
    assertThat(shared.lastScan().scans()).isGreaterThan(1);
  }
}

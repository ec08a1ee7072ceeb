package io.vgpu.hostpid;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.vgpu.hostpid.testing.PidNamespaces;
import io.vgpu.hostpid.testing.ProcTree;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestReporter;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Resolution of real processes in real PID namespaces ({@code unshare}), read through the real
 * {@code /proc}. Needs root (CI runs as root); skipped with the reason elsewhere.
 *
 * <p>Pod identity is made real too: each namespace's process is moved into its own kubelet-shaped
 * cgroup v1 directory ({@code kubepods/besteffort/pod<uid>/<id>}). Where no v1 hierarchy accepts
 * that, the pod tests fall back to an overlay procfs that links the real {@code status} and {@code
 * stat} and supplies a fake {@code cgroup}, and report so.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RealNamespaceTest {

  private static Optional<String> unavailable;

  @TempDir Path overlayDir;
  private PidNamespaces namespaces;

  @BeforeAll
  static void probe() {
    unavailable = PidNamespaces.unavailableReason();
  }

  @BeforeEach
  void setUp() {
    assumeTrue(unavailable.isEmpty(), () -> "skipped: " + unavailable.orElse(""));
    namespaces = new PidNamespaces();
  }

  @AfterEach
  void tearDown() {
    if (namespaces != null) {
      namespaces.close();
    }
  }

  @Test
  void read_processInOneNewNamespace_hasNsPidEndingInOne() throws Exception {
    int hostPid = namespaces.start(1).getFirst();

    ProcessInfo info = ProcFs.host().readProcess(hostPid).orElseThrow();

    assertThat(info.nsPids()).containsExactly(hostPid, 1);
    assertThat(info.innermostPid()).isEqualTo(1);
    assertThat(hostPid).isNotEqualTo(1);
  }

  @Test
  void read_nestedNamespaces_haveThreeLevelNsPid() throws Exception {
    List<Integer> chain = namespaces.start(2);
    int middle = chain.get(0);
    int inner = chain.get(1);

    ProcFs procFs = ProcFs.host();

    assertThat(procFs.readProcess(middle).orElseThrow().nsPids()).containsExactly(middle, 1);
    assertThat(procFs.readProcess(inner).orElseThrow().nsPids()).containsExactly(inner, 2, 1);
  }

  @Test
  void resolve_twoPodsEachWithPid1_resolveToTheirOwnHostPids(TestReporter reporter)
      throws Exception {
    String podA = ProcTree.podUid(1001);
    String podB = ProcTree.podUid(1002);
    String ctrA = ProcTree.containerId(1001);
    String ctrB = ProcTree.containerId(1002);
    int hostA = namespaces.start(1).getFirst();
    int hostB = namespaces.start(1).getFirst();
    ProcFs procFs =
        podProcFs(reporter, Map.of(hostA, new Pod(podA, ctrA), hostB, new Pod(podB, ctrB)));
    HostPidResolver resolver = new HostPidResolver(procFs, Duration.ofMinutes(1), System::nanoTime);

    PidResolution a = resolver.resolve(podA, Optional.empty(), List.of(1)).get(1);
    PidResolution b =
        resolver.resolve(podB, Optional.of("containerd://" + ctrB), List.of(1)).get(1);

    long startA = ProcFs.host().startTimeTicks(hostA).orElseThrow();
    long startB = ProcFs.host().startTimeTicks(hostB).orElseThrow();
    assertThat(a).isEqualTo(new Resolved(hostA, startA));
    assertThat(b).isEqualTo(new Resolved(hostB, startB));
    assertThat(hostA).isNotEqualTo(hostB);
    assertThat(resolver.ownerOf(hostB))
        .contains(new ProcessOwner(hostB, startB, podB, Optional.of(ctrB), 1));
    // a tenant of pod A writing pod B's host pid (or its own) into a slot gets nothing
    assertThat(resolver.resolve(podA, Optional.empty(), List.of(hostB, hostA)).values())
        .containsOnly(Unresolved.of(Unresolved.Reason.NOT_IN_POD));
  }

  @Test
  void resolve_podProcessKilled_isGoneAfterRefresh(TestReporter reporter) throws Exception {
    String pod = ProcTree.podUid(1003);
    String ctr = ProcTree.containerId(1003);
    List<Integer> chain = namespaces.start(1);
    int hostPid = chain.getFirst();
    ProcFs procFs = podProcFs(reporter, Map.of(hostPid, new Pod(pod, ctr)));
    HostPidResolver resolver = new HostPidResolver(procFs, Duration.ofMinutes(1), System::nanoTime);
    Resolved before = (Resolved) resolver.resolve(pod, Optional.empty(), List.of(1)).get(1);
    assertThat(resolver.isAlive(before.hostPid(), before.startTimeTicks())).isTrue();

    namespaces.kill(chain);
    resolver.refresh();

    assertThat(resolver.resolve(pod, Optional.empty(), List.of(1)).get(1))
        .isEqualTo(Unresolved.of(Unresolved.Reason.PROCESS_GONE));
    assertThat(resolver.isAlive(before.hostPid(), before.startTimeTicks())).isFalse();
  }

  @Test
  void resolve_nestedNamespacesInOnePod_resolveByInnermostPidOrAreAmbiguous(TestReporter reporter)
      throws Exception {
    String pod = ProcTree.podUid(1004);
    String ctr = ProcTree.containerId(1004);
    List<Integer> chain = namespaces.start(2);
    int middle = chain.get(0);
    int inner = chain.get(1);
    long innerStart = ProcFs.host().startTimeTicks(inner).orElseThrow();

    ProcFs onlyInner = podProcFs(reporter, Map.of(inner, new Pod(pod, ctr)));
    HostPidResolver resolver =
        new HostPidResolver(onlyInner, Duration.ofMinutes(1), System::nanoTime);
    assertThat(resolver.resolve(pod, Optional.empty(), List.of(1, 2)))
        .containsExactly(
            Map.entry(1, new Resolved(inner, innerStart)),
            Map.entry(2, Unresolved.of(Unresolved.Reason.NOT_IN_POD)));

    // both namespace inits are pid 1 to themselves: the resolver refuses to pick
    ProcFs both = podProcFs(reporter, Map.of(middle, new Pod(pod, ctr), inner, new Pod(pod, ctr)));
    HostPidResolver second = new HostPidResolver(both, Duration.ofMinutes(1), System::nanoTime);
    assertThat(second.resolve(pod, Optional.empty(), List.of(1)).get(1))
        .isEqualTo(Unresolved.of(Unresolved.Reason.AMBIGUOUS));
  }

  private static void report(TestReporter reporter, String key, String value) {
    reporter.publishEntry(key, value);
    System.out.println(key + ": " + value);
  }

  /** The fallback itself must work: real status/stat through symlinks, fake cgroup files. */
  @Test
  void resolve_overlayProcfsOverRealProcesses_resolvesLikeTheRealOne(TestReporter reporter)
      throws Exception {
    String podA = ProcTree.podUid(1005);
    String podB = ProcTree.podUid(1006);
    int hostA = namespaces.start(1).getFirst();
    int hostB = namespaces.start(1).getFirst();
    overlay = true;
    ProcFs procFs =
        podProcFs(
            reporter,
            Map.of(
                hostA, new Pod(podA, ProcTree.containerId(1005)),
                hostB, new Pod(podB, ProcTree.containerId(1006))));
    HostPidResolver resolver = new HostPidResolver(procFs, Duration.ofMinutes(1), System::nanoTime);

    assertThat(resolver.resolve(podA, Optional.empty(), List.of(1)).get(1))
        .isEqualTo(new Resolved(hostA, ProcFs.host().startTimeTicks(hostA).orElseThrow()));
    assertThat(resolver.resolve(podB, Optional.empty(), List.of(1)).get(1))
        .isEqualTo(new Resolved(hostB, ProcFs.host().startTimeTicks(hostB).orElseThrow()));
  }

  private record Pod(String uid, String containerId) {}

  private boolean overlay;

  /**
   * Puts each process into its pod's cgroup and returns the real procfs; or, when no cgroup v1
   * hierarchy takes it, an overlay procfs with the same processes and a fake cgroup file each.
   */
  private ProcFs podProcFs(TestReporter reporter, Map<Integer, Pod> pods) throws IOException {
    if (!overlay) {
      boolean all = true;
      for (Map.Entry<Integer, Pod> e : pods.entrySet()) {
        Optional<String> hierarchy =
            namespaces.placeInPod(e.getKey(), e.getValue().uid(), e.getValue().containerId());
        all &= hierarchy.isPresent();
        hierarchy.ifPresent(h -> report(reporter, "cgroup-mode", "real cgroup v1 hierarchy " + h));
      }
      if (all) {
        return ProcFs.host();
      }
      overlay = true;
    }
    report(
        reporter,
        "cgroup-mode",
        "fallback: no cgroup v1 hierarchy accepted a kubepods directory; using an overlay procfs"
            + " (real status/stat via symlinks, fake cgroup files)");
    Path root = overlayDir.resolve("proc" + System.nanoTime());
    for (Map.Entry<Integer, Pod> e : pods.entrySet()) {
      int pid = e.getKey();
      Path dir = Files.createDirectories(root.resolve(Integer.toString(pid)));
      Files.createSymbolicLink(dir.resolve("status"), ProcFs.host().path(pid, "status"));
      Files.createSymbolicLink(dir.resolve("stat"), ProcFs.host().path(pid, "stat"));
      Files.writeString(
          dir.resolve("cgroup"),
          ProcTree.cgroupfsV1Cgroup(e.getValue().uid(), e.getValue().containerId(), "besteffort"));
    }
    return new ProcFs(root);
  }
}

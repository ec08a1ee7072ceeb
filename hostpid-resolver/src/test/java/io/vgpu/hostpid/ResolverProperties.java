package io.vgpu.hostpid;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.hostpid.testing.ProcTree;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/** Model-based properties of resolution over random process trees written to disk. */
class ResolverProperties {

  /**
   * Random node: processes spread over 3 pods x 2 containers and the host, with random (often
   * colliding) innermost pids. Whatever pids a tenant asks about, a resolution lands only on a
   * process of the asking pod (and container), with the asked innermost pid, and exactly when that
   * match is unique.
   */
  @Property(tries = 40)
  void resolve_randomNode_matchesTheModelAndNeverCrossesPods(
      @ForAll @Size(min = 1, max = 40) List<@IntRange(min = 0, max = 6) Integer> placements,
      @ForAll @Size(min = 1, max = 40) List<@IntRange(min = 1, max = 5) Integer> innerPids,
      @ForAll @Size(max = 12) List<@IntRange(min = -1, max = 7) Integer> asked)
      throws IOException {
    Path root = Files.createTempDirectory("hostpid-prop");
    try {
      ProcTree tree = ProcTree.at(root);
      List<int[]> model = new ArrayList<>(); // {hostPid, placement, innermost}
      for (int i = 0; i < placements.size(); i++) {
        int hostPid = 1000 + i;
        int placement = placements.get(i);
        int inner = innerPids.get(i % innerPids.size());
        String cgroup =
            placement == 6
                ? ProcTree.hostCgroup()
                : ProcTree.systemdCgroup(
                    ProcTree.podUid(placement / 2), ProcTree.containerId(placement), "burstable");
        int[] chain = placement == 6 ? new int[] {hostPid} : new int[] {hostPid, inner};
        tree.process(hostPid, 10L * hostPid, cgroup, chain);
        model.add(new int[] {hostPid, placement, placement == 6 ? hostPid : inner});
      }
      HostPidResolver resolver =
          new HostPidResolver(new ProcFs(root), Duration.ofHours(1), System::nanoTime);

      for (int pod = 0; pod < 3; pod++) {
        for (int container = -1; container < 2; container++) {
          int p = pod;
          int c = container;
          Optional<String> ctr =
              c < 0 ? Optional.empty() : Optional.of(ProcTree.containerId(2 * pod + c));
          Map<Integer, PidResolution> result = resolver.resolve(ProcTree.podUid(pod), ctr, asked);
          for (Map.Entry<Integer, PidResolution> e : result.entrySet()) {
            int pid = e.getKey();
            List<int[]> matches =
                model.stream()
                    .filter(m -> m[1] != 6 && m[1] / 2 == p && (c < 0 || m[1] == 2 * p + c))
                    .filter(m -> m[2] == pid)
                    .toList();
            PidResolution expected =
                pid <= 0
                    ? Unresolved.of(Unresolved.Reason.INVALID_PID)
                    : matches.size() == 1
                        ? new Resolved(matches.getFirst()[0], 10L * matches.getFirst()[0])
                        : Unresolved.of(
                            matches.isEmpty()
                                ? Unresolved.Reason.NOT_IN_POD
                                : Unresolved.Reason.AMBIGUOUS);
            assertThat(e.getValue()).as("pod %d ctr %d pid %d", p, c, pid).isEqualTo(expected);
            if (e.getValue() instanceof Resolved resolved) {
              ProcessOwner owner = resolver.ownerOf(resolved.hostPid()).orElseThrow();
              assertThat(owner.podUid()).isEqualTo(ProcTree.podUid(p));
              assertThat(owner.innermostPid()).isEqualTo(pid);
            }
          }
        }
      }
    } finally {
      deleteTree(root);
    }
  }

  /** Any bytes in any of a process's files give a ProcessRead value, never an exception. */
  @Property(tries = 60)
  void read_arbitraryBytesInProcessFiles_neverThrows(
      @ForAll @Size(max = 2000) byte[] stat,
      @ForAll @Size(max = 2000) byte[] status,
      @ForAll @Size(max = 2000) byte[] cgroup,
      @ForAll @IntRange(min = 0, max = 2) int validPrefix)
      throws IOException {
    Path root = Files.createTempDirectory("hostpid-bytes");
    try {
      Path dir = Files.createDirectories(root.resolve("42"));
      byte[] validStat = ProcTree.stat(42, "x", 'S', 7).getBytes(StandardCharsets.ISO_8859_1);
      Files.write(dir.resolve("stat"), validPrefix == 0 ? validStat : stat);
      Files.write(dir.resolve("status"), status);
      Files.write(dir.resolve("cgroup"), cgroup);

      ProcessRead read = new ProcFs(root).read(42);
      HostPidResolver resolver = new HostPidResolver(new ProcFs(root));
      resolver.refresh();

      assertThat(read.hostPid()).isEqualTo(42);
      assertThat(resolver.lastScan().scans()).isEqualTo(1);
      assertThat(IntStream.of(new ProcFs(root).listPids())).containsExactly(42);
    } finally {
      deleteTree(root);
    }
  }

  private static void deleteTree(Path root) throws IOException {
    try (Stream<Path> files = Files.walk(root)) {
      for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    }
  }
}

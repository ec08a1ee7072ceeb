package io.vgpu.hostpid.bench;

import io.vgpu.hostpid.HostPidResolver;
import io.vgpu.hostpid.PidResolution;
import io.vgpu.hostpid.ProcFs;
import io.vgpu.hostpid.testing.ProcTree;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Steady-state resolution with a warm cache: 100 containers (50 pods: app + pause) and 1 000 host
 * processes, within the scan interval (no file is read). Goal: under 1 ms per call.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class ResolveBenchmark {

  static final int HOST_PROCESSES = 200;
  static final int CONTAINERS = 100;
  static final int PROCESSES_PER_CONTAINER = 8;

  private Path root;
  private HostPidResolver resolver;
  private String[] podUids;
  private List<Optional<String>> containerIds;
  private List<Integer> slotPids;
  private int next;

  @Setup(Level.Trial)
  public void writeTree() throws IOException {
    root = BenchTrees.createDirectory("hostpid-resolve-bench");
    ProcTree.node(root, HOST_PROCESSES, CONTAINERS, PROCESSES_PER_CONTAINER);
    resolver = new HostPidResolver(new ProcFs(root), Duration.ofHours(1), System::nanoTime);
    resolver.refresh();
    podUids = new String[CONTAINERS];
    List<Optional<String>> ids = new java.util.ArrayList<>();
    for (int c = 0; c < CONTAINERS; c++) {
      podUids[c] = ProcTree.podUid(c / 2);
      ids.add(Optional.of("containerd://" + ProcTree.containerId(c)));
    }
    containerIds = List.copyOf(ids);
    slotPids = IntStream.rangeClosed(1, PROCESSES_PER_CONTAINER).boxed().toList();
    Map<Integer, PidResolution> probe =
        resolver.resolve(podUids[0], containerIds.getFirst(), slotPids);
    if (!probe.values().stream().allMatch(PidResolution::isResolved)) {
      throw new IllegalStateException("fixture does not resolve: " + probe);
    }
  }

  @TearDown(Level.Trial)
  public void deleteTree() throws IOException {
    try (Stream<Path> files = Files.walk(root)) {
      for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    }
  }

  /** One call: one container's 8 slot pids. */
  @Benchmark
  public Map<Integer, PidResolution> resolveOneContainer() {
    int c = next;
    next = (c + 1) % CONTAINERS;
    return resolver.resolve(podUids[c], containerIds.get(c), slotPids);
  }

  /** One scrape's worth: all 100 containers, 800 pids. */
  @Benchmark
  public void resolveAllContainers(Blackhole blackhole) {
    for (int c = 0; c < CONTAINERS; c++) {
      blackhole.consume(resolver.resolve(podUids[c], containerIds.get(c), slotPids));
    }
  }

  /** Reverse lookup of one host pid, as for each NVML process. */
  @Benchmark
  public Object ownerOf() {
    int c = next;
    next = (c + 1) % CONTAINERS;
    return resolver.ownerOf(1000 + c * PROCESSES_PER_CONTAINER);
  }
}

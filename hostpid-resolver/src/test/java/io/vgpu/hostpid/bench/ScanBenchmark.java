package io.vgpu.hostpid.bench;

import io.vgpu.hostpid.HostPidResolver;
import io.vgpu.hostpid.ProcFs;
import io.vgpu.hostpid.testing.ProcTree;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Scanning a 5 000-process procfs tree: cold (empty cache: stat, status, cgroup and stat again per
 * process) and warm (cache full: one stat read per process). Goal: cold under 100 ms.
 *
 * <p>The tree is 1 000 host daemons plus 400 containers x 10 processes, half under the systemd
 * driver (cgroup v2) and half under cgroupfs (cgroup v1, 8 hierarchies), written to a tmpfs ({@code
 * /dev/shm}) when there is one, because procfs too is served from memory. {@code checked=true} is
 * what a fixture root gets: every file is stat'ed before it is opened (a FIFO must not block);
 * {@code checked=false} reads like the kernel's procfs is read in production ({@link
 * ProcFs#trustedTree}).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
public class ScanBenchmark {

  static final int HOST_PROCESSES = 1_000;
  static final int CONTAINERS = 400;
  static final int PROCESSES_PER_CONTAINER = 10;

  @Param({"false", "true"})
  public boolean checked;

  private Path root;
  private ProcFs procFs;
  private HostPidResolver warm;

  @Setup(Level.Trial)
  public void writeTree() throws IOException {
    root = BenchTrees.createDirectory("hostpid-scan-bench");
    ProcTree.node(root, HOST_PROCESSES, CONTAINERS, PROCESSES_PER_CONTAINER);
    procFs = checked ? new ProcFs(root) : ProcFs.trustedTree(root);
    warm = new HostPidResolver(procFs, Duration.ofHours(1), System::nanoTime);
    warm.refresh();
    warm.refresh(); // second scan: settle the host daemons' cgroups
    int processes = warm.lastScan().processes();
    if (processes != HOST_PROCESSES + CONTAINERS * PROCESSES_PER_CONTAINER) {
      throw new IllegalStateException("tree has " + processes + " processes");
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

  /** A fresh resolver's first scan of 5 000 processes. */
  @Benchmark
  public int coldScan5000() {
    HostPidResolver cold = new HostPidResolver(procFs, Duration.ofHours(1), System::nanoTime);
    cold.refresh();
    return cold.lastScan().processes();
  }

  /** A later scan of the same 5 000 processes: one stat read each, the rest from the cache. */
  @Benchmark
  public int warmRescan5000() {
    warm.refresh();
    return warm.lastScan().cacheHits();
  }
}

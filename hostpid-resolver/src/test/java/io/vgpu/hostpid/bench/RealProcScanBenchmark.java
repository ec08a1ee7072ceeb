package io.vgpu.hostpid.bench;

import io.vgpu.hostpid.HostPidResolver;
import io.vgpu.hostpid.ProcFs;
import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
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
 * Scanning the machine's real {@code /proc} after starting {@code extraProcesses} idle processes
 * ({@code sleep}), so the scan sees at least that many: what the exporter pays on a busy node. The
 * sleeps end by themselves after 5 minutes should the teardown not run.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
public class RealProcScanBenchmark {

  @Param({"5000"})
  public int extraProcesses;

  private Process spawner;
  private HostPidResolver warm;

  @Setup(Level.Trial)
  public void startProcesses() throws IOException, InterruptedException {
    spawner =
        new ProcessBuilder(
                "sh", "-c", "for i in $(seq " + extraProcesses + "); do sleep 300 & done; wait")
            .start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    while (spawner.descendants().count() < extraProcesses) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("could not start " + extraProcesses + " processes");
      }
      Thread.sleep(100);
    }
    warm = new HostPidResolver(ProcFs.host(), Duration.ofHours(1), System::nanoTime);
    warm.refresh();
  }

  @TearDown(Level.Trial)
  public void stopProcesses() throws InterruptedException {
    // the shell waits for its sleeps, so it reaps them as they die; then it exits itself
    spawner.descendants().forEach(ProcessHandle::destroyForcibly);
    spawner.waitFor(60, TimeUnit.SECONDS);
    spawner.destroyForcibly();
  }

  /** A fresh resolver's first scan of the real /proc. */
  @Benchmark
  public int coldScanRealProc() {
    HostPidResolver cold =
        new HostPidResolver(ProcFs.host(), Duration.ofHours(1), System::nanoTime);
    cold.refresh();
    return cold.lastScan().processes();
  }

  /** A later scan: one stat read per known process. */
  @Benchmark
  public int warmRescanRealProc() {
    warm.refresh();
    return warm.lastScan().processes();
  }
}

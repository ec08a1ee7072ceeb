package io.vgpu.regioncodec.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/**
 * Thread CPU time per snapshot for the shapes of {@link SnapshotBenchmark}. On a shared, loaded
 * machine JMH's wall-clock scores include time spent waiting for a core; CPU time does not, so the
 * README reports both. Not a replacement for JMH (no forking, no blackhole discipline beyond a
 * checksum).
 *
 * <p>Run: {@code java -cp <bench.sh classpath> io.vgpu.regioncodec.bench.SnapshotCpuTime}.
 */
public final class SnapshotCpuTime {
  private SnapshotCpuTime() {}

  public static void main(String[] args) throws Exception {
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    for (String shape : new String[] {"16x8", "1024x16", "0x8"}) {
      SnapshotBenchmark bench = new SnapshotBenchmark();
      bench.shape = shape;
      bench.setUp();
      int iterations = shape.startsWith("1024") ? 2_000 : 200_000;
      long checksum = 0;
      for (int i = 0; i < iterations; i++) { // warm-up
        checksum += bench.snapshot().processes().size();
      }
      long cpu0 = threads.getCurrentThreadCpuTime();
      long wall0 = System.nanoTime();
      for (int i = 0; i < iterations; i++) {
        checksum += bench.snapshot().processes().size();
      }
      long cpu = threads.getCurrentThreadCpuTime() - cpu0;
      long wall = System.nanoTime() - wall0;
      bench.tearDown();
      System.out.printf(
          "%-8s cpu %10.2f us/op   wall %10.2f us/op   (checksum %d)%n",
          shape, cpu / 1e3 / iterations, wall / 1e3 / iterations, checksum);
    }
  }
}

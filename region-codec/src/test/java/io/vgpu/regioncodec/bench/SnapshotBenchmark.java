package io.vgpu.regioncodec.bench;

import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.ProcessSlot;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSnapshot;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
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
 * Cost of one {@link RegionFile#snapshot()} on a mapped v1.2 file: the scrape path. Goals on the
 * 2-core CI machine: 16 live processes on 8 devices under 20 µs; all 1024 slots live on 16 devices
 * under 2 ms; allocation only for the result objects (check with {@code -prof gc}). {@code empty}
 * (proc_num 0) shows the fixed cost: size check, header, 8 device uuids.
 *
 * <p>Run: {@code region-codec/bench.sh -f1 -wi 2 -i 3 -w 1s -r 1s -prof gc SnapshotBenchmark}.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class SnapshotBenchmark {
  /** {@code processes x devices}. */
  @Param({"16x8", "1024x16", "0x8"})
  public String shape;

  private Path dir;
  private RegionFile file;

  @Setup(Level.Trial)
  public void setUp() throws IOException {
    String[] parts = shape.split("x", -1);
    int processes = Integer.parseInt(parts[0]);
    int devices = Integer.parseInt(parts[1]);
    RegionSpec.Builder spec = RegionSpec.builder(Layout.V1_2);
    for (int d = 0; d < devices; d++) {
      spec.device("GPU-%08x-1111-2222-3333-444444444444".formatted(d), 16L << 30, 50);
    }
    for (int p = 0; p < processes; p++) {
      DeviceUsage[] usage = new DeviceUsage[devices];
      for (int d = 0; d < devices; d++) {
        usage[d] = new DeviceUsage(d, 300L * p, 0, 700L * p, 1000L * p, 900L * p, p % 100);
      }
      spec.slot(100 + p, 20_000 + p, ProcessSlot.STATUS_RUNNING, usage);
    }
    dir = Files.createTempDirectory("snapshot-bench");
    Path path = dir.resolve("region.cache");
    RegionWriter.create(path, spec.build());
    file = RegionFile.openReadOnly(path);
    RegionSnapshot check = file.snapshot();
    if (check.processes().size() != processes || check.deviceCount() != devices) {
      throw new IllegalStateException("fixture did not read back: " + check.processes().size());
    }
  }

  @TearDown(Level.Trial)
  public void tearDown() throws IOException {
    file.close();
    try (var paths = Files.list(dir)) {
      for (Path p : paths.toList()) {
        Files.delete(p);
      }
    }
    Files.delete(dir);
  }

  @Benchmark
  public RegionSnapshot snapshot() {
    return file.snapshot();
  }
}

package io.vgpu.exporter.bench;

import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.testing.TestNode;
import io.vgpu.exporter.testing.TestProcfs;
import io.vgpu.exporter.testing.TestRegions;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/**
 * The benchmark node: containers x devices x processes v1.2 regions with the extension block, as
 * {@link ScrapeBenchmark} scrapes them and {@code exporter/bench/footprint.sh} serves them.
 *
 * <pre>
 * java -cp exporter/target/test-classes:exporter/target/classes:$CP \
 *   io.vgpu.exporter.bench.BenchNode DIR [CONTAINERS [DEVICES [PROCESSES [sparse]]]]   (100 8 4)
 * </pre>
 *
 * With {@code -Dbench.procfs=PROC} it also writes a procfs fixture there: every slot's process
 * (host pid 10 000 + its index, pid 100 + p in its container) in its pod's cgroup, mapping its
 * container's region, so the exporter served with {@code --path.procfs=PROC} judges every slot
 * ALIVE and its evidence pass reads one {@code maps} per process, as on a real node.
 */
public final class BenchNode {
  private BenchNode() {}

  /**
   * What else a CUDA process maps ({@code -Dbench.maps-bytes}, default 100 KB: a PyTorch process
   * maps ~1 000-3 000 lines of libraries and anonymous memory), so the evidence pass reads as much
   * as on a real node.
   */
  private static final String MAPS_FILLER =
      mapsFiller(Integer.getInteger("bench.maps-bytes", 100_000));

  private static String mapsFiller(int bytes) {
    StringBuilder b = new StringBuilder(bytes + 128);
    for (long line = 0; b.length() < bytes; line++) {
      b.append(
          "%012x-%012x r-xp 00000000 08:01 %d                 /usr/lib/x86_64-linux-gnu/libtorch_part%d.so%n"
              .formatted(
                  0x7f4000000000L + line * 0x1000,
                  0x7f4000001000L + line * 0x1000,
                  5000 + line,
                  line));
    }
    return b.toString();
  }

  /** Writes the regions under {@code root} and returns the pods that own them. */
  public static List<PodMeta> write(Path root, int containers, int devices, int processes)
      throws IOException {
    return write(root, containers, devices, processes, false);
  }

  /**
   * As {@link #write(Path, int, int, int)}; {@code sparse} writes only the regions' non-zero 4 KiB
   * blocks (as libvgpu's sized-then-written files are), so 10 000 directories need megabytes of
   * tmpfs rather than 20 GiB.
   */
  public static List<PodMeta> write(
      Path root, int containers, int devices, int processes, boolean sparse) throws IOException {
    List<PodMeta> pods = new ArrayList<>();
    for (int i = 0; i < containers; i++) {
      String uid =
          UUID.nameUUIDFromBytes(("bench" + i).getBytes(StandardCharsets.UTF_8)).toString();
      int[] pids = new int[processes];
      for (int p = 0; p < processes; p++) {
        pids[p] = 100 + p;
      }
      RegionSpec spec = TestRegions.spec(devices, 8192, 50, pids, 256, 10, true);
      if (sparse) {
        Path dir = Files.createDirectories(root.resolve(uid + "_main"));
        TestRegions.writeSparse(dir.resolve("r.cache"), RegionWriter.encode(spec));
      } else {
        TestRegions.write(root, uid, "main", "r.cache", spec);
      }
      String procfs = System.getProperty("bench.procfs");
      if (procfs != null) {
        Path region = root.resolve(uid + "_main").resolve("r.cache");
        for (int p = 0; p < processes; p++) {
          int hostPid = 10_000 + i * processes + p;
          TestProcfs.podProcess(Path.of(procfs), hostPid, pids[p], uid, region);
          Files.writeString(
              Path.of(procfs, Integer.toString(hostPid), "maps"),
              MAPS_FILLER,
              java.nio.file.StandardOpenOption.APPEND);
        }
      }
      pods.add(TestNode.pod(uid, "ns" + (i % 10), "pod-" + i, "Running", "main"));
    }
    return pods;
  }

  public static void main(String[] args) throws IOException {
    if (args.length < 1) {
      System.err.println("usage: BenchNode DIR [CONTAINERS [DEVICES [PROCESSES [sparse]]]]");
      System.exit(2);
    }
    int containers = args.length > 1 ? Integer.parseInt(args[1]) : ScrapeBenchmark.CONTAINERS;
    int devices = args.length > 2 ? Integer.parseInt(args[2]) : ScrapeBenchmark.DEVICES;
    int processes = args.length > 3 ? Integer.parseInt(args[3]) : ScrapeBenchmark.PROCESSES;
    boolean sparse = args.length > 4 && args[4].equals("sparse");
    write(Path.of(args[0]), containers, devices, processes, sparse);
    System.out.printf(
        "%s: %d containers x %d devices x %d processes%n", args[0], containers, devices, processes);
  }
}

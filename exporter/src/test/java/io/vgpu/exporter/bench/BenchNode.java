package io.vgpu.exporter.bench;

import io.vgpu.exporter.k8s.PodMeta;
import io.vgpu.exporter.testing.TestNode;
import io.vgpu.exporter.testing.TestRegions;
import io.vgpu.hostpid.testing.ProcEntry;
import io.vgpu.hostpid.testing.ProcTree;
import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.ExtensionDevice;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionExtension;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
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
 * <p>{@code busy} as the fifth argument, on a node written before, does not write a node but keeps
 * its regions moving as if every process launched kernels ({@link #keepBusy}).
 *
 * <p>With {@code -Dbench.procfs=PROC} it also writes a procfs fixture there: every slot's process
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
          ProcEntry.in(ProcTree.at(Path.of(procfs)), hostPid, pids[p])
              .pod(uid)
              .mapsRegion(region)
              .write();
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

  /**
   * The regions of a node where every process is busy, at tick {@code tick}: each process's memory
   * use, the last kernel time, and every limiter and OOM counter of the extension block move from
   * one tick to the next, as libvgpu moves them on a node whose every GPU process launches kernels
   * (the worst case for a page that keeps unchanged families' bytes: only limits, identities and
   * judgments stay).
   */
  static RegionSpec busySpec(int devices, int[] pids, long tick) {
    RegionSpec.Builder b = RegionSpec.builder(Layout.V1_2);
    List<ExtensionDevice> ext = new ArrayList<>();
    for (int d = 0; d < devices; d++) {
      b.device(TestRegions.uuid(d), 8192 * TestRegions.MIB, 50);
      ext.add(
          new ExtensionDevice(
              d,
              3 + tick,
              (3 + tick) * TestRegions.MIB,
              2_500_000_000L + tick * 7_000_000L,
              7 + tick * 11,
              100 + tick * 23,
              tick * 450_000_000L,
              480_000 + tick % 40_000));
    }
    for (int pid : pids) {
      List<DeviceUsage> usage = new ArrayList<>();
      for (int d = 0; d < devices; d++) {
        long used = (256 + (tick + pid + d) % 64) * TestRegions.MIB;
        usage.add(
            new DeviceUsage(
                d,
                TestRegions.MIB,
                TestRegions.MIB,
                used - 2 * TestRegions.MIB,
                used,
                used,
                (int) (10 + (tick + d) % 40)));
      }
      b.slot(RegionSpec.SlotSpec.of(pid, pid + 1000, 1, usage));
    }
    b.lastKernelTime(1_700_000_000L + tick);
    b.extension(new RegionExtension(1, 0, 0, 0, "test", "", "", 0, 0, ext));
    return b.build();
  }

  /** Ticks {@link #keepBusy} precomputes and then cycles through. */
  static final int BUSY_TICKS = 16;

  /**
   * Moves every region of a node written by {@link #write} to the next of {@link #BUSY_TICKS}
   * {@link #busySpec} ticks every {@code periodMillis}, until killed. Only the bytes that differ
   * from the tick before are written, in place (no truncation: the exporter keeps them mapped), so
   * the writer costs little CPU beside the exporter it loads; after the last tick comes the first
   * again (counters go back once per cycle, as after a process restart).
   */
  static void keepBusy(Path root, int containers, int devices, int processes, long periodMillis)
      throws IOException, InterruptedException {
    int[] pids = new int[processes];
    for (int p = 0; p < processes; p++) {
      pids[p] = 100 + p;
    }
    byte[][] ticks = new byte[BUSY_TICKS][];
    for (int t = 0; t < BUSY_TICKS; t++) {
      ticks[t] = RegionWriter.encode(busySpec(devices, pids, t + 1));
    }
    FileChannel[] regions = new FileChannel[containers];
    for (int i = 0; i < containers; i++) {
      String uid =
          UUID.nameUUIDFromBytes(("bench" + i).getBytes(StandardCharsets.UTF_8)).toString();
      regions[i] =
          FileChannel.open(
              root.resolve(uid + "_main").resolve("r.cache"), StandardOpenOption.WRITE);
      writeRange(regions[i], ticks[0], 0, ticks[0].length);
    }
    // The ranges that differ from one tick to the next are the same in every region: found once.
    List<List<int[]>> changes = new ArrayList<>();
    for (int t = 0; t < BUSY_TICKS; t++) {
      changes.add(differing(ticks[t], ticks[(t + 1) % BUSY_TICKS]));
    }
    for (long tick = 1; ; tick++) {
      Thread.sleep(periodMillis);
      byte[] now = ticks[(int) (tick % BUSY_TICKS)];
      for (FileChannel region : regions) {
        for (int[] range : changes.get((int) ((tick - 1) % BUSY_TICKS))) {
          writeRange(region, now, range[0], range[1]);
        }
      }
    }
  }

  /** The ranges where {@code after} differs from {@code before}, gaps under 64 bytes bridged. */
  private static List<int[]> differing(byte[] before, byte[] after) {
    List<int[]> ranges = new ArrayList<>();
    for (int at = 0; at < after.length; ) {
      if (after[at] == before[at]) {
        at++;
        continue;
      }
      int end = at + 1;
      for (int same = 0; end < after.length && same < 64; end++) {
        same = after[end] == before[end] ? same + 1 : 0;
      }
      ranges.add(new int[] {at, end});
      at = end;
    }
    return ranges;
  }

  private static void writeRange(FileChannel ch, byte[] bytes, int from, int to)
      throws IOException {
    ByteBuffer buf = ByteBuffer.wrap(bytes, from, to - from);
    for (long at = from; buf.hasRemaining(); ) {
      at += ch.write(buf, at);
    }
  }

  public static void main(String[] args) throws IOException, InterruptedException {
    if (args.length < 1) {
      System.err.println("usage: BenchNode DIR [CONTAINERS [DEVICES [PROCESSES [sparse|busy]]]]");
      System.exit(2);
    }
    int containers = args.length > 1 ? Integer.parseInt(args[1]) : ScrapeBenchmark.CONTAINERS;
    int devices = args.length > 2 ? Integer.parseInt(args[2]) : ScrapeBenchmark.DEVICES;
    int processes = args.length > 3 ? Integer.parseInt(args[3]) : ScrapeBenchmark.PROCESSES;
    String mode = args.length > 4 ? args[4] : "";
    if (mode.equals("busy")) {
      // -Dbench.busy-ms: how often every region moves (default 1000: libvgpu's counters as a
      // scrape every 15 s sees them, always changed).
      keepBusy(
          Path.of(args[0]), containers, devices, processes, Long.getLong("bench.busy-ms", 1000));
      return;
    }
    write(Path.of(args[0]), containers, devices, processes, mode.equals("sparse"));
    System.out.printf(
        "%s: %d containers x %d devices x %d processes%n", args[0], containers, devices, processes);
  }
}

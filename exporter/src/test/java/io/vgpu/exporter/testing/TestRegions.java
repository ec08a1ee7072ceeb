package io.vgpu.exporter.testing;

import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.ExtensionDevice;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionExtension;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** Builds cache directories and region files for tests through the codec's writer. */
public final class TestRegions {
  public static final long MIB = 1L << 20;

  private TestRegions() {}

  /** GPU-0000...-n style UUIDs. */
  public static String uuid(int n) {
    return "GPU-00000000-0000-0000-0000-%012d".formatted(n);
  }

  /**
   * A v1.2 region with {@code devices} devices (limit {@code limitMib} MiB, SM limit {@code
   * smLimit} percent), one running slot per pid, each using {@code usedMib} MiB (context 1, module
   * 1, data rest) and {@code smUtil} percent on every device; optional libvgpu extension with
   * counters.
   */
  public static RegionSpec spec(
      int devices,
      long limitMib,
      int smLimit,
      int[] pids,
      long usedMib,
      int smUtil,
      boolean extension) {
    RegionSpec.Builder b = RegionSpec.builder(Layout.V1_2);
    List<ExtensionDevice> ext = new ArrayList<>();
    for (int d = 0; d < devices; d++) {
      b.device(uuid(d), limitMib * MIB, smLimit);
      ext.add(new ExtensionDevice(d, 3, 3 * MIB, 2_500_000_000L, 7, 100, 0, 0));
    }
    for (int pid : pids) {
      List<DeviceUsage> usage = new ArrayList<>();
      for (int d = 0; d < devices; d++) {
        usage.add(
            new DeviceUsage(
                d, MIB, MIB, (usedMib - 2) * MIB, usedMib * MIB, usedMib * MIB, smUtil));
      }
      b.slot(RegionSpec.SlotSpec.of(pid, pid + 1000, 1, usage));
    }
    b.lastKernelTime(1_700_000_000L);
    if (extension) {
      b.extension(new RegionExtension(1, 0, 0, 0, "test", "", "", 0, 0, ext));
    }
    return b.build();
  }

  /** Writes {@code spec} to {@code root/<podUid>_<ctr>/<name>}, creating the directory. */
  public static Path write(Path root, String podUid, String ctr, String name, RegionSpec spec)
      throws IOException {
    Path dir = root.resolve(podUid + "_" + ctr);
    Files.createDirectories(dir);
    Path file = dir.resolve(name);
    RegionWriter.create(file, spec);
    return file;
  }

  /** Open file descriptors of this JVM (/proc/self/fd entries). */
  public static long openFds() throws IOException {
    try (var s = Files.list(Path.of("/proc/self/fd"))) {
      return s.count();
    }
  }

  /** Mappings of files under {@code dir} in /proc/self/maps (distinct files). */
  public static long mappingsUnder(Path dir) throws IOException {
    String prefix = dir.toAbsolutePath().toString();
    return Files.readAllLines(Path.of("/proc/self/maps")).stream()
        .filter(l -> l.contains(prefix))
        .map(l -> l.substring(l.indexOf('/')))
        .distinct()
        .count();
  }

  /**
   * Writes {@code bytes} as a sparse file: only 4 KiB blocks that hold a non-zero byte are written
   * (a region is mostly zeros), so churn tests do not push gigabytes through the page cache.
   */
  public static void writeSparse(Path file, byte[] bytes) throws IOException {
    try (var ch =
        java.nio.channels.FileChannel.open(
            file,
            java.nio.file.StandardOpenOption.CREATE,
            java.nio.file.StandardOpenOption.WRITE,
            java.nio.file.StandardOpenOption.TRUNCATE_EXISTING)) {
      for (int off = 0; off < bytes.length; off += 4096) {
        int len = Math.min(4096, bytes.length - off);
        boolean nonZero = false;
        for (int i = off; i < off + len && !nonZero; i++) {
          nonZero = bytes[i] != 0;
        }
        if (nonZero) {
          ch.write(java.nio.ByteBuffer.wrap(bytes, off, len), off);
        }
      }
      if (ch.size() < bytes.length) {
        ch.write(java.nio.ByteBuffer.wrap(new byte[1]), bytes.length - 1);
      }
    }
  }
}

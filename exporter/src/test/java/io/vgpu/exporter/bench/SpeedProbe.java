package io.vgpu.exporter.bench;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.zip.Deflater;

/**
 * How fast this machine is right now, in a unit a reader of the footprint table can compare across
 * runs: the median time to deflate (level 1, as the exporter does) a fixed 2.8 MB page of
 * exposition-like lines with this JVM's zlib, in native code that no JIT or heap setting changes.
 * {@code exporter/bench/footprint.sh} prints it beside each row. On the shared 2-CPU development VM
 * it moves between ~5 and ~7 ms from one minute to the next, and every other figure of a row moves
 * with it.
 *
 * <pre>
 * java -cp exporter/target/test-classes io.vgpu.exporter.bench.SpeedProbe [ROUNDS]   (31)
 * </pre>
 */
public final class SpeedProbe {
  private SpeedProbe() {}

  /** The probe's page: ~2.8 MB of lines shaped like the benchmark node's, always the same. */
  static byte[] page() {
    StringBuilder b = new StringBuilder(3 << 20);
    long seed = 1;
    int line = 0;
    while (b.length() < 2_800_000) {
      seed = seed * 6364136223846793005L + 1442695040888963407L;
      int container = line % 100;
      int device = (line / 100) % 8;
      b.append("vgpu_container_family_")
          .append(line / 800 % 14)
          .append("{container=\"main\",device_index=\"")
          .append(device)
          .append("\",device_uuid=\"GPU-0000000")
          .append(device)
          .append("-0000-0000-0000-000000000000\",namespace=\"ns\",node=\"bench\",pod=\"pod-")
          .append(container)
          .append("\",pod_uid=\"")
          .append(Long.toHexString(container * 0x9E3779B97F4A7C15L))
          .append("\"} ")
          .append((seed >>> 40) % 3 == 0 ? "1.073741824E9" : Long.toString((seed >>> 44) % 100))
          .append('\n');
      line++;
    }
    return b.toString().getBytes(StandardCharsets.US_ASCII);
  }

  /** Median milliseconds to deflate {@link #page()} at level 1, over {@code rounds} rounds. */
  static double medianDeflateMillis(byte[] page, int rounds) {
    Deflater d = new Deflater(Deflater.BEST_SPEED, true);
    byte[] out = new byte[page.length / 4];
    double[] ms = new double[rounds];
    for (int r = 0; r < rounds; r++) {
      long start = System.nanoTime();
      d.reset();
      for (int off = 0; off < page.length; off += 64 * 1024) {
        d.setInput(page, off, Math.min(64 * 1024, page.length - off));
        while (!d.needsInput()) {
          d.deflate(out, 0, out.length);
        }
      }
      d.finish();
      while (!d.finished()) {
        d.deflate(out, 0, out.length);
      }
      ms[r] = (System.nanoTime() - start) / 1e6;
    }
    d.end();
    Arrays.sort(ms);
    return ms[rounds / 2];
  }

  public static void main(String[] args) {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 31;
    byte[] page = page();
    medianDeflateMillis(page, 5); // warm-up: the page's first touch, the deflater's tables
    System.out.printf("%.2f%n", medianDeflateMillis(page, rounds));
  }
}

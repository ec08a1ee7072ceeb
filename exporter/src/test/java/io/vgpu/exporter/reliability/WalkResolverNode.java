package io.vgpu.exporter.reliability;

import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestRegions;
import io.vgpu.regioncodec.RegionWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * The child JVM of {@link SecondArchitectureTest}: a live exporter whose discovery keeps passing
 * while a tenant swaps its cache file for a FIFO and back by rename, as fast as it can. Prints
 * {@code walk-node: PASS <passes> <flips> <safe-open mode>} and exits 0, or hangs (a discovery
 * thread stuck in open(2) on the FIFO) until its parent gives up.
 */
final class WalkResolverNode {
  private WalkResolverNode() {}

  public static void main(String[] args) throws Throwable {
    Path root = Files.createDirectories(Path.of(args[0]));
    LiveExporter.writeHealthy(root);
    byte[] valid = RegionWriter.encode(TestRegions.spec(1, 1024, 50, new int[] {7}, 100, 5, false));
    // Many flipping files, so each discovery pass opens many: every open is a chance to lose the
    // race between a type check and an open by name.
    List<Path> targets = new java.util.ArrayList<>();
    for (int d = 0; d < 4; d++) {
      Path evil =
          Files.createDirectories(
              root.resolve("eeeeeeee-0000-4000-8000-00000000000" + d + "_evil"));
      for (int f = 0; f < 8; f++) {
        Path target = evil.resolve(f + ".cache");
        Files.write(target, valid);
        targets.add(target);
      }
    }
    String mode;
    try {
      mode =
          (String) Class.forName("io.vgpu.regioncodec.SafeOpen").getMethod("describe").invoke(null);
    } catch (ReflectiveOperationException e) {
      mode = "no SafeOpen (check-then-open on this architecture)";
    }
    try (FifoFlipper flipper = new FifoFlipper(targets, valid);
        LiveExporter ex = LiveExporter.start(root, Map.of())) {
      int passes = 0;
      long end = System.nanoTime() + 4_000_000_000L;
      while (System.nanoTime() < end) {
        ex.awaitPass(); // throws after 20 s when discovery is stuck
        passes++;
      }
      Samples s = ex.scrape();
      LiveExporter.assertHealthyNeighbour(s);
      System.out.println("walk-node: PASS " + passes + " " + flipper.flips() + " " + mode);
    }
    System.exit(0);
  }
}

package io.vgpu.exporter.reliability;

import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestRegions;
import io.vgpu.regioncodec.RegionWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The child JVM of {@link SecondArchitectureTest}: a live exporter whose discovery keeps passing
 * while a tenant swaps its cache file for a FIFO and back by rename, as fast as it can. Prints
 * {@code walk-node: PASS <passes> <flips> <safe-open mode>} and exits 0, or hangs (a discovery
 * thread stuck in open(2) on the FIFO) until its parent gives up.
 */
final class WalkResolverNode {
  private WalkResolverNode() {}

  @SuppressWarnings("restricted") // mkfifo through the FFM linker, test only
  public static void main(String[] args) throws Throwable {
    Path root = Files.createDirectories(Path.of(args[0]));
    LiveExporter.writeHealthy(root);
    Path evil = Files.createDirectories(root.resolve("eeeeeeee-0000-4000-8000-00000000000e_evil"));
    byte[] valid = RegionWriter.encode(TestRegions.spec(1, 1024, 50, new int[] {7}, 100, 5, false));
    Path target = evil.resolve("a.cache");
    Files.write(target, valid);
    Linker linker = Linker.nativeLinker();
    MethodHandle mkfifo =
        linker.downcallHandle(
            linker.defaultLookup().find("mkfifo").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
    AtomicBoolean stop = new AtomicBoolean();
    AtomicLong flips = new AtomicLong();
    Thread flipper =
        Thread.ofPlatform()
            .daemon()
            .start(
                () -> {
                  try (Arena arena = Arena.ofConfined()) {
                    Path fifo = evil.resolve("f.tmp");
                    Path file = evil.resolve("r.tmp");
                    var cFifo = arena.allocateFrom(fifo.toString());
                    while (!stop.get()) {
                      Files.write(file, valid);
                      Files.move(file, target, StandardCopyOption.ATOMIC_MOVE);
                      if ((int) mkfifo.invokeExact(cFifo, 0600) != 0) {
                        throw new IllegalStateException("mkfifo failed");
                      }
                      Files.move(fifo, target, StandardCopyOption.ATOMIC_MOVE);
                      flips.incrementAndGet();
                    }
                  } catch (Throwable t) {
                    t.printStackTrace();
                    System.exit(3);
                  }
                });
    String mode;
    try {
      mode =
          (String) Class.forName("io.vgpu.regioncodec.SafeOpen").getMethod("describe").invoke(null);
    } catch (ReflectiveOperationException e) {
      mode = "no SafeOpen (check-then-open on this architecture)";
    }
    try (LiveExporter ex = LiveExporter.start(root, Map.of())) {
      int passes = 0;
      long end = System.nanoTime() + 2_500_000_000L;
      while (System.nanoTime() < end) {
        ex.awaitPass(); // throws after 20 s when discovery is stuck
        passes++;
      }
      stop.set(true);
      Samples s = ex.scrape();
      LiveExporter.assertHealthyNeighbour(s);
      System.out.println("walk-node: PASS " + passes + " " + flips.get() + " " + mode);
    }
    System.exit(0);
  }
}

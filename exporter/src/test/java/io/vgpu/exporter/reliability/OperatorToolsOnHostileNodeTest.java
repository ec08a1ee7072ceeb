package io.vgpu.exporter.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.cli.Cli;
import io.vgpu.exporter.testing.TestRegions;
import io.vgpu.regioncodec.RegionWriter;
import java.io.PrintWriter;
import java.io.RandomAccessFile;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The operator commands (doctor, inspect) read the same tenant-owned files as the exporter: on a
 * node where one tenant planted every hostile entry at once they finish, never open anything
 * outside the cache root, and still report the healthy neighbour.
 */
class OperatorToolsOnHostileNodeTest {
  private static final String EVIL = "eeeeeeee-0000-4000-8000-00000000000e_evil";

  @TempDir Path dir;

  private record Result(int code, String out, String err) {}

  private static Result cli(String... args) throws Exception {
    // On its own thread with a deadline: a FIFO opened for reading would block forever.
    return CompletableFuture.supplyAsync(
            () -> {
              StringWriter out = new StringWriter();
              StringWriter err = new StringWriter();
              int code = Cli.run(args, new PrintWriter(out, true), new PrintWriter(err, true));
              return new Result(code, out.toString(), err.toString());
            })
        .get(120, TimeUnit.SECONDS);
  }

  @Test
  void doctorAndInspect_everyHostileEntryAtOnce_finishWithoutTouchingOutsideFiles()
      throws Exception {
    Path root = Files.createDirectories(dir.resolve("containers"));
    Path outside = Files.createDirectories(dir.resolve("host"));
    LiveExporter.writeHealthy(root);
    Path evil = Files.createDirectories(root.resolve(EVIL));
    byte[] valid = RegionWriter.encode(TestRegions.spec(1, 1024, 50, new int[] {7}, 100, 5, false));
    Files.write(outside.resolve("other.cache"), valid);
    Files.createSymbolicLink(evil.resolve("link.cache"), outside.resolve("other.cache"));
    HostileFilesTest.mkfifo(evil.resolve("fifo.cache"));
    HostileFilesTest.mkfifo(outside.resolve("trap"));
    Files.createSymbolicLink(evil.resolve("trap.cache"), outside.resolve("trap"));
    Files.createDirectories(evil.resolve("x.cache"));
    try (RandomAccessFile f = new RandomAccessFile(evil.resolve("huge.cache").toFile(), "rw")) {
      f.write(valid, 0, 4096);
      f.setLength(1L << 40);
    }
    byte[] junk = new byte[valid.length];
    new Random(3).nextBytes(junk);
    ByteBuffer.wrap(junk).order(ByteOrder.LITTLE_ENDIAN).putInt(0, 19920718).putInt(4, 1);
    Files.write(evil.resolve("junk.cache"), junk);
    Files.createSymbolicLink(root.resolve("ffffffff-0000-4000-8000-00000000000f_linked"), outside);

    try (HostileDirFixture.OutsideWatch watch = new HostileDirFixture.OutsideWatch(outside)) {
      for (List<String> args :
          List.of(
              List.of("doctor", "--no-nvml", "--window", "0s"),
              List.of("doctor", "--no-nvml", "--window", "0s", "--json"),
              List.of("inspect"),
              List.of("inspect", "--json"))) {
        String[] full =
            java.util.stream.Stream.concat(
                    args.stream(),
                    java.util.stream.Stream.of(
                        "--cache-root", root.toString(), "--proc-root", "/proc"))
                .toArray(String[]::new);
        Result r = cli(full);
        System.out.printf(
            "reliability: %s on the hostile node: exit %d, %d bytes of output%n",
            args, r.code(), r.out().length());
        assertThat(r.code()).as("%s exit code; err: %s", args, r.err()).isBetween(0, 2);
        assertThat(r.err()).as("%s stderr", args).doesNotContain("Exception");
        assertThat(r.out())
            .as("%s names the healthy neighbour", args)
            .contains(LiveExporter.HEALTHY_UID);
        assertThat(r.out())
            .as("%s reports the offending container", args)
            .contains(EVIL.substring(0, 36));
      }
      watch.assertUntouched();
    }
  }
}

package io.vgpu.exporter.testing;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A container root on a filesystem its tenant serves and freezes: a real FUSE mount
 * (src/test/resources/stalling-fuse.py, speaking the kernel's protocol on /dev/fuse) in a private
 * mount namespace, whose {@code /etc/ld.so.preload} is a regular file that passes every type check
 * and whose reads never return: the reader sleeps in the kernel (D state) until this closes. Seen
 * from outside through {@code /proc/<pid>/root}, as the exporter sees a container. Needs root and
 * /dev/fuse (the test machines have both; a test that needs it fails without them).
 */
public final class StallingFuse implements AutoCloseable {
  private final Process daemon;
  private final Path root;
  private final AtomicInteger stalled = new AtomicInteger();

  private StallingFuse(Process daemon, Path root) {
    this.daemon = daemon;
    this.root = root;
  }

  /** Mounts it on {@code mountPoint} (created) in a mount namespace of its own. */
  public static StallingFuse start(Path mountPoint) throws IOException {
    Files.createDirectories(mountPoint);
    Path script = Path.of("src/test/resources/stalling-fuse.py").toAbsolutePath();
    Process p =
        new ProcessBuilder(
                "unshare",
                "-m",
                "--propagation",
                "private",
                "python3",
                script.toString(),
                mountPoint.toAbsolutePath().toString())
            .redirectErrorStream(true)
            .start();
    BufferedReader out =
        new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.US_ASCII));
    String first = out.readLine();
    if (!"ready".equals(first)) {
      p.destroyForcibly();
      throw new IllegalStateException("stalling FUSE did not mount: " + first);
    }
    StallingFuse fuse =
        new StallingFuse(p, Path.of("/proc/" + p.pid() + "/root" + mountPoint.toAbsolutePath()));
    Thread.ofPlatform()
        .daemon()
        .name("stalling-fuse-out")
        .start(
            () -> {
              try {
                for (String line; (line = out.readLine()) != null; ) {
                  if (line.equals("stalled")) {
                    fuse.stalled.incrementAndGet();
                  }
                }
              } catch (IOException e) {
                // the daemon ended
              }
            });
    return fuse;
  }

  /** The frozen filesystem's root, as another mount namespace's root looks from here. */
  public Path root() {
    return root;
  }

  /** Reads the filesystem has left unanswered so far. */
  public int stalledReads() {
    return stalled.get();
  }

  /** Makes {@code procPid/root} (a procfs fixture's entry) this filesystem's root. */
  public void becomeRootOf(Path procPid) {
    Path link = procPid.resolve("root");
    try {
      if (Files.isDirectory(link, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
        try (var walk = Files.walk(link)) {
          for (Path p : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
            Files.delete(p);
          }
        }
      }
      Files.deleteIfExists(link);
      Files.createSymbolicLink(link, root);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Ends the daemon: the kernel fails the unanswered reads and the readers return. */
  @Override
  public void close() {
    daemon.destroyForcibly();
    try {
      daemon.waitFor(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while closing", e);
    }
  }
}

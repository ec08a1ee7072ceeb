package io.vgpu.exporter.reliability;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A tenant swapping its file for a FIFO and back by rename, as fast as it can, on a background
 * thread: a regular file (with {@code content}) about half the time, a FIFO the other half, so a
 * reader that checks the type and then opens by name soon opens the FIFO and blocks. FIFOs come
 * from the {@code mkfifo} command in batches (no FFM here: the test runs the pre-fix code with
 * {@code -Dos.arch=aarch64}, where the FFM linker would take the wrong calling convention).
 */
final class FifoFlipper implements AutoCloseable {
  private final List<Path> targets;
  private final byte[] content;
  private final AtomicBoolean stop = new AtomicBoolean();
  private final AtomicLong flips = new AtomicLong();
  private final Thread thread;
  private volatile Throwable failure;

  FifoFlipper(List<Path> targets, byte[] content) {
    this.targets = List.copyOf(targets);
    this.content = content.clone();
    this.thread = Thread.ofPlatform().daemon().name("fifo-flipper").start(this::run);
  }

  long flips() {
    return flips.get();
  }

  private void run() {
    // About 800 new names per batch in all, so the first flips start within a second even on a
    // busy machine.
    final int perTarget = Math.max(20, 400 / targets.size());
    try {
      int batch = 0;
      while (!stop.get()) {
        // A batch of FIFOs (one mkfifo call) and of names for the regular file (hard links of
        // one master, so putting a regular file back is one rename, as cheap as the FIFO's).
        List<List<Path>> fifos = new ArrayList<>();
        List<List<Path>> files = new ArrayList<>();
        List<String> cmd = new ArrayList<>(List.of("mkfifo"));
        for (int t = 0; t < targets.size(); t++) {
          Path target = targets.get(t);
          Path master = target.resolveSibling(".master-" + t);
          if (!Files.exists(master)) {
            Files.write(master, content);
          }
          List<Path> myFifos = new ArrayList<>();
          List<Path> myFiles = new ArrayList<>();
          for (int i = 0; i < perTarget; i++) {
            Path f = target.resolveSibling(".fifo-" + t + "-" + batch + "-" + i);
            myFifos.add(f);
            cmd.add(f.toString());
            myFiles.add(
                Files.createLink(
                    target.resolveSibling(".file-" + t + "-" + batch + "-" + i), master));
          }
          fifos.add(myFifos);
          files.add(myFiles);
        }
        Process p = new ProcessBuilder(cmd).inheritIO().start();
        if (p.waitFor() != 0) {
          throw new IOException("mkfifo failed");
        }
        for (int i = 0; i < perTarget && !stop.get(); i++) {
          // All targets regular files, then all FIFOs: each is a file about half the time, so a
          // type check often passes and the open that follows often meets the FIFO.
          for (int t = 0; t < targets.size(); t++) {
            Files.move(files.get(t).get(i), targets.get(t), StandardCopyOption.ATOMIC_MOVE);
          }
          for (int t = 0; t < targets.size(); t++) {
            Files.move(fifos.get(t).get(i), targets.get(t), StandardCopyOption.ATOMIC_MOVE);
          }
          flips.incrementAndGet();
        }
        batch++;
      }
    } catch (Throwable t) {
      failure = t;
    }
  }

  @Override
  public void close() throws IOException {
    stop.set(true);
    try {
      thread.join(10_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while closing", e);
    }
    // Release any reader that did block opening a FIFO (the pre-fix code): an O_RDWR open of a
    // FIFO never blocks and is the writer such a reader waits for. Leftovers of the last batch go.
    for (Path t : targets) {
      try (var s = Files.list(t.getParent())) {
        for (Path f : s.toList()) {
          if (!Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS) && !Files.isDirectory(f)) {
            try (FileChannel c =
                FileChannel.open(f, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
              c.size();
            } catch (IOException ignored) {
              // renamed away meanwhile
            }
          }
        }
      }
    }
    if (failure != null) {
      throw new AssertionError("flipper failed", failure);
    }
  }
}

package io.vgpu.hostpid.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Where benchmark fixture trees go. */
final class BenchTrees {

  private BenchTrees() {}

  /**
   * A fresh directory under {@code -Dhostpid.bench.dir}, else {@code /dev/shm} (memory-backed, as
   * procfs is) when writable, else the default temp directory.
   */
  static Path createDirectory(String prefix) throws IOException {
    String configured = System.getProperty("hostpid.bench.dir");
    Path shm = Path.of("/dev/shm");
    if (configured != null) {
      return Files.createTempDirectory(Path.of(configured), prefix);
    }
    if (Files.isDirectory(shm) && Files.isWritable(shm)) {
      return Files.createTempDirectory(shm, prefix);
    }
    return Files.createTempDirectory(prefix);
  }
}

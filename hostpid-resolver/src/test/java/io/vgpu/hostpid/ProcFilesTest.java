package io.vgpu.hostpid;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.hostpid.testing.ProcEntry;
import io.vgpu.hostpid.testing.ProcTree;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@link ProcFs#readMaps} and {@link ProcFs#readEnviron}: bounded, never blocking, never lying. */
class ProcFilesTest {
  private static final Set<String> KEYS = Set.of("LD_PRELOAD", "CUDA_DISABLE_CONTROL");

  @TempDir Path dir;

  @Test
  void maps_ofExactlyTheBound_isComplete_oneByteMore_isNot() throws Exception {
    Path region = Files.writeString(dir.resolve("r.cache"), "x");
    ProcTree tree = ProcTree.at(dir.resolve("proc"));
    ProcEntry.in(tree, 10, 1).mapsLibcuda().mapsRegion(region).write();
    ProcFs procFs = new ProcFs(tree.root());
    int size = (int) Files.size(tree.root().resolve("10/maps"));

    ProcessMaps whole = procFs.readMaps(10, size);
    assertThat(whole.complete()).isTrue();
    assertThat(whole.readable()).isTrue();
    assertThat(whole.gpu()).isTrue();
    assertThat(whole.cacheInodes()).containsExactly(ProcEntry.inode(region));
    assertThat(whole.bytesRead()).isEqualTo(size);

    // One byte short: the region's line is cut, so it is not parsed and the read is not complete.
    ProcessMaps cut = procFs.readMaps(10, size - 1);
    assertThat(cut.complete()).isFalse();
    assertThat(cut.readable()).isTrue();
    assertThat(cut.gpu()).isTrue();
    assertThat(cut.cacheInodes()).isEmpty();
  }

  @Test
  void maps_missing_isUnreadable_andAFifo_neverBlocks() throws Exception {
    ProcTree tree = ProcTree.at(dir.resolve("proc"));
    ProcEntry.in(tree, 10, 1).write();
    ProcEntry.in(tree, 11, 1).write();
    Process mkfifo =
        new ProcessBuilder("mkfifo", tree.root().resolve("11/maps").toString()).start();
    assertThat(mkfifo.waitFor()).isZero();
    ProcFs procFs = new ProcFs(tree.root());

    assertThat(procFs.readMaps(10, 4096).readable()).isFalse();
    ProcessMaps fifo =
        CompletableFuture.supplyAsync(() -> procFs.readMaps(11, 4096))
            .get(Duration.ofSeconds(10).toMillis(), TimeUnit.MILLISECONDS);
    assertThat(fifo.readable()).isFalse();
    assertThat(fifo.complete()).isFalse();
    assertThat(fifo.bytesRead()).isZero();
  }

  @Test
  void environ_givesOnlyTheAskedVariables() {
    ProcTree tree = ProcTree.at(dir.resolve("proc"));
    ProcEntry.in(tree, 10, 1)
        .env("LD_PRELOAD", "/usr/local/vgpu/libvgpu.so")
        .env("SECRET", "x")
        .write();
    ProcEntry.in(tree, 11, 1).write();
    ProcFs procFs = new ProcFs(tree.root());

    assertThat(procFs.readEnviron(10, KEYS))
        .containsExactlyEntriesOf(java.util.Map.of("LD_PRELOAD", "/usr/local/vgpu/libvgpu.so"));
    assertThat(procFs.readEnviron(11, KEYS)).isEmpty();
  }
}

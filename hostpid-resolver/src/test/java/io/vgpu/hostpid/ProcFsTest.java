package io.vgpu.hostpid;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.vgpu.hostpid.testing.ProcTree;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class ProcFsTest {

  private static final String POD = ProcTree.podUid(7);
  private static final String CTR = ProcTree.containerId(7);

  @TempDir Path dir;

  @Test
  void path_buildsRootPidFile() {
    assertThat(new ProcFs(dir).path(42, "status")).isEqualTo(dir.resolve("42").resolve("status"));
    assertThat(ProcFs.host().path(1, "cgroup"))
        .isEqualTo(ProcFs.DEFAULT_ROOT.resolve("1").resolve("cgroup"));
  }

  @Test
  void listPids_mixedEntries_returnsOnlyCanonicalPidsSorted() throws IOException {
    for (String name : new String[] {"10", "2", "self", "01", "99999999999", "3x", "sys"}) {
      Files.createDirectories(dir.resolve(name));
    }
    Files.writeString(dir.resolve("7"), "");

    assertThat(new ProcFs(dir).listPids()).containsExactly(2, 7, 10);
  }

  @Test
  void listPids_missingRoot_throwsWithAdvice() {
    assertThatThrownBy(() -> new ProcFs(dir.resolve("nope")).listPids())
        .isInstanceOf(ProcFsUnavailableException.class)
        .hasMessageContaining("procfs root")
        .satisfies(
            e ->
                assertThat(((ProcFsUnavailableException) e).root()).isEqualTo(dir.resolve("nope")));
  }

  @Test
  void read_hugeFiles_areUnusableNotReadWhole() throws IOException {
    ProcTree tree = ProcTree.at(dir);
    tree.process(5, 55, ProcTree.systemdCgroup(POD, CTR, "burstable"), 5, 1);
    String hugeStatus = ProcTree.status("x", 5, 1) + "Junk:\t" + "A".repeat(20 << 20) + "\n";
    tree.write(5, "status", hugeStatus);
    tree.process(6, 66, "0::/" + "k".repeat(ProcFs.MAX_FILE_BYTES) + "\n", 6, 1);
    tree.process(7, 77, ProcTree.hostCgroup(), 7);
    tree.write(7, "stat", ProcTree.stat(7, "y".repeat(ProcFs.MAX_FILE_BYTES), 'S', 77));

    ProcFs procFs = new ProcFs(dir);

    assertThat(procFs.read(5))
        .isEqualTo(new ProcessRead.Unusable(5, ProcessRead.Problem.TOO_LARGE));
    assertThat(procFs.read(6))
        .isEqualTo(new ProcessRead.Unusable(6, ProcessRead.Problem.TOO_LARGE));
    assertThat(procFs.read(7))
        .isEqualTo(new ProcessRead.Unusable(7, ProcessRead.Problem.TOO_LARGE));
  }

  @Test
  void read_fileExactlyAtTheBound_isAccepted() {
    ProcTree tree = ProcTree.at(dir);
    String status = ProcTree.status("x", 5, 1);
    String padded = status + "P:" + "p".repeat(ProcFs.MAX_FILE_BYTES - status.length() - 3) + "\n";
    assertThat(padded).hasSize(ProcFs.MAX_FILE_BYTES);
    tree.process(5, 55, ProcTree.systemdCgroup(POD, CTR, "burstable"), 5, 1);
    tree.write(5, "status", padded);

    assertThat(new ProcFs(dir).readProcess(5).orElseThrow().innermostPid()).isEqualTo(1);
  }

  @Test
  @Timeout(value = 20, unit = TimeUnit.SECONDS)
  void read_fifoOrDirectoryInPlaceOfAFile_isUnreadableWithoutBlocking() throws Exception {
    ProcTree tree = ProcTree.at(dir);
    tree.process(5, 55, ProcTree.hostCgroup(), 5);
    Files.delete(dir.resolve("5/status"));
    Process mkfifo = new ProcessBuilder("mkfifo", dir.resolve("5/status").toString()).start();
    assumeTrue(mkfifo.waitFor() == 0, "mkfifo is not available here");
    tree.process(6, 66, ProcTree.hostCgroup(), 6);
    Files.delete(dir.resolve("6/cgroup"));
    Files.createDirectory(dir.resolve("6/cgroup"));
    tree.process(7, 77, ProcTree.hostCgroup(), 7);
    Files.delete(dir.resolve("7/stat"));
    Files.createSymbolicLink(dir.resolve("7/stat"), Path.of("/dev/zero"));

    ProcFs procFs = new ProcFs(dir);

    assertThat(procFs.read(5))
        .isEqualTo(new ProcessRead.Unusable(5, ProcessRead.Problem.UNREADABLE));
    assertThat(procFs.read(6))
        .isEqualTo(new ProcessRead.Unusable(6, ProcessRead.Problem.UNREADABLE));
    assertThat(procFs.read(7))
        .isEqualTo(new ProcessRead.Unusable(7, ProcessRead.Problem.UNREADABLE));
  }

  @Test
  void trustedTree_readsTheSameAsACheckedRoot() {
    ProcTree tree = ProcTree.at(dir);
    tree.process(5, 55, ProcTree.systemdCgroup(POD, CTR, "burstable"), 5, 1);

    assertThat(ProcFs.trustedTree(dir).read(5)).isEqualTo(new ProcFs(dir).read(5));
    assertThat(ProcFs.trustedTree(dir).readProcess(5).orElseThrow().cgroup().containerId())
        .contains(CTR);
  }

  @Test
  void read_dirWithoutFilesOrNegativePid_isGone() throws IOException {
    Files.createDirectories(dir.resolve("9"));
    ProcFs procFs = new ProcFs(dir);

    assertThat(procFs.read(9)).isEqualTo(new ProcessRead.Gone(9));
    assertThat(procFs.read(-3)).isInstanceOf(ProcessRead.Gone.class);
    assertThat(procFs.startTimeTicks(9)).isEmpty();
  }

  @Test
  void readIfStartedAt_startTimeChangedWhileReading_isGoneNotAMix() {
    ProcTree tree = ProcTree.at(dir);
    tree.process(5, 55, ProcTree.systemdCgroup(POD, CTR, "burstable"), 5, 1);

    // the caller saw start time 54 in its first stat read: the pid now belongs to someone else
    assertThat(new ProcFs(dir).readIfStartedAt(5, 54)).isEqualTo(new ProcessRead.Gone(5));
  }

  @Test
  void read_thisJvmThroughRealProcfs_findsItself() {
    ProcFs procFs = ProcFs.host();
    int self = (int) ProcessHandle.current().pid();

    ProcessInfo info = procFs.readProcess(self).orElseThrow();

    assertThat(info.hostPid()).isEqualTo(self);
    assertThat(info.nsPids().getFirst()).isEqualTo(self);
    assertThat(info.startTimeTicks()).isPositive();
    assertThat(procFs.startTimeTicks(self)).hasValue(info.startTimeTicks());
    assertThat(procFs.listPids()).contains(self);
  }

  @Test
  void read_kernelThreadThroughRealProcfs_isHostWithOneLevel() {
    ProcFs procFs = ProcFs.host();
    assumeTrue(Files.exists(procFs.path(2, "status")), "no kthreadd visible as pid 2 here");
    ProcessRead read = procFs.read(2);
    assumeTrue(read instanceof ProcessRead.Found, "pid 2 is not readable here: " + read);

    ProcessInfo kthreadd = ((ProcessRead.Found) read).process();

    assertThat(kthreadd.nsPids()).containsExactly(2);
    assertThat(kthreadd.cgroup().kind()).isEqualTo(CgroupIdentity.Kind.HOST);
  }

  /**
   * The resolver maps "No such process" to gone; this pins the JDK's message for ESRCH from read(2)
   * on a procfs file whose process exited after the open.
   */
  @Test
  @Timeout(value = 20, unit = TimeUnit.SECONDS)
  void realProcfs_readAfterProcessExit_failsWithNoSuchProcess() throws Exception {
    Process sleeper = new ProcessBuilder("sleep", "30").start();
    Path status = ProcFs.host().path((int) sleeper.pid(), "status");
    try (FileChannel channel = FileChannel.open(status, StandardOpenOption.READ)) {
      sleeper.destroyForcibly();
      sleeper.waitFor();

      assertThatThrownBy(() -> channel.read(ByteBuffer.allocate(4096)))
          .isInstanceOf(IOException.class)
          .hasMessageContaining("No such process");
    }
    assertThat(ProcFs.host().read((int) sleeper.pid())).isInstanceOf(ProcessRead.Gone.class);
  }

  /** Processes start and exit all the time on a real node; a scan must shrug that off. */
  @Test
  @Timeout(value = 60, unit = TimeUnit.SECONDS)
  void refresh_realProcfsWithProcessesExitingMidScan_neverThrows() throws Exception {
    HostPidResolver resolver = new HostPidResolver(ProcFs.host(), Duration.ZERO, System::nanoTime);
    List<Process> churn = new ArrayList<>();
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1500);
    int scans = 0;
    while (System.nanoTime() < deadline) {
      for (int i = 0; i < 10; i++) {
        churn.add(new ProcessBuilder("true").start());
      }
      resolver.refresh();
      scans++;
      churn.removeIf(p -> !p.isAlive());
    }
    for (Process p : churn) {
      p.waitFor();
    }

    assertThat(resolver.lastScan().scans()).isEqualTo(scans);
    assertThat(resolver.lastScan().processes()).isPositive();
  }
}

package io.vgpu.regioncodec;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vgpu.regioncodec.RegionException.Reason;
import io.vgpu.regioncodec.internal.Extension;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class RegionFileTest {
  @TempDir Path dir;

  private Path write(String name, RegionSpec spec) {
    Path path = dir.resolve(name);
    RegionWriter.create(path, spec);
    return path;
  }

  private Path writeBytes(String name, byte[] bytes) throws IOException {
    Path path = dir.resolve(name);
    Files.write(path, bytes);
    return path;
  }

  @ParameterizedTest
  @org.junit.jupiter.params.provider.EnumSource(Layout.class)
  void semaphoreValue_freeAfterCreate_zeroOnceTaken(Layout layout) throws IOException {
    Path path = write("sem-" + layout.label() + ".cache", Fixtures.typical(layout));
    int semOffset = io.vgpu.regioncodec.internal.Geometry.of(layout).semOffset;
    try (RegionFile f = RegionFile.openReadOnly(path)) {
      assertThat(f.semaphoreValue()).as("sem_init(value 1)").isEqualTo(1);
    }
    // What a sem_wait leaves behind: the value word 0 (HAMi #2500 when nobody posts it again).
    try (RandomAccessFile raf = new RandomAccessFile(path.toFile(), "rw")) {
      raf.seek(semOffset);
      raf.write(new byte[4]);
    }
    try (RegionFile f = RegionFile.openReadOnly(path)) {
      assertThat(f.semaphoreValue()).isZero();
    }
  }

  static Stream<Arguments> layoutsAndSizes() {
    return Arrays.stream(Layout.values())
        .flatMap(
            l ->
                Stream.of(
                    Arguments.of(l.label() + " sizeof", l, l.structSize()),
                    Arguments.of(l.label() + " sizeof+1", l, l.structSize() + 1)));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("layoutsAndSizes")
  void openReadOnly_everyLayoutAndSize_readsBackWhatWasWritten(
      String name, Layout layout, long size) {
    RegionSpec spec = rebuildWithSize(Fixtures.typical(layout), size);
    try (RegionFile file = RegionFile.openReadOnly(write("r.cache", spec))) {
      assertThat(file.layout()).isEqualTo(layout);
      RegionSnapshot snapshot = file.snapshot();
      assertThat(snapshot).isEqualTo(Fixtures.expected(spec, snapshot.tornRetries()));
      assertThat(snapshot.tornRetries()).isZero();
      assertThat(snapshot.processes()).extracting(ProcessSlot::pid).containsExactly(101, 102, 103);
      assertThat(snapshot.processes()).extracting(ProcessSlot::slotIndex).containsExactly(0, 2, 3);
      assertThat(snapshot.devices().get(0).uuid())
          .isEqualTo("GPU-11111111-2222-3333-4444-555555555555");
      assertThat(snapshot.usedBytes(0)).isEqualTo(1500);
      assertThat(snapshot.suspendedCount()).isEqualTo(1);
      assertThat(snapshot.extension()).isEmpty();
    }
  }

  @Test
  void snapshot_v12WithExtension_readsExtensionBlock() {
    RegionSpec spec = Fixtures.withExtension();
    try (RegionFile file = RegionFile.openReadOnly(write("ext.cache", spec))) {
      RegionSnapshot snapshot = file.snapshot();
      assertThat(snapshot).isEqualTo(Fixtures.expected(spec, 0));
      RegionExtension extension = snapshot.extension().orElseThrow();
      assertThat(extension.podUid()).isEqualTo("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
      assertThat(extension.devices().get(0).oomRejections()).isEqualTo(3);
      assertThat(snapshot.processes().get(1).extension().orElseThrow().heartbeatNanos())
          .isEqualTo(2002);
    }
  }

  /**
   * HAMi-core's compaction moves {@code procs[]} but not libvgpu's extension entries: an entry
   * whose pid tag names another process must not lend its start time (pid-reuse evidence) to the
   * process now in that slot. A zero tag (files from before the tag) still counts.
   */
  @Test
  void snapshot_extensionEntryWithAnotherProcessesPidTag_isIgnored() throws IOException {
    Path path = write("tagged.cache", Fixtures.withExtension());
    try (RandomAccessFile raf = new RandomAccessFile(path.toFile(), "rw")) {
      ByteBuffer tag = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN);
      raf.getChannel().write(tag.putInt(0, 4242), Extension.slot(2, Extension.S_PID_TAG));
      raf.getChannel().write(tag.putInt(0, 0), Extension.slot(3, Extension.S_PID_TAG));
    }
    try (RegionFile file = RegionFile.openReadOnly(path)) {
      List<ProcessSlot> processes = file.snapshot().processes();
      assertThat(processes).extracting(ProcessSlot::pid).containsExactly(101, 102, 103);
      assertThat(processes.get(0).extension()).isPresent();
      assertThat(processes.get(1).extension()).as("stale entry of slot 2").isEmpty();
      assertThat(processes.get(2).extension()).as("untagged entry of slot 3").isPresent();
    }
  }

  @Test
  void snapshot_v1FileLargeEnoughButWithoutExtensionMagic_hasNoExtension() {
    RegionSpec spec = rebuildWithSize(Fixtures.typical(Layout.V1_2), 2_043_200L);
    try (RegionFile file = RegionFile.openReadOnly(write("big.cache", spec))) {
      assertThat(file.layout()).isEqualTo(Layout.V1_2);
      assertThat(file.snapshot().extension()).isEmpty();
    }
  }

  @Test
  void openReadOnly_versionSaysOneTwoAtBrokenSize_choosesV12() {
    RegionSpec spec = rebuildWithSize(Fixtures.typical(Layout.V1_2), 2_008_985L);
    try (RegionFile file = RegionFile.openReadOnly(write("r.cache", spec))) {
      assertThat(file.layout()).isEqualTo(Layout.V1_2);
    }
  }

  @Test
  void openReadOnly_brokenLayoutIsLabelledOneOne_choosesBrokenBySize() {
    try (RegionFile file =
        RegionFile.openReadOnly(write("r.cache", Fixtures.typical(Layout.V1_1_BROKEN)))) {
      assertThat(file.layout()).isEqualTo(Layout.V1_1_BROKEN);
      assertThat(file.snapshot().majorVersion()).isEqualTo(1);
      assertThat(file.snapshot().minorVersion()).isEqualTo(1);
    }
  }

  static Stream<Arguments> badHeaders() {
    return Stream.of(
        Arguments.of("empty", 0L, 0, 0, 0, Reason.TOO_SMALL),
        Arguments.of("11 bytes", 11L, 19_920_718, 0, 0, Reason.TOO_SMALL),
        Arguments.of("12 bytes with magic", 12L, 19_920_718, 1, 2, Reason.UNKNOWN_SIZE),
        Arguments.of("no magic", 2_008_953L, 0, 1, 2, Reason.BAD_MAGIC),
        Arguments.of("v1 size, major 2", 2_008_953L, 19_920_718, 2, 0, Reason.UNKNOWN_VERSION),
        Arguments.of("v1 size, version 1.3", 2_008_953L, 19_920_718, 1, 3, Reason.UNKNOWN_VERSION),
        Arguments.of("v1 size, version 1.0", 2_008_953L, 19_920_718, 1, 0, Reason.UNKNOWN_VERSION),
        Arguments.of("broken size, 0.0", 2_008_984L, 19_920_718, 0, 0, Reason.UNKNOWN_VERSION),
        Arguments.of("between L0a and L0b", 900_000L, 19_920_718, 1, 2, Reason.UNKNOWN_SIZE),
        Arguments.of("L0a minus one", 804_679L, 19_920_718, 1, 2, Reason.UNKNOWN_SIZE),
        Arguments.of("L0b plus two", 1_197_898L, 19_920_718, 1, 2, Reason.UNKNOWN_SIZE),
        Arguments.of("v1 minus one", 2_008_951L, 19_920_718, 1, 2, Reason.UNKNOWN_SIZE));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("badHeaders")
  void openReadOnly_badHeader_throwsTypedExceptionNamingWhatWasFound(
      String name, long size, int magic, int major, int minor, Reason reason) throws IOException {
    Path path = dir.resolve("bad.cache");
    try (RandomAccessFile raf = new RandomAccessFile(path.toFile(), "rw")) {
      raf.setLength(size);
      if (size >= 12) {
        ByteBuffer header = ByteBuffer.allocate(12).order(ByteOrder.LITTLE_ENDIAN);
        header.putInt(magic).putInt(major).putInt(minor);
        raf.write(header.array());
      } else if (size > 0) {
        raf.write(new byte[(int) size]);
      }
    }
    assertThatThrownBy(() -> RegionFile.openReadOnly(path))
        .isInstanceOf(RegionException.class)
        .satisfies(e -> assertThat(((RegionException) e).reason()).isEqualTo(reason))
        .satisfies(
            e -> {
              if (reason == Reason.UNKNOWN_VERSION) {
                assertThat(e).hasMessageContaining(major + "." + minor);
                assertThat(e).isInstanceOf(UnsupportedLayoutException.class);
              }
              if (reason == Reason.UNKNOWN_SIZE) {
                assertThat(e).hasMessageContaining(Long.toString(size));
              }
            });
  }

  @Test
  void openReadOnly_oneGibSparseFile_throwsTooLargeWithoutReading() throws IOException {
    Path path = dir.resolve("huge.cache");
    try (RandomAccessFile raf = new RandomAccessFile(path.toFile(), "rw")) {
      raf.setLength(1L << 30);
      raf.writeInt(Integer.reverseBytes(19_920_718));
    }
    assertThatThrownBy(() -> RegionFile.openReadOnly(path))
        .isInstanceOfSatisfying(
            RegionFormatException.class,
            e -> {
              assertThat(e.reason()).isEqualTo(Reason.TOO_LARGE);
              assertThat(e.fileSize()).isEqualTo(1L << 30);
            });
  }

  @Test
  void openReadOnly_symlinkToValidRegion_throwsSymlink() throws IOException {
    Path target = write("real.cache", Fixtures.typical(Layout.V1_2));
    Path link = Files.createSymbolicLink(dir.resolve("link.cache"), target);
    assertReason(() -> RegionFile.openReadOnly(link), Reason.SYMLINK);
  }

  @Test
  void openReadOnly_directory_throwsNotRegularFile() throws IOException {
    Path sub = Files.createDirectory(dir.resolve("sub.cache"));
    assertReason(() -> RegionFile.openReadOnly(sub), Reason.NOT_REGULAR_FILE);
  }

  @Test
  @Timeout(value = 20, unit = TimeUnit.SECONDS)
  void openReadOnly_fifoWithoutWriter_throwsNotRegularFileWithoutBlocking() throws Exception {
    Path fifo = dir.resolve("fifo.cache");
    Process mkfifo = new ProcessBuilder("mkfifo", fifo.toString()).inheritIO().start();
    assertThat(mkfifo.waitFor()).isZero();
    assertReason(() -> RegionFile.openReadOnly(fifo), Reason.NOT_REGULAR_FILE);
    assertReason(() -> RegionFile.openReadWrite(fifo), Reason.NOT_REGULAR_FILE);
  }

  @Test
  void opener_onLinuxWithProc_usesTheSafeOpenOnEveryArchitecture() {
    org.junit.jupiter.api.Assumptions.assumeTrue(
        Files.isDirectory(Path.of("/proc/self/fd")), "the safe open needs Linux with /proc");
    assertThat(io.vgpu.regioncodec.internal.Opener.nonBlockingOpenAvailable())
        .as(SafeOpen.describe())
        .isTrue();
  }

  @Test
  void openReadOnly_missingFile_throwsIoError() {
    assertReason(() -> RegionFile.openReadOnly(dir.resolve("absent.cache")), Reason.IO_ERROR);
  }

  @Test
  void openReadOnly_devNull_throwsNotRegularFile() {
    assertReason(() -> RegionFile.openReadOnly(Path.of("/dev/null")), Reason.NOT_REGULAR_FILE);
  }

  @Test
  void snapshot_fileTruncatedWhileMapped_throwsTruncatedAndJvmSurvives() throws IOException {
    Path path = write("t.cache", Fixtures.typical(Layout.V1_2));
    try (RegionFile file = RegionFile.openReadOnly(path)) {
      assertThat(file.snapshot().processes()).hasSize(3);
      try (RandomAccessFile raf = new RandomAccessFile(path.toFile(), "rw")) {
        raf.setLength(4096);
      }
      assertReason(file::snapshot, Reason.TRUNCATED);
      assertThat(file.changedOnDisk()).isTrue();
    }
  }

  /**
   * Issue 31 item 4: what a snapshot allocates is bounded by {@link
   * RegionFile#MAX_LIVE_USAGE_ENTRIES}, whatever the tenant's slot table claims: at the bound it is
   * read, one live slot past it fails typed (never cut silently), and a device a slot never used
   * costs no object of its own.
   */
  @Test
  void snapshot_liveSlotsTimesDevicesBounded_atTheBoundReadOnePastRefused() {
    int devices = 8;
    int atBound = RegionFile.MAX_LIVE_USAGE_ENTRIES / devices;
    try (RegionFile file =
        RegionFile.openReadOnly(
            write("bound.cache", Fixtures.busy(Layout.V1_2, devices, atBound)))) {
      assertThat(file.snapshot().processes()).hasSize(atBound);
    }
    try (RegionFile file =
        RegionFile.openReadOnly(
            write("over.cache", Fixtures.busy(Layout.V1_2, devices, atBound + 1)))) {
      assertReason(file::snapshot, Reason.TOO_MANY_LIVE_SLOTS);
    }
    try (RegionFile file =
        RegionFile.openReadOnly(write("bomb.cache", Fixtures.busy(Layout.V1_2, 16, 1024)))) {
      assertReason(file::snapshot, Reason.TOO_MANY_LIVE_SLOTS);
    }
    // A full table on one GPU is a real configuration and stays readable.
    try (RegionFile file =
        RegionFile.openReadOnly(write("full.cache", Fixtures.busy(Layout.V1_2, 1, 1024)))) {
      assertThat(file.snapshot().processes()).hasSize(1024);
    }
  }

  @Test
  void snapshot_unusedDevicesOfEverySlot_shareOneZeroUsage() {
    RegionSpec.Builder b = RegionSpec.builder(Layout.V1_2);
    for (int d = 0; d < 16; d++) {
      b.device("GPU-%08d-0000-0000-0000-000000000000".formatted(d), 1L << 30, 0);
    }
    for (int p = 0; p < 60; p++) {
      b.slot(100 + p, 200 + p, ProcessSlot.STATUS_RUNNING, new DeviceUsage(0, 1, 0, 1, 2, 2, 0));
    }
    try (RegionFile file = RegionFile.openReadOnly(write("zeros.cache", b.build()))) {
      var slots = file.snapshot().processes();
      assertThat(slots).hasSize(60);
      assertThat(slots.get(0).devices().get(0).totalBytes()).isEqualTo(2);
      assertThat(slots.get(0).devices().get(5)).isSameAs(slots.get(59).devices().get(5));
      assertThat(slots.get(0).devices().get(5).totalBytes()).isZero();
    }
  }

  @Test
  void readerOnTruncatedMapping_faultsAsInternalErrorNotSigbusCrash() throws IOException {
    // Bypasses the size check to prove the JVM turns the SIGBUS into an InternalError, which
    // snapshot() relies on when a truncation races with a read.
    Path path = write("t.cache", Fixtures.busy(Layout.V1_2, 8, 128));
    try (RegionFile file = RegionFile.openReadOnly(path)) {
      try (RandomAccessFile raf = new RandomAccessFile(path.toFile(), "rw")) {
        raf.setLength(0);
      }
      assertThatThrownBy(
              () ->
                  io.vgpu.regioncodec.internal.RegionReader.snapshot(
                      file.segment(), file.geometry(), false))
          .isInstanceOf(InternalError.class);
    }
  }

  @Test
  void snapshot_truncatedAndRegrownRepeatedlyWhileReading_neverEscapesTypedExceptions()
      throws Exception {
    Path path = write("race.cache", Fixtures.busy(Layout.V1_2, 8, 128));
    byte[] original = Files.readAllBytes(path);
    try (RegionFile file = RegionFile.openReadOnly(path)) {
      Thread truncator =
          Thread.ofPlatform()
              .start(
                  () -> {
                    for (int i = 0; i < 200; i++) {
                      try (RandomAccessFile raf = new RandomAccessFile(path.toFile(), "rw")) {
                        raf.setLength(i % 2 == 0 ? 8192 : original.length);
                      } catch (IOException e) {
                        throw new RuntimeException(e);
                      }
                      Thread.onSpinWait();
                    }
                  });
      int snapshots = 0;
      int truncated = 0;
      while (truncator.isAlive()) {
        try {
          file.snapshot();
          snapshots++;
        } catch (RegionIoException e) {
          assertThat(e.reason()).isEqualTo(Reason.TRUNCATED);
          truncated++;
        } catch (RegionException e) {
          // the regrown tail is zero, so the magic and versions at the start stay intact
          throw new AssertionError("unexpected " + e.reason(), e);
        }
      }
      truncator.join();
      assertThat(snapshots + truncated).isPositive();
    }
  }

  @Test
  void snapshot_fileReplacedWhileMapped_keepsReadingOldFileAndReportsChange() throws IOException {
    Path path = write("r.cache", Fixtures.typical(Layout.V1_2));
    try (RegionFile file = RegionFile.openReadOnly(path)) {
      assertThat(file.changedOnDisk()).isFalse();
      Path replacement = write("new.cache", Fixtures.busy(Layout.V1_2, 1, 1));
      Files.move(
          replacement, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
      assertThat(file.changedOnDisk()).isTrue();
      assertThat(file.snapshot().processes()).hasSize(3);
      Files.delete(path);
      assertThat(file.changedOnDisk()).isTrue();
    }
  }

  @Test
  void snapshot_magicOverwrittenAfterOpen_throwsBadMagic() {
    Path path = write("r.cache", Fixtures.typical(Layout.V1_2));
    try (RegionFile rw = RegionFile.openReadWrite(path);
        RegionFile ro = RegionFile.openReadOnly(path)) {
      io.vgpu.regioncodec.internal.Access.setIntRelease(rw.segment(), 0, 0);
      assertReason(ro::snapshot, Reason.BAD_MAGIC);
    }
  }

  @Test
  void snapshot_minorVersionChangedAfterOpen_throwsUnknownVersion() {
    Path path = write("r.cache", Fixtures.typical(Layout.V1_2));
    try (RegionFile rw = RegionFile.openReadWrite(path);
        RegionFile ro = RegionFile.openReadOnly(path)) {
      io.vgpu.regioncodec.internal.Access.setIntRelease(rw.segment(), 8, 1);
      assertReason(ro::snapshot, Reason.UNKNOWN_VERSION);
    }
  }

  @Test
  void snapshot_afterClose_throwsIllegalState() {
    RegionFile file = RegionFile.openReadOnly(write("r.cache", Fixtures.typical(Layout.V1_2)));
    file.close();
    file.close();
    assertThatThrownBy(file::snapshot).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void identity_matchesFileOnDisk() throws IOException {
    Path path = write("r.cache", Fixtures.typical(Layout.L0B));
    try (RegionFile file = RegionFile.openReadOnly(path)) {
      assertThat(file.identity().size()).isEqualTo(Layout.L0B.structSize() + 1);
      assertThat(file.identity().inode()).isEqualTo(Files.getAttribute(path, "unix:ino"));
      assertThat(file.identity().mtimeNanos())
          .isEqualTo(Files.getLastModifiedTime(path).to(TimeUnit.NANOSECONDS));
    }
  }

  @Test
  void snapshot_deviceNumHuge_clampsToSixteenDevices() {
    RegionSpec spec = RegionSpec.builder(Layout.V1_2).device("GPU-0", 1, 1).deviceNum(-1L).build();
    try (RegionFile file = RegionFile.openReadOnly(write("r.cache", spec))) {
      RegionSnapshot snapshot = file.snapshot();
      assertThat(snapshot.deviceCount()).isEqualTo(16);
      assertThat(snapshot.devices().get(15).uuid()).isEmpty();
    }
  }

  @Test
  void snapshot_procNumOutOfRange_clampsAndReportsRaw() {
    RegionSpec spec = Fixtures.busy(Layout.V1_2, 1, 3);
    for (int procNum : List.of(-5, 5000, Integer.MIN_VALUE)) {
      RegionSpec hostile = rebuildWithProcNum(spec, procNum);
      try (RegionFile file = RegionFile.openReadOnly(write("p" + procNum, hostile))) {
        RegionSnapshot snapshot = file.snapshot();
        assertThat(snapshot.rawProcNum()).isEqualTo(procNum);
        assertThat(snapshot.processes()).hasSize(procNum < 0 ? 0 : 3);
      }
    }
  }

  @Test
  void snapshot_duplicatePids_keepsFirstSlotOnly() {
    RegionSpec spec =
        RegionSpec.builder(Layout.V1_2)
            .device("GPU-0", 0, 0)
            .slot(7, 70, 1, DeviceUsage.ofMemory(0, 1, 0, 1))
            .slot(7, 71, 1, DeviceUsage.ofMemory(0, 9, 0, 9))
            .build();
    try (RegionFile file = RegionFile.openReadOnly(write("dup.cache", spec))) {
      assertThat(file.snapshot().processes())
          .singleElement()
          .satisfies(p -> assertThat(p.hostPid()).isEqualTo(70));
    }
  }

  @Test
  void snapshot_slotWithStuckOddSeqlock_settlesForBestEffortQuickly() {
    RegionSpec base = Fixtures.busy(Layout.V1_2, 2, 2);
    RegionSpec.Builder builder = RegionSpec.builder(Layout.V1_2);
    base.devices().forEach(d -> builder.device(d.uuid(), d.memoryLimitBytes(), d.smLimitPercent()));
    builder.slot(base.slots().get(0).withSeqlock(3)).slot(base.slots().get(1));
    try (RegionFile file = RegionFile.openReadOnly(write("odd.cache", builder.build()))) {
      RegionSnapshot snapshot = file.snapshot();
      assertThat(snapshot.bestEffort()).isTrue();
      assertThat(snapshot.tornRetries()).isPositive();
      assertThat(snapshot.processes()).hasSize(2);
    }
  }

  @Test
  void snapshot_invalidUtf8Uuid_isSanitized() {
    RegionSpec spec = RegionSpec.builder(Layout.V1_2).device("GPU-x", 0, 0).build();
    byte[] bytes = RegionWriter.encode(spec);
    bytes[64 + 4] = (byte) 0xff;
    bytes[64 + 5] = (byte) 0x07;
    try (RegionFile file = RegionFile.openReadOnly(writeBytesUnchecked("u.cache", bytes))) {
      assertThat(file.snapshot().devices().get(0).uuid()).isEqualTo("GPU-\uFFFD\uFFFD");
    }
  }

  private Path writeBytesUnchecked(String name, byte[] bytes) {
    try {
      return writeBytes(name, bytes);
    } catch (IOException e) {
      throw new RuntimeException(e);
    }
  }

  static void assertReason(
      org.assertj.core.api.ThrowableAssert.ThrowingCallable call, Reason reason) {
    assertThatThrownBy(call)
        .isInstanceOf(RegionException.class)
        .satisfies(e -> assertThat(((RegionException) e).reason()).isEqualTo(reason));
  }

  static RegionSpec rebuildWithSize(RegionSpec s, long size) {
    return new RegionSpec(
        s.layout(),
        s.majorVersion(),
        s.minorVersion(),
        s.ownerPid(),
        s.smInitFlag(),
        s.deviceNum(),
        s.devices(),
        s.procNum(),
        s.utilizationSwitch(),
        s.recentKernel(),
        s.priority(),
        s.lastKernelTimeEpochSeconds(),
        s.slots(),
        s.extension(),
        size);
  }

  static RegionSpec rebuildWithProcNum(RegionSpec s, int procNum) {
    return new RegionSpec(
        s.layout(),
        s.majorVersion(),
        s.minorVersion(),
        s.ownerPid(),
        s.smInitFlag(),
        s.deviceNum(),
        s.devices(),
        procNum,
        s.utilizationSwitch(),
        s.recentKernel(),
        s.priority(),
        s.lastKernelTimeEpochSeconds(),
        s.slots(),
        s.extension(),
        s.fileSize());
  }
}

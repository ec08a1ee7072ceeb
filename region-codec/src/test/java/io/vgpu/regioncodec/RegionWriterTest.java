package io.vgpu.regioncodec;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class RegionWriterTest {
  @TempDir Path dir;

  @Test
  void encode_v12_placesFieldsAtHamiOffsets() {
    RegionSpec spec = Fixtures.typical(Layout.V1_2);
    ByteBuffer b = ByteBuffer.wrap(RegionWriter.encode(spec)).order(ByteOrder.LITTLE_ENDIAN);
    assertThat(b.capacity()).isEqualTo(2_008_953);
    assertThat(new byte[] {b.get(0), b.get(1), b.get(2), b.get(3)})
        .containsExactly(0x4e, 0xf7, 0x2f, 0x01);
    assertThat(b.getInt(4)).isEqualTo(1);
    assertThat(b.getInt(8)).isEqualTo(2);
    assertThat(b.getLong(56)).isEqualTo(2);
    assertThat(new String(b.array(), 64, 40, java.nio.charset.StandardCharsets.US_ASCII))
        .isEqualTo("GPU-11111111-2222-3333-4444-555555555555");
    assertThat(b.get(64 + 40)).isZero();
    assertThat(b.getLong(1600)).isEqualTo(8 * Fixtures.GIB);
    assertThat(b.getLong(1728)).isEqualTo(50);
    int slot0 = 1856;
    assertThat(b.getInt(slot0)).isEqualTo(101);
    assertThat(b.getInt(slot0 + 4)).isEqualTo(4101);
    assertThat(b.getLong(slot0 + 8 + 32)).as("used[0].total").isEqualTo(1000);
    assertThat(b.getLong(slot0 + 8)).as("used[0].context_size").isEqualTo(300);
    assertThat(b.getLong(slot0 + 8 + 16)).as("used[0].data_size").isEqualTo(700);
    assertThat(b.getLong(slot0 + 8 + 64 + 32)).as("used[1].total").isEqualTo(30);
    assertThat(b.getLong(slot0 + 1032)).as("monitorused[0]").isEqualTo(1100);
    assertThat(b.getLong(slot0 + 1160 + 16)).as("device_util[0].sm_util").isEqualTo(35);
    assertThat(b.getInt(slot0 + 1928)).as("status").isEqualTo(1);
    assertThat(b.getLong(slot0 + 1936)).as("seqlock").isZero();
    int slot2 = 1856 + 2 * 1960;
    assertThat(b.getInt(slot2)).isEqualTo(102);
    assertThat(b.getInt(slot2 + 1928)).isEqualTo(2);
    assertThat(b.getInt(2_008_896)).as("proc_num").isEqualTo(4);
    assertThat(b.getInt(2_008_900)).as("utilization_switch").isEqualTo(1);
    assertThat(b.getInt(2_008_904)).as("recent_kernel").isEqualTo(2);
    assertThat(b.getInt(2_008_908)).as("priority").isEqualTo(1);
    assertThat(b.getLong(2_008_912)).as("last_kernel_time").isEqualTo(1_790_000_000L);
    assertThat(b.get(24)).as("sem value 1, as sem_init(pshared, 1) stores it").isEqualTo((byte) 1);
    assertThat(b.get(2_008_920)).as("sem_postinit value 1").isEqualTo((byte) 1);
    assertThat(b.get(2_008_952)).as("the library's trailing byte").isZero();
  }

  @Test
  void encode_brokenLayout_shiftsHeaderBy32AndSlotFieldsBy8() {
    ByteBuffer b =
        ByteBuffer.wrap(RegionWriter.encode(Fixtures.typical(Layout.V1_1_BROKEN)))
            .order(ByteOrder.LITTLE_ENDIAN);
    assertThat(b.capacity()).isEqualTo(2_008_985);
    assertThat(b.getLong(88)).as("device_num").isEqualTo(2);
    assertThat(b.getLong(1632)).as("limit[0]").isEqualTo(8 * Fixtures.GIB);
    int slot0 = 1888;
    assertThat(b.getInt(slot0)).isEqualTo(101);
    assertThat(b.getLong(slot0 + 16 + 32)).as("used[0].total").isEqualTo(1000);
    assertThat(b.getLong(slot0 + 1040)).as("monitorused[0]").isEqualTo(1100);
    assertThat(b.getInt(slot0 + 1936)).as("status").isEqualTo(1);
    assertThat(b.getInt(2_008_928)).as("proc_num").isEqualTo(4);
    assertThat(b.getLong(2_008_944)).as("last_kernel_time").isEqualTo(1_790_000_000L);
  }

  @Test
  void encode_l0a_usesFortyByteDeviceMemoryAndNoVersionFields() {
    ByteBuffer b =
        ByteBuffer.wrap(RegionWriter.encode(Fixtures.typical(Layout.L0A)))
            .order(ByteOrder.LITTLE_ENDIAN);
    assertThat(b.capacity()).isEqualTo(804_681);
    assertThat(b.getInt(4)).as("sm_init_flag, not a version").isZero();
    assertThat(b.getLong(48)).as("num").isEqualTo(2);
    int slot0 = 1848;
    assertThat(b.getLong(slot0 + 8 + 40 + 32)).as("used[1].total").isEqualTo(30);
    assertThat(b.getLong(slot0 + 648)).as("monitorused[0]").isEqualTo(1100);
    assertThat(b.getInt(slot0 + 776)).as("status").isEqualTo(1);
    assertThat(b.getInt(804_664)).as("proc_num").isEqualTo(4);
  }

  @ParameterizedTest
  @EnumSource(Layout.class)
  void singleFieldUpdates_areVisibleToReaders(Layout layout) {
    Path path = dir.resolve("w.cache");
    RegionWriter.create(path, Fixtures.typical(layout));
    try (RegionFile rw = RegionFile.openReadWrite(path);
        RegionFile ro = RegionFile.openReadOnly(path)) {
      RegionWriter writer = rw.writer();
      writer.setHostPid(0, 999);
      writer.setMemoryLimit(1, 123_456);
      writer.setSmLimit(0, 25);
      writer.setUtilizationSwitch(0);
      writer.setRecentKernel(-1);
      RegionSnapshot s = ro.snapshot();
      assertThat(s.processes().get(0).hostPid()).isEqualTo(999);
      assertThat(s.devices().get(1).memoryLimitBytes()).isEqualTo(123_456);
      assertThat(s.devices().get(0).smLimitPercent()).isEqualTo(25);
      assertThat(s.utilizationSwitch()).isZero();
      assertThat(s.recentKernel()).isEqualTo(-1);

      RegionSpec.SlotSpec slot =
          RegionSpec.SlotSpec.of(555, 5550, 1, List.of(DeviceUsage.ofMemory(1, 7, 0, 8)));
      writer.putSlot(4, slot);
      writer.setProcNum(5);
      writer.updateUsage(0, DeviceUsage.ofMemory(0, 1, 1, 1));
      writer.setStatus(2, 0);
      RegionSnapshot after = ro.snapshot();
      assertThat(after.processes()).extracting(ProcessSlot::pid).containsExactly(101, 103, 555);
      assertThat(after.processes().get(0).devices().get(0).totalBytes()).isEqualTo(3);
      assertThat(after.processes().get(2).devices().get(1).totalBytes()).isEqualTo(15);
      assertThat(after.processes().get(2).devices().get(0).totalBytes()).isZero();
      assertThat(after.bestEffort()).isFalse();
    }
  }

  @Test
  void putSlot_seqlockLayout_leavesSeqlockEvenAndAdvanced() {
    Path path = dir.resolve("w.cache");
    RegionWriter.create(path, Fixtures.typical(Layout.V1_2));
    try (RegionFile rw = RegionFile.openReadWrite(path)) {
      rw.writer().putSlot(0, RegionSpec.SlotSpec.of(1, 1, 1, List.of()));
      rw.writer().updateUsage(0, DeviceUsage.ofMemory(0, 1, 0, 0));
      long seqlock =
          ByteBuffer.wrap(readAll(path)).order(ByteOrder.LITTLE_ENDIAN).getLong(1856 + 1936);
      assertThat(seqlock).isEqualTo(4);
    }
  }

  @Test
  void setLastKernelTimeSemaphoreAndExtensionDevice_landAtTheirOffsetsAndReadBack() {
    Path path = dir.resolve("w.cache");
    RegionWriter.create(path, Fixtures.withExtension());
    byte[] before = readAll(path);
    ExtensionDevice counters = new ExtensionDevice(1, 3, 4, 5, 6, 7, 8, 9);
    try (RegionFile rw = RegionFile.openReadWrite(path)) {
      RegionWriter w = rw.writer();
      w.setLastKernelTime(1_700_000_123L);
      w.setSemaphoreValue(0);
      w.setExtensionDevice(counters);
      RegionSnapshot s = rw.snapshot();
      assertThat(s.lastKernelTimeEpochSeconds()).isEqualTo(1_700_000_123L);
      assertThat(s.extension().orElseThrow().devices()).contains(counters);
    }
    ByteBuffer after = ByteBuffer.wrap(readAll(path)).order(ByteOrder.LITTLE_ENDIAN);
    assertThat(after.getLong(2_008_912)).isEqualTo(1_700_000_123L);
    assertThat(after.getInt(24)).isZero();
    long device1 = 2_008_960L + 448 + 64;
    for (int f = 0; f < 7; f++) {
      assertThat(after.getLong((int) device1 + 8 * f)).as("field %d", f).isEqualTo(3L + f);
    }
    // nothing else moved
    int changed = 0;
    byte[] now = after.array();
    for (int i = 0; i < before.length; i++) {
      if (before[i] != now[i]) {
        changed++;
        assertThat(
                (i >= 2_008_912 && i < 2_008_920)
                    || (i >= 24 && i < 28)
                    || (i >= device1 && i < device1 + 56))
            .as("byte %d changed", i)
            .isTrue();
      }
    }
    assertThat(changed).isPositive();
  }

  @Test
  void setLastKernelTime_onL0_andExtensionDevice_withoutExtension_throwIllegalState() {
    Path l0 = dir.resolve("l0.cache");
    RegionWriter.create(l0, Fixtures.typical(Layout.L0B));
    try (RegionFile rw = RegionFile.openReadWrite(l0)) {
      assertThatThrownBy(() -> rw.writer().setLastKernelTime(1))
          .isInstanceOf(IllegalStateException.class);
      assertThatThrownBy(() -> rw.writer().setExtensionDevice(ExtensionDevice.zero(0)))
          .isInstanceOf(IllegalStateException.class);
      assertThatThrownBy(() -> rw.writer().setSemaphoreValue(-1))
          .isInstanceOf(IllegalArgumentException.class);
    }
  }

  @Test
  void writer_onReadOnlyFile_throwsIllegalState() {
    Path path = dir.resolve("w.cache");
    RegionWriter.create(path, Fixtures.typical(Layout.V1_2));
    try (RegionFile ro = RegionFile.openReadOnly(path)) {
      assertThatThrownBy(ro::writer).isInstanceOf(IllegalStateException.class);
    }
  }

  @Test
  void writer_outOfRangeArguments_throwIllegalArgument() {
    Path path = dir.resolve("w.cache");
    RegionWriter.create(path, Fixtures.typical(Layout.V1_2));
    try (RegionFile rw = RegionFile.openReadWrite(path)) {
      RegionWriter w = rw.writer();
      assertThatThrownBy(() -> w.setHostPid(1024, 1)).isInstanceOf(IllegalArgumentException.class);
      assertThatThrownBy(() -> w.setMemoryLimit(16, 1))
          .isInstanceOf(IllegalArgumentException.class);
      assertThatThrownBy(() -> w.setSmLimit(-1, 1)).isInstanceOf(IllegalArgumentException.class);
      assertThatThrownBy(() -> w.setMemoryLimit(0, -1))
          .isInstanceOf(IllegalArgumentException.class);
    }
  }

  @Test
  void writer_afterTruncation_throwsTruncated() throws Exception {
    Path path = dir.resolve("w.cache");
    RegionWriter.create(path, Fixtures.typical(Layout.V1_2));
    try (RegionFile rw = RegionFile.openReadWrite(path)) {
      try (var raf = new java.io.RandomAccessFile(path.toFile(), "rw")) {
        raf.setLength(100);
      }
      RegionFileTest.assertReason(
          () -> rw.writer().setRecentKernel(0), RegionException.Reason.TRUNCATED);
    }
  }

  @Test
  void spec_rejectsWhatCannotBeWritten() {
    assertThatThrownBy(() -> RegionSpec.builder(Layout.L0B).extension(extension()).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("L0b");
    assertThatThrownBy(() -> RegionSpec.builder(Layout.V1_2).fileSize(100).build())
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> RegionSpec.builder(Layout.V1_2).device("x".repeat(96), 0, 0))
        .isInstanceOf(IllegalArgumentException.class);
    RegionSpec l0a =
        RegionSpec.builder(Layout.L0A)
            .device("GPU-0", 0, 0)
            .slot(1, 1, 1, new DeviceUsage(0, 0, 0, 0, 0, 0, 5))
            .build();
    assertThatThrownBy(() -> RegionWriter.encode(l0a))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("sm_util");
  }

  @Test
  void create_overSymlink_refusesToFollow() throws Exception {
    Path target = dir.resolve("target");
    Files.writeString(target, "keep");
    Path link = Files.createSymbolicLink(dir.resolve("link"), target);
    assertThatThrownBy(() -> RegionWriter.create(link, Fixtures.typical(Layout.V1_2)))
        .isInstanceOf(RegionIoException.class);
    assertThat(Files.readString(target)).isEqualTo("keep");
  }

  private static RegionExtension extension() {
    return new RegionExtension(1, 0, 0, 0, "", "", "", 0, 0, List.of());
  }

  private static byte[] readAll(Path path) {
    try {
      return Files.readAllBytes(path);
    } catch (java.io.IOException e) {
      throw new RuntimeException(e);
    }
  }
}

package io.vgpu.exporter.attribution;

import static io.vgpu.exporter.attribution.World.GIB;
import static io.vgpu.exporter.attribution.World.GPU0;
import static io.vgpu.exporter.attribution.World.spec;
import static io.vgpu.exporter.attribution.World.usage;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSnapshot;
import io.vgpu.regioncodec.RegionWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalInt;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The audited writer on real region files. */
class RegionWriteBackTest {
  @TempDir Path dir;

  private static RegionSnapshot read(Path p) {
    try (RegionFile f = RegionFile.openReadOnly(p)) {
      return f.snapshot();
    }
  }

  @Test
  void repairHostPid_slotMovedByCompaction_writesTheSlotThatNowHoldsThePid() {
    Path p = dir.resolve("r.cache");
    // pid 7 was in slot 1 when attribution looked; HAMi-core since moved it to slot 0
    RegionWriter.create(
        p, spec(GPU0).slot(7, 7, 1, usage(0, GIB, 0)).slot(8, 8, 1, usage(0, GIB, 0)).build());
    try (RegionWriteBack w = new RegionWriteBack()) {
      assertThat(w.repairHostPid(p, 8, 4008, "test")).isTrue();
      assertThat(w.repairHostPid(p, 8, 4008, "test")).isFalse(); // already right: no write
      assertThat(w.repairHostPid(p, 99, 4099, "test")).isFalse(); // pid no longer there
      assertThat(w.writes()).containsEntry(RegionWriteBack.HOSTPID, 1L);
    }
    RegionSnapshot s = read(p);
    assertThat(s.processes())
        .extracting(x -> x.pid() + ":" + x.hostPid())
        .containsExactly("7:7", "8:4008");
  }

  @Test
  void apply_fileReplacedBetweenWrites_remapsAndWritesTheNewFile() throws Exception {
    Path p = dir.resolve("r.cache");
    RegionWriter.create(p, spec(GPU0).recentKernel(2).utilizationSwitch(1).build());
    try (RegionWriteBack w = new RegionWriteBack()) {
      w.apply(new FeedbackLoop.Decision(p, OptionalInt.of(1), OptionalInt.empty(), false), "test");
      assertThat(read(p).recentKernel()).isEqualTo(1);
      Path tmp = dir.resolve("new.cache");
      RegionWriter.create(tmp, spec(GPU0).recentKernel(2).utilizationSwitch(1).build());
      Files.move(tmp, p, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
      w.apply(new FeedbackLoop.Decision(p, OptionalInt.of(-1), OptionalInt.of(1), true), "test");
      assertThat(read(p).recentKernel()).isEqualTo(-1);
      assertThat(w.writes())
          .containsEntry(RegionWriteBack.RECENT_KERNEL, 2L)
          .containsEntry(RegionWriteBack.UTILIZATION_SWITCH, 1L);
      w.retainOnly(Set.of());
      assertThat(w.mapped()).isZero();
    }
  }

  @Test
  void apply_fileGone_returnsFalseAndCountsNothing() {
    try (RegionWriteBack w = new RegionWriteBack()) {
      boolean ok =
          w.apply(
              new FeedbackLoop.Decision(
                  dir.resolve("gone.cache"), OptionalInt.of(0), OptionalInt.empty(), false),
              "test");
      assertThat(ok).isFalse();
      assertThat(w.writes().values()).containsOnly(0L);
    }
  }

  @Test
  void apply_symlinkedRegion_isRefused() throws Exception {
    Path real = dir.resolve("real.cache");
    RegionWriter.create(real, spec(GPU0).recentKernel(2).build());
    Path link = dir.resolve("link.cache");
    Files.createSymbolicLink(link, real);
    try (RegionWriteBack w = new RegionWriteBack()) {
      assertThat(
              w.apply(
                  new FeedbackLoop.Decision(link, OptionalInt.of(-1), OptionalInt.empty(), true),
                  "t"))
          .isFalse();
    }
    assertThat(read(real).recentKernel()).isEqualTo(2);
  }
}

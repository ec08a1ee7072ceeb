package io.vgpu.regioncodec;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 31 item 4: a region's claimed {@code proc_num} costs nothing until its slots are live. A
 * region that says {@code proc_num} = 1024 on 16 devices with one live slot (the other entries
 * free, or repeating the live slot's pid) allocates, per snapshot, what a region of that one slot
 * allocates. Before, the pid set of a pass was sized by the claim (8 KiB per snapshot, on every
 * scrape of every name of the file).
 */
class ClaimedSlotsHeapTest {
  private static final int DEVICES = 16;

  /** Slack for what a measurement of the same work may differ by (no claim-sized array fits). */
  private static final long SLACK_BYTES = 128;

  @TempDir Path dir;

  @Test
  void claimed1024Slots_oneLive_allocateWhatOneSlotAllocates() throws Throwable {
    RegionSpec one = Fixtures.busy(Layout.V1_2, DEVICES, 1);
    RegionSpec claimedFree = withProcNum(one, 1024);
    RegionSpec claimedDuplicates = duplicatePids(one, 1024);

    try (RegionFile base = open("one.cache", one);
        RegionFile free = open("claimed-free.cache", claimedFree);
        RegionFile dup = open("claimed-dup.cache", claimedDuplicates)) {
      assertThat(free.snapshot().rawProcNum()).isEqualTo(1024);
      assertThat(free.snapshot().processes()).hasSize(1);
      assertThat(dup.snapshot().processes()).hasSize(1);

      long baseBytes = bytesPerSnapshot(base);
      long freeBytes = bytesPerSnapshot(free);
      long dupBytes = bytesPerSnapshot(dup);
      System.out.printf(
          "region-codec: bytes allocated per snapshot, 16 devices, 1 live slot: proc_num=1 %d,"
              + " proc_num=1024 (free entries) %d, proc_num=1024 (one pid repeated) %d%n",
          baseBytes, freeBytes, dupBytes);
      assertThat(freeBytes).isLessThanOrEqualTo(baseBytes + SLACK_BYTES);
      assertThat(dupBytes).isLessThanOrEqualTo(baseBytes + SLACK_BYTES);
    }
  }

  private RegionFile open(String name, RegionSpec spec) {
    Path path = dir.resolve(name);
    RegionWriter.create(path, spec);
    return RegionFile.openReadOnly(path);
  }

  private static RegionSpec withProcNum(RegionSpec spec, int procNum) {
    RegionSpec.Builder b = rebuild(spec);
    for (RegionSpec.SlotSpec s : spec.slots()) {
      b.slot(s);
    }
    return b.procNum(procNum).build();
  }

  /** {@code n} slots that all carry the first slot's pid (one process after de-duplication). */
  private static RegionSpec duplicatePids(RegionSpec spec, int n) {
    RegionSpec.Builder b = rebuild(spec);
    for (int i = 0; i < n; i++) {
      b.slot(spec.slots().getFirst());
    }
    return b.build();
  }

  private static RegionSpec.Builder rebuild(RegionSpec spec) {
    RegionSpec.Builder b = RegionSpec.builder(spec.layout());
    for (RegionSpec.DeviceSpec d : spec.devices()) {
      b.device(d.uuid(), d.memoryLimitBytes(), d.smLimitPercent());
    }
    return b;
  }

  /** The median of the bytes one snapshot allocates on this thread, after warm-up. */
  private static long bytesPerSnapshot(RegionFile file) throws Throwable {
    // com.sun.management's bean through a handle: the tests compile inside the codec's module,
    // which does not read jdk.management (they run on the class path, which does).
    MethodHandle allocated =
        MethodHandles.publicLookup()
            .findVirtual(
                Class.forName("com.sun.management.ThreadMXBean"),
                "getCurrentThreadAllocatedBytes",
                MethodType.methodType(long.class))
            .bindTo(ManagementFactory.getThreadMXBean());
    for (int i = 0; i < 2_000; i++) {
      file.snapshot();
    }
    long[] samples = new long[101];
    for (int i = 0; i < samples.length; i++) {
      long before = (long) allocated.invoke();
      file.snapshot();
      samples[i] = (long) allocated.invoke() - before;
    }
    Arrays.sort(samples);
    return samples[samples.length / 2];
  }
}

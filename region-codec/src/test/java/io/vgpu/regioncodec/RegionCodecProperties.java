package io.vgpu.regioncodec;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.regioncodec.RegionSpec.SlotSpec;
import io.vgpu.regioncodec.internal.Extension;
import io.vgpu.regioncodec.internal.Geometry;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.SplittableRandom;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.ShrinkingMode;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;

/**
 * Fuzz-style and round-trip properties of the codec, 10 100 cases in all (about 30 s on two cores):
 * arbitrary bytes and mutated valid files decode to a snapshot or a {@link RegionException} and
 * nothing else, every snapshot satisfies the invariants, and what the writer writes reads back as
 * the spec says, byte for byte for canonical files. Run alone with {@code ./mvnw -o -pl
 * region-codec test -Dtest=RegionCodecProperties}.
 */
class RegionCodecProperties {
  private static final long MAX_SIZE = Extension.FILE_SIZE + 1;
  private static Arena arena;
  private static MemorySegment scratch;
  private static final Map<Layout, byte[]> VALID = new EnumMap<>(Layout.class);
  private static byte[] validWithExtension;

  @BeforeContainer
  @SuppressWarnings("MustBeClosedChecker") // closed in @AfterContainer
  static void allocate() {
    arena = Arena.ofShared();
    scratch = arena.allocate(MAX_SIZE + 8, 8);
    for (Layout layout : Layout.values()) {
      VALID.put(layout, RegionWriter.encode(Fixtures.busy(layout, 4, 12)));
    }
    validWithExtension = RegionWriter.encode(Fixtures.withExtension());
  }

  @AfterContainer
  static void release() {
    arena.close();
  }

  // ---- fuzz: arbitrary bytes ----------------------------------------------------------------

  @Provide
  Arbitrary<Long> interestingSizes() {
    List<Long> sizes = new ArrayList<>();
    for (Layout layout : Layout.values()) {
      sizes.add(layout.structSize());
      sizes.add(layout.structSize() + 1);
      sizes.add(layout.structSize() - 1);
      sizes.add(layout.structSize() + 2);
    }
    sizes.add(Extension.FILE_SIZE);
    sizes.add(Extension.FILE_SIZE - 1);
    return Arbitraries.oneOf(
        Arbitraries.of(sizes),
        Arbitraries.longs().between(0, 64),
        Arbitraries.longs().between(0, MAX_SIZE));
  }

  @Property(tries = 3000, shrinking = ShrinkingMode.OFF)
  void anyBytes_decodeToSnapshotOrRegionException(
      @ForAll("interestingSizes") long size,
      @ForAll long seed,
      @ForAll("headerStyle") int headerStyle) {
    fillRandom(scratch, size, seed);
    if (size >= 12 && headerStyle > 0) {
      // Most random files would stop at the magic; stamp a plausible header on most of them.
      scratch.set(ValueLayout.JAVA_INT_UNALIGNED, 0, Geometry.MAGIC);
      if (headerStyle > 1) {
        scratch.set(ValueLayout.JAVA_INT_UNALIGNED, 4, 1);
        scratch.set(ValueLayout.JAVA_INT_UNALIGNED, 8, headerStyle == 2 ? 1 : 2);
      }
    }
    decodeAndCheck(scratch, size);
  }

  @Provide
  Arbitrary<Integer> headerStyle() {
    return Arbitraries.integers().between(0, 3);
  }

  @Property(tries = 300, shrinking = ShrinkingMode.OFF)
  void anyBytesOnDisk_openAndSnapshotGiveSnapshotOrRegionException(
      @ForAll("interestingSizes") long size, @ForAll long seed) throws Exception {
    fillRandom(scratch, size, seed);
    if (size >= 12 && (seed & 3) != 0) {
      scratch.set(ValueLayout.JAVA_INT_UNALIGNED, 0, Geometry.MAGIC);
      scratch.set(ValueLayout.JAVA_INT_UNALIGNED, 4, 1);
      scratch.set(ValueLayout.JAVA_INT_UNALIGNED, 8, 2);
    }
    Path file = Files.createTempFile("fuzz", ".cache");
    try {
      try (var channel =
          java.nio.channels.FileChannel.open(file, java.nio.file.StandardOpenOption.WRITE)) {
        channel.write(scratch.asSlice(0, size).asByteBuffer());
      }
      try (RegionFile region = RegionFile.openReadOnly(file)) {
        checkInvariants(region.snapshot());
      } catch (RegionException expected) {
        assertThat(expected.reason()).isNotNull();
      }
    } finally {
      Files.delete(file);
    }
  }

  // ---- fuzz: mutated valid files -------------------------------------------------------------

  @Provide
  Arbitrary<byte[]> validFiles() {
    return Arbitraries.of(
        VALID.get(Layout.L0A),
        VALID.get(Layout.L0B),
        VALID.get(Layout.V1_1),
        VALID.get(Layout.V1_1_BROKEN),
        VALID.get(Layout.V1_2),
        validWithExtension);
  }

  @Property(tries = 5000, shrinking = ShrinkingMode.OFF)
  void mutatedValidFiles_decodeToSnapshotOrRegionException(
      @ForAll("validFiles") byte[] valid, @ForAll long seed) {
    SplittableRandom random = new SplittableRandom(seed);
    MemorySegment.copy(valid, 0, scratch, ValueLayout.JAVA_BYTE, 0, valid.length);
    long size = valid.length;
    int mutations = 1 + random.nextInt(8);
    for (int m = 0; m < mutations; m++) {
      long offset = interestingOffset(random, size);
      int width = new int[] {1, 4, 8}[random.nextInt(3)];
      long value =
          switch (random.nextInt(5)) {
            case 0 -> 0;
            case 1 -> -1;
            case 2 -> random.nextInt(2048) - 16;
            case 3 -> 1L << random.nextInt(64);
            default -> random.nextLong();
          };
      for (int b = 0; b < width && offset + b < size; b++) {
        scratch.set(ValueLayout.JAVA_BYTE, offset + b, (byte) (value >>> (8 * b)));
      }
    }
    if (random.nextInt(10) == 0) {
      size = Math.max(0, size - random.nextInt(64)); // a few truncated or shortened files too
    }
    decodeAndCheck(scratch, size);
  }

  /**
   * Half the mutations hit the header, proc_num and the first slots, where parsing decisions live.
   */
  private static long interestingOffset(SplittableRandom random, long size) {
    return switch (random.nextInt(4)) {
      case 0 -> random.nextLong(Math.min(size, 2048));
      case 1 -> {
        long tail = Math.max(0, Math.min(size, 2_009_000) - 128);
        yield Math.min(size - 1, 804_600 + random.nextLong(Math.max(1, tail - 804_600 + 128)));
      }
      case 2 -> 1848 + random.nextLong(8 * 1960);
      default -> random.nextLong(size);
    };
  }

  // ---- round trips -----------------------------------------------------------------------------

  @Provide
  Arbitrary<RegionSpec> specs() {
    return Arbitraries.randomValue(random -> randomSpec(random, false));
  }

  @Provide
  Arbitrary<RegionSpec> canonicalSpecs() {
    return Arbitraries.randomValue(random -> randomSpec(random, true));
  }

  /**
   * Whether the spec's live slots times devices pass what one snapshot reads ({@link
   * RegionFile#MAX_LIVE_USAGE_ENTRIES}): such a region is refused, typed, never read in part.
   */
  private static boolean overLiveBound(RegionSpec spec) {
    RegionSnapshot e = Fixtures.expected(spec, 0);
    return (long) e.processes().size() * Math.max(1, e.deviceCount())
        > RegionFile.MAX_LIVE_USAGE_ENTRIES;
  }

  private static void assertRefusedOverBound(
      org.assertj.core.api.ThrowableAssert.ThrowingCallable read) {
    org.assertj.core.api.Assertions.assertThatThrownBy(read)
        .isInstanceOfSatisfying(
            RegionFormatException.class,
            e -> assertThat(e.reason()).isEqualTo(RegionException.Reason.TOO_MANY_LIVE_SLOTS));
  }

  @Property(tries = 1000, shrinking = ShrinkingMode.OFF)
  void anySpec_readsBackAsTheProtocolSays(@ForAll("specs") RegionSpec spec) {
    byte[] bytes = RegionWriter.encode(spec);
    assertThat((long) bytes.length).isEqualTo(spec.fileSize());
    MemorySegment.copy(bytes, 0, scratch, ValueLayout.JAVA_BYTE, 0, bytes.length);
    if (overLiveBound(spec)) {
      assertRefusedOverBound(() -> InMemoryRegion.decode(scratch, bytes.length));
      return;
    }
    RegionSnapshot snapshot = InMemoryRegion.decode(scratch, bytes.length);
    assertSameSnapshot(snapshot, Fixtures.expected(spec, snapshot.tornRetries()));
    checkInvariants(snapshot);
  }

  @Property(tries = 700, shrinking = ShrinkingMode.OFF)
  void canonicalSpec_bytesSurviveReadAndRewriteExactly(@ForAll("canonicalSpecs") RegionSpec spec) {
    byte[] bytes = RegionWriter.encode(spec);
    MemorySegment.copy(bytes, 0, scratch, ValueLayout.JAVA_BYTE, 0, bytes.length);
    if (overLiveBound(spec)) {
      assertRefusedOverBound(() -> InMemoryRegion.decode(scratch, bytes.length));
      return;
    }
    RegionSnapshot snapshot = InMemoryRegion.decode(scratch, bytes.length);
    assertThat(snapshot.bestEffort()).isFalse();
    byte[] rewritten = RegionWriter.encode(Fixtures.specOf(snapshot, spec.fileSize()));
    assertSameBytes(rewritten, bytes);
  }

  @Property(tries = 100, shrinking = ShrinkingMode.OFF)
  void canonicalSpec_onDisk_readsBackIdentically(@ForAll("canonicalSpecs") RegionSpec spec)
      throws Exception {
    Path file = Files.createTempFile("roundtrip", ".cache");
    try {
      RegionWriter.create(file, spec);
      try (RegionFile region = RegionFile.openReadOnly(file)) {
        assertThat(region.layout()).isEqualTo(spec.layout());
        if (overLiveBound(spec)) {
          assertRefusedOverBound(region::snapshot);
          return;
        }
        RegionSnapshot snapshot = region.snapshot();
        assertThat(snapshot).isEqualTo(Fixtures.expected(spec, 0));
        assertSameBytes(
            RegionWriter.encode(Fixtures.specOf(snapshot, spec.fileSize())),
            Files.readAllBytes(file));
      }
    } finally {
      Files.delete(file);
    }
  }

  // ---- helpers ---------------------------------------------------------------------------------

  /** Byte equality that reports the first differing offset instead of two 2 MB dumps. */
  static void assertSameBytes(byte[] actual, byte[] expected) {
    assertThat(actual.length).as("length").isEqualTo(expected.length);
    int mismatch = java.util.Arrays.mismatch(actual, expected);
    assertThat(mismatch)
        .as(
            "first differing offset (actual %s, expected %s)",
            mismatch < 0 ? "" : actual[mismatch], mismatch < 0 ? "" : expected[mismatch])
        .isEqualTo(-1);
  }

  /** Snapshot equality that names the differing component. */
  static void assertSameSnapshot(RegionSnapshot actual, RegionSnapshot expected) {
    var components = RegionSnapshot.class.getRecordComponents();
    for (var component : components) {
      try {
        Object a = component.getAccessor().invoke(actual);
        Object e = component.getAccessor().invoke(expected);
        if (a instanceof List<?> la && e instanceof List<?> le) {
          assertThat(la.size()).as(component.getName() + ".size").isEqualTo(le.size());
          for (int i = 0; i < la.size(); i++) {
            assertThat(la.get(i)).as(component.getName() + "[" + i + "]").isEqualTo(le.get(i));
          }
        }
        assertThat(a).as(component.getName()).isEqualTo(e);
      } catch (ReflectiveOperationException x) {
        throw new LinkageError("record accessor", x);
      }
    }
  }

  private static void decodeAndCheck(MemorySegment segment, long size) {
    RegionSnapshot snapshot;
    try {
      snapshot = InMemoryRegion.decode(segment, size);
    } catch (RegionException expected) {
      assertThat(expected.reason()).isNotNull();
      assertThat(expected.getMessage()).isNotBlank();
      return;
    }
    checkInvariants(snapshot);
    boolean mustBeBestEffort = InMemoryRegion.mustBeBestEffort(segment, snapshot.layout(), size);
    assertThat(snapshot.bestEffort()).as("bestEffort").isEqualTo(mustBeBestEffort);
    if (!snapshot.layout().seqlockValid() && snapshot.layout() != Layout.V1_1_BROKEN) {
      assertThat(snapshot.tornRetries()).isZero();
    }
  }

  static void checkInvariants(RegionSnapshot snapshot) {
    int slots = Math.max(0, Math.min(snapshot.rawProcNum(), 1024));
    assertThat(snapshot.deviceCount()).isBetween(0, 16);
    assertThat(snapshot.devices()).hasSize(snapshot.deviceCount());
    Set<Integer> pids = new HashSet<>();
    int previous = -1;
    for (ProcessSlot p : snapshot.processes()) {
      assertThat(p.slotIndex()).isGreaterThan(previous).isLessThan(slots);
      previous = p.slotIndex();
      assertThat(p.pid()).isNotZero();
      assertThat(p.status()).isNotZero();
      assertThat(pids.add(p.pid())).as("duplicate pid %s", p.pid()).isTrue();
      assertThat(p.devices()).hasSize(snapshot.deviceCount());
      // A slot's extension entry needs the block; the block may hold a stale entry (its pid tag
      // names another process), which the slot then goes without.
      if (p.extension().isPresent()) {
        assertThat(snapshot.extension()).isPresent();
      }
    }
    for (DeviceHeader d : snapshot.devices()) {
      assertThat(d.uuid().chars()).noneMatch(Character::isISOControl);
    }
    if (snapshot.layout().hasVersionFields()) {
      assertThat(snapshot.majorVersion()).isEqualTo(1);
      assertThat(snapshot.minorVersion()).isBetween(1, 2);
    }
  }

  private static void fillRandom(MemorySegment segment, long size, long seed) {
    SplittableRandom random = new SplittableRandom(seed);
    long words = (size + 7) / 8;
    // Sparse-ish content: long runs of zero make pid/status/proc_num zero sometimes, as in real
    // files.
    boolean sparse = random.nextBoolean();
    for (long i = 0; i < words; i++) {
      long value = sparse && random.nextInt(4) != 0 ? 0 : random.nextLong();
      segment.set(ValueLayout.JAVA_LONG_UNALIGNED, i * 8, value);
    }
  }

  /**
   * A random spec. Canonical specs are those {@link Fixtures#specOf} can reproduce: every slot live
   * with a unique pid, seqlock 0, {@code device_num} and {@code proc_num} as counted, usage only on
   * present devices, extension devices for every device.
   */
  static RegionSpec randomSpec(Random random, boolean canonical) {
    Layout[] layouts = Layout.values();
    Layout layout = layouts[random.nextInt(layouts.length)];
    RegionSpec.Builder b = RegionSpec.builder(layout);
    int devices = random.nextInt(17);
    for (int d = 0; d < devices; d++) {
      b.device(
          random.nextInt(8) == 0 ? "" : "GPU-" + Long.toHexString(random.nextLong()) + "-" + d,
          random.nextInt(4) == 0
              ? 0
              : random.nextLong()
                  >>> ((canonical ? 1 : 0) + random.nextInt(64 - (canonical ? 1 : 0))),
          random.nextInt(4) == 0 ? 0 : random.nextInt(150));
    }
    if (!canonical && random.nextInt(6) == 0) {
      b.deviceNum(random.nextBoolean() ? random.nextLong() : random.nextInt(20));
    }
    int slotCount = random.nextInt(5) == 0 ? random.nextInt(1025) : random.nextInt(24);
    Set<Integer> used = new HashSet<>();
    boolean extension = (layout == Layout.V1_2 || layout == Layout.V1_1) && random.nextInt(3) == 0;
    int usageDevices = canonical ? devices : 16;
    for (int i = 0; i < slotCount; i++) {
      int pid;
      int status;
      if (canonical) {
        do {
          pid = random.nextInt() == 0 ? 1 : random.nextInt(Integer.MAX_VALUE - 1) + 1;
        } while (!used.add(pid));
        status = 1 + random.nextInt(2);
      } else {
        pid =
            random.nextInt(8) == 0
                ? 0
                : random.nextInt(3) == 0 ? random.nextInt(40) : random.nextInt();
        status =
            random.nextInt(8) == 0
                ? 0
                : random.nextInt(6) == 0 ? random.nextInt() : 1 + random.nextInt(2);
      }
      List<DeviceUsage> usage = new ArrayList<>();
      for (int d = 0; d < usageDevices; d++) {
        if (random.nextInt(3) != 0) {
          usage.add(
              new DeviceUsage(
                  d,
                  random.nextLong() >>> (1 + random.nextInt(63)),
                  random.nextLong() >>> (1 + random.nextInt(63)),
                  random.nextLong() >>> (1 + random.nextInt(63)),
                  random.nextLong() >>> (1 + random.nextInt(63)),
                  random.nextLong() >>> (1 + random.nextInt(63)),
                  layout == Layout.L0A ? 0 : random.nextInt(101)));
        }
      }
      long seqlock =
          canonical
              ? 0
              : random.nextInt(50) == 0 ? 2L * random.nextInt(1000) + 1 : 2L * random.nextInt(1000);
      SlotSpec slot = new SlotSpec(pid, random.nextInt(), status, usage, seqlock, Optional.empty());
      if (extension && random.nextBoolean()) {
        slot =
            slot.withExtension(
                new SlotExtension(random.nextLong(), random.nextLong(), random.nextInt(4)));
      }
      b.slot(slot);
    }
    if (!canonical && random.nextInt(6) == 0) {
      b.procNum(random.nextBoolean() ? random.nextInt() : random.nextInt(1100) - 20);
    }
    b.ownerPid(random.nextInt(4) == 0 ? random.nextLong() : random.nextInt(100_000))
        .utilizationSwitch(random.nextInt())
        .recentKernel(random.nextInt())
        .priority(random.nextInt())
        .lastKernelTime(layout == Layout.L0A || layout == Layout.L0B ? 0 : random.nextLong());
    if (canonical) {
      b.ownerPid(random.nextInt(100_000))
          .lastKernelTime(
              layout == Layout.L0A || layout == Layout.L0B ? 0 : random.nextLong() >>> 1);
    }
    if (extension) {
      List<ExtensionDevice> ext = new ArrayList<>();
      int extDevices = canonical ? devices : random.nextInt(17);
      for (int d = 0; d < extDevices; d++) {
        ext.add(
            new ExtensionDevice(
                d,
                random.nextLong() >>> 1,
                random.nextLong() >>> 1,
                random.nextLong() >>> 1,
                random.nextLong() >>> 1,
                random.nextLong() >>> 1,
                random.nextLong() >>> 1,
                random.nextInt(1_000_001)));
      }
      b.extension(
          new RegionExtension(
              1,
              random.nextInt(3),
              canonical ? 2L * random.nextInt(1000) : random.nextLong(),
              random.nextLong(),
              "libvgpu " + random.nextInt(100),
              "pod-" + random.nextInt(),
              "ctr-" + random.nextInt(),
              random.nextInt(),
              random.nextLong(),
              ext));
    } else if (random.nextInt(4) == 0) {
      b.fileSize(layout.structSize());
    }
    RegionSpec spec = b.build();
    if (canonical && extension) {
      // Canonical slots always carry an extension entry (a snapshot reports EMPTY for none).
      List<SlotSpec> slots = new ArrayList<>();
      for (SlotSpec s : spec.slots()) {
        slots.add(s.extension().isPresent() ? s : s.withExtension(SlotExtension.EMPTY));
      }
      return new RegionSpec(
          spec.layout(),
          spec.majorVersion(),
          spec.minorVersion(),
          spec.ownerPid(),
          spec.smInitFlag(),
          spec.deviceNum(),
          spec.devices(),
          spec.procNum(),
          spec.utilizationSwitch(),
          spec.recentKernel(),
          spec.priority(),
          spec.lastKernelTimeEpochSeconds(),
          slots,
          spec.extension(),
          spec.fileSize());
    }
    return spec;
  }
}

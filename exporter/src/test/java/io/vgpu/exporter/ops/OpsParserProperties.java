package io.vgpu.exporter.ops;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionSpec;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * The ops commands read bytes other programs control: procfs files of tenant processes and region
 * files. Hostile content never throws out of the collector or the doctor, and JSON output stays
 * well-formed whatever the strings hold.
 */
class OpsParserProperties {

  @Property(tries = 300)
  void readMaps_anyText_neverThrowsAndOnlyCacheInodes(@ForAll("mapsText") String text)
      throws IOException {
    Path f = Files.createTempFile("maps", ".txt");
    try {
      Files.writeString(f, text, StandardCharsets.UTF_8);
      EvidenceCollector.Maps m = EvidenceCollector.readMaps(f);
      for (long inode : m.cacheInodes()) {
        assertThat(text).contains(Long.toString(inode));
      }
      assertThat(m.vgpu()).allMatch(l -> l.contains("libvgpu"));
    } finally {
      Files.delete(f);
    }
  }

  @Provide
  Arbitrary<String> mapsText() {
    Arbitrary<String> line =
        Arbitraries.oneOf(
            Arbitraries.strings().ofMaxLength(80),
            Arbitraries.longs()
                .map(i -> "7f00-7f01 rw-s 00000000 00:2a " + i + "   /usr/local/vgpu/x.cache"),
            Arbitraries.longs()
                .map(i -> "7f00-7f01 r-xp 00000000 08:01 " + i + "   /usr/local/vgpu/libvgpu.so"),
            Arbitraries.strings()
                .withChars("0123456789abcdef-: ")
                .ofMaxLength(60)
                .map(s -> s + " /x/libcuda.so.1"));
    return line.list().ofMaxSize(30).map(l -> String.join("\n", l));
  }

  @Property(tries = 300)
  void environment_anyBytes_onlyKnownKeys(@ForAll @Size(max = 400) byte[] bytes)
      throws IOException {
    Path f = Files.createTempFile("environ", "");
    try {
      Files.write(f, bytes);
      Map<String, String> env = EvidenceCollector.environment(f);
      assertThat(EvidenceCollector.ENV_KEYS).containsAll(env.keySet());
    } finally {
      Files.delete(f);
    }
  }

  @Property(tries = 200)
  void json_anyString_escapesEveryControlCharacter(@ForAll String s) {
    String json = Json.write(Map.of("k", s, "l", List.of(s, 1, true)));
    assertThat(json).doesNotContainPattern("[\\x00-\\x1f]");
    assertThat(json).startsWith("{").endsWith("}");
    // Quotes inside the value are always escaped: the only unescaped quotes delimit tokens.
    assertThat(
            json.replace("\\\\", "").replace("\\\"", "").chars().filter(c -> c == '"').count() % 2)
        .isZero();
  }

  @Property(tries = 60)
  void doctor_corruptedRegion_neverThrows(
      @ForAll @IntRange(min = 0, max = 2_043_199) int offset,
      @ForAll @Size(min = 1, max = 64) byte[] junk,
      @ForAll boolean ext)
      throws IOException {
    Path tmp = Files.createTempDirectory("ops-prop");
    try {
      OpsFixture fx = new OpsFixture(tmp);
      RegionSpec.Builder b =
          OpsFixture.v12(1L << 30, 50).slot(7, 1007, 1, OpsFixture.usage(1L << 20, 10));
      if (ext) {
        b.extension(
            new io.vgpu.regioncodec.RegionExtension(
                1, 0, 0, 1, "x", OpsFixture.UID_A, "main", 7, 1, List.of()));
      }
      Path region = fx.region(OpsFixture.UID_A, "main", b.build());
      fx.process(1007, 7).gpu(region).write();
      try (FileChannel ch =
          FileChannel.open(region, StandardOpenOption.WRITE, StandardOpenOption.READ)) {
        long pos = Math.min(offset, Math.max(0, ch.size() - junk.length));
        ch.write(ByteBuffer.wrap(junk), pos);
      }
      DoctorReport r = fx.doctor();
      assertThat(r.findings()).isNotEmpty();
      assertThat(r.toJson()).startsWith("{");
      assertThat(Inspection.text(fx.evidence())).isNotNull();
      assertThat(RepairPlan.cleanup(fx.evidence())).isNotNull();
      assertThat(Layout.values()).isNotEmpty();
    } finally {
      try (var s = Files.walk(tmp)) {
        s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }
}

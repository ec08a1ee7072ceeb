package io.vgpu.exporter.exposition;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/** The buffer's number formatting against the JDK's. */
class ExpositionBufferTest {

  static String written(java.util.function.Consumer<ExpositionBuffer> write) {
    ExpositionBuffer b = new ExpositionBuffer(1);
    b.write((byte) '>'); // not at offset 0: offsets inside the array must be right too
    write.accept(b);
    return new String(b.toByteArray(), StandardCharsets.US_ASCII).substring(1);
  }

  @Property(tries = 5000)
  void writeLong_matchesLongToString(@ForAll("longs") long v) {
    assertThat(written(b -> b.writeLong(v))).isEqualTo(Long.toString(v));
  }

  @Property(tries = 3000)
  void writeScientific_matchesDoubleToString(@ForAll("scientific") long v) {
    assertThat(written(b -> b.writeScientific(v))).isEqualTo(Double.toString((double) v));
  }

  @Example
  void writeLong_edges() {
    for (long v :
        new long[] {
          0,
          9,
          10,
          99,
          100,
          999_999_999,
          1_000_000_000,
          1_000_000_001,
          Integer.MAX_VALUE,
          Integer.MAX_VALUE + 1L,
          999_999_999_999_999_999L,
          1_000_000_000_000_000_000L,
          Long.MAX_VALUE,
          Long.MIN_VALUE,
          Long.MIN_VALUE + 1,
          -1
        }) {
      assertThat(written(b -> b.writeLong(v))).as("%d", v).isEqualTo(Long.toString(v));
    }
  }

  @Provide
  Arbitrary<Long> longs() {
    return Arbitraries.oneOf(
        Arbitraries.longs(),
        Arbitraries.longs().between(-1000, 1000),
        // Around each power of ten, where digit counts and the 9-digit groups change.
        Arbitraries.integers()
            .between(0, 18)
            .flatMap(e -> Arbitraries.longs().between(-2, 2).map(k -> (long) Math.pow(10, e) + k)));
  }

  /** Whole numbers Double.toString prints in scientific form and exactly: [1e7, 2^53). */
  @Provide
  Arbitrary<Long> scientific() {
    return Arbitraries.oneOf(
        Arbitraries.longs().between(10_000_000L, (1L << 53) - 1),
        Arbitraries.longs().between(10_000_000L, 10_000_100L),
        Arbitraries.integers()
            .between(7, 15)
            .flatMap(
                e -> Arbitraries.longs().between(0, 3).map(k -> (long) Math.pow(10, e) * 3 + k)),
        Arbitraries.integers().between(24, 52).map(s -> 1L << s));
  }
}

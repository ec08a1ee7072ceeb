package io.vgpu.exporter.exposition;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/** {@link DoubleText} must print exactly what client_java prints: Double.toString, or ±Inf. */
class DoubleTextTest {

  static String text(double d) {
    ExpositionBuffer b = new ExpositionBuffer(64);
    DoubleText.write(b, d, null);
    return new String(b.toByteArray(), StandardCharsets.US_ASCII);
  }

  static String expected(double d) {
    if (d == Double.POSITIVE_INFINITY) {
      return "+Inf";
    }
    if (d == Double.NEGATIVE_INFINITY) {
      return "-Inf";
    }
    return Double.toString(d);
  }

  @Property(tries = 3000)
  void anyDouble_matchesDoubleToString(@ForAll double d) {
    assertThat(text(d)).isEqualTo(expected(d));
  }

  /** One table for the whole run, so slots are reused by colliding values. */
  static final DoubleText.Fractions FRACTIONS = new DoubleText.Fractions();

  @Property(tries = 5000)
  void throughTheFractionTable_matchesDoubleToString(@ForAll("repeating") double d) {
    ExpositionBuffer b = new ExpositionBuffer(64);
    DoubleText.write(b, d, FRACTIONS);
    assertThat(new String(b.toByteArray(), StandardCharsets.US_ASCII)).isEqualTo(expected(d));
  }

  @Provide
  Arbitrary<Double> repeating() {
    // Few distinct values (hits) mixed with many (misses and slot collisions).
    return Arbitraries.oneOf(
        Arbitraries.of(0.5, 2.5, 0.4, 0.1, 1e-9, 0.30000000000000004),
        Arbitraries.doubles(),
        Arbitraries.integers().between(0, 3000).map(i -> i / 1000.0));
  }

  @Property(tries = 3000)
  void wholeNumbers_matchDoubleToString(@ForAll("wholes") long v) {
    double d = v;
    assertThat(text(d)).isEqualTo(expected(d));
  }

  @Provide
  Arbitrary<Long> wholes() {
    return Arbitraries.oneOf(
        Arbitraries.longs(),
        Arbitraries.longs().between(-20_000_000L, 20_000_000L),
        // Around the switch to scientific notation and the end of exact whole doubles.
        Arbitraries.longs().between(9_999_900L, 10_000_100L),
        Arbitraries.longs().between((1L << 53) - 1000, (1L << 53) + 1000),
        // Byte counts: multiples of powers of two, as memory sizes are.
        Arbitraries.integers()
            .between(0, 50)
            .flatMap(s -> Arbitraries.longs().between(0, 1L << 12).map(m -> m << s)),
        // Powers of ten and their neighbours (trailing zeros, zeros after the point).
        Arbitraries.integers()
            .between(0, 18)
            .flatMap(
                e ->
                    Arbitraries.longs()
                        .between(-3, 3)
                        .map(k -> (long) Math.pow(10, e) * (1 + (e % 3)) + k)));
  }

  @Example
  void specialValues() {
    for (double d :
        new double[] {
          0.0,
          -0.0,
          1.0,
          -1.0,
          Double.NaN,
          Double.POSITIVE_INFINITY,
          Double.NEGATIVE_INFINITY,
          Double.MIN_VALUE,
          Double.MAX_VALUE,
          1e7,
          9_999_999.0,
          1.05e9,
          1.073741824E9,
          0x1p53,
          0x1p53 - 1,
          -0x1p53 + 1,
          Long.MAX_VALUE,
          Long.MIN_VALUE
        }) {
      assertThat(text(d)).as("%s", d).isEqualTo(expected(d));
    }
  }
}

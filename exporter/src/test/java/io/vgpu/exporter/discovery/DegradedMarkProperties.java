package io.vgpu.exporter.discovery;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.Size;

/**
 * The side file's parser reads bytes a tenant controls: it never throws, and it accepts exactly the
 * line libvgpu writes (anything it accepts re-renders to the same bytes).
 */
class DegradedMarkProperties {
  private static final Path FILE = Path.of("x.cache.degraded");

  private static String render(DegradedMark m) {
    return "libvgpu-degraded v1 cause="
        + m.cause().label()
        + " pid="
        + m.pid()
        + " time="
        + m.epochSeconds()
        + "\n";
  }

  @Property(tries = 2000)
  void anyBytes_neverThrows_acceptsOnlyTheCanonicalLine(@ForAll @Size(max = 300) byte[] bytes) {
    DegradedMark m = DegradedMark.parse(FILE, bytes);
    if (!m.malformed()) {
      assertThat(render(m).getBytes(StandardCharsets.US_ASCII)).isEqualTo(bytes);
    }
  }

  @Property(tries = 2000)
  void mutatedValidLine_neverThrows_acceptsOnlyTheCanonicalLine(
      @ForAll("mutatedLines") byte[] bytes) {
    DegradedMark m = DegradedMark.parse(FILE, bytes);
    if (!m.malformed()) {
      assertThat(render(m).getBytes(StandardCharsets.US_ASCII)).isEqualTo(bytes);
      assertThat(m.pid()).isBetween(1, DegradedMark.MAX_PID);
      assertThat(m.epochSeconds()).isBetween(1L, DegradedMark.MAX_EPOCH_SECONDS);
      assertThat(m.cause()).isNotEqualTo(DegradedMark.Cause.MALFORMED);
    }
  }

  @Property(tries = 500)
  void everyValidLine_isAccepted(@ForAll("validLines") String line) {
    DegradedMark m = DegradedMark.parse(FILE, line.getBytes(StandardCharsets.US_ASCII));
    assertThat(m.malformed()).as(line).isFalse();
    assertThat(render(m)).isEqualTo(line);
  }

  @Provide
  Arbitrary<String> validLines() {
    return Combinators.combine(
            Arbitraries.of(DegradedMark.Cause.values())
                .filter(c -> c != DegradedMark.Cause.MALFORMED),
            Arbitraries.integers().between(1, DegradedMark.MAX_PID),
            Arbitraries.longs().between(1, DegradedMark.MAX_EPOCH_SECONDS))
        .as((c, p, t) -> render(new DegradedMark(FILE, c, p, t)));
  }

  /** Valid lines with one byte replaced, inserted or removed: the near misses that matter. */
  @Provide
  Arbitrary<byte[]> mutatedLines() {
    return Combinators.combine(
            validLines(),
            Arbitraries.integers().between(0, 2),
            Arbitraries.integers().between(0, 200),
            Arbitraries.bytes())
        .as(
            (line, op, at, b) -> {
              byte[] in = line.getBytes(StandardCharsets.US_ASCII);
              int i = at % (in.length + 1);
              byte[] out;
              switch (op) {
                case 0 -> {
                  out = in.clone();
                  out[Math.min(i, in.length - 1)] = b;
                }
                case 1 -> {
                  out = new byte[in.length + 1];
                  System.arraycopy(in, 0, out, 0, i);
                  out[i] = b;
                  System.arraycopy(in, i, out, i + 1, in.length - i);
                }
                default -> {
                  int j = Math.min(i, in.length - 1);
                  out = new byte[in.length - 1];
                  System.arraycopy(in, 0, out, 0, j);
                  System.arraycopy(in, j + 1, out, j, in.length - j - 1);
                }
              }
              return out;
            });
  }
}

package io.vgpu.exporter.discovery;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class DegradedMarkTest {
  private static final Path FILE = Path.of("/r/u_c/x.cache.degraded");

  private static DegradedMark parse(String s) {
    return DegradedMark.parse(FILE, s.getBytes(StandardCharsets.ISO_8859_1));
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "dir-missing",
        "unopenable",
        "symlink",
        "not-regular",
        "slot-table-full",
        "no-space",
        "no-locks",
        "version"
      })
  void libvgpusLine_everyCause_parsed(String token) {
    DegradedMark m = parse("libvgpu-degraded v1 cause=" + token + " pid=4242 time=1790000000\n");
    assertThat(m.cause().label()).isEqualTo(token);
    assertThat(m.pid()).isEqualTo(4242);
    assertThat(m.epochSeconds()).isEqualTo(1_790_000_000L);
    assertThat(m.cachePath()).isEqualTo(Path.of("/r/u_c/x.cache"));
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "",
        "libvgpu-degraded v1 cause=symlink pid=1 time=1", // no newline (torn write)
        "libvgpu-degraded v2 cause=symlink pid=1 time=1\n",
        "libvgpu-degraded v1 cause=malformed pid=1 time=1\n",
        "libvgpu-degraded v1 cause=Symlink pid=1 time=1\n",
        "libvgpu-degraded v1 cause=symlink pid=0 time=1\n",
        "libvgpu-degraded v1 cause=symlink pid=01 time=1\n",
        "libvgpu-degraded v1 cause=symlink pid=-1 time=1\n",
        "libvgpu-degraded v1 cause=symlink pid=+1 time=1\n",
        "libvgpu-degraded v1 cause=symlink pid=4194305 time=1\n",
        "libvgpu-degraded v1 cause=symlink pid=1 time=253402300800\n",
        "libvgpu-degraded v1 cause=symlink pid=1 time=99999999999999999999\n",
        "libvgpu-degraded v1 cause=symlink pid=1 time=1\n\n",
        "libvgpu-degraded v1 cause=symlink pid=1 time=1 \n",
        "libvgpu-degraded v1 cause=symlink  pid=1 time=1\n",
        "libvgpu-degraded v1 cause=symlink time=1 pid=1\n",
        "libvgpu-degraded v1 cause=symlink pid=1 time=1\nlibvgpu-degraded v1\n",
        "libvgpu-degraded v1 cause=symlink pid=1 time=1\r\n",
        "libvgpu-degraded v1 cause=symlink pid=1 time=1\0\n",
        "libvgpu-degraded v1 cause=sym\u00e9link pid=1 time=1\n",
        " libvgpu-degraded v1 cause=symlink pid=1 time=1\n",
      })
  void anythingElse_malformed(String s) {
    DegradedMark m = parse(s);
    assertThat(m.malformed()).as(s).isTrue();
    assertThat(m.pid()).isZero();
  }

  @org.junit.jupiter.api.Test
  void overlong_malformedWithoutLooking() {
    byte[] big = new byte[DegradedMark.MAX_BYTES + 1];
    byte[] line =
        "libvgpu-degraded v1 cause=symlink pid=1 time=1\n".getBytes(StandardCharsets.US_ASCII);
    System.arraycopy(line, 0, big, 0, line.length);
    assertThat(DegradedMark.parse(FILE, big).malformed()).isTrue();
  }
}

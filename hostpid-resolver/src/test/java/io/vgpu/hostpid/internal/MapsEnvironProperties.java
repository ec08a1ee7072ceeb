package io.vgpu.hostpid.internal;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.hostpid.ProcessMaps;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.Size;

/**
 * {@code maps} and {@code environ} are bytes a tenant's process controls (its mappings' names, its
 * environment): any content never throws out of the parsers, and yields only what was asked for.
 */
class MapsEnvironProperties {
  /** The variables the exporter's checks ask for. */
  private static final Set<String> KEYS =
      Set.of("CUDA_DISABLE_CONTROL", "LD_PRELOAD", "CUDA_DEVICE_MEMORY_SHARED_CACHE");

  @Property(tries = 300)
  void readMaps_anyText_neverThrowsAndOnlyCacheInodes(@ForAll("mapsText") String text)
      throws IOException {
    Path f = Files.createTempFile("maps", ".txt");
    try {
      Files.writeString(f, text, StandardCharsets.UTF_8);
      ProcessMaps m = MapsParser.read(f, 4 << 20);
      for (long inode : m.cacheInodes()) {
        assertThat(text).contains(Long.toString(inode));
      }
      assertThat(m.vgpu()).allMatch(l -> l.contains("libvgpu"));
    } finally {
      Files.delete(f);
    }
  }

  /**
   * Only lines that name libvgpu, libcuda, libnvidia-ml or a .cache file are split into fields (a
   * pass reads thousands of lines per CUDA process); the result is what splitting every line gives.
   */
  @Property(tries = 500)
  void readMaps_anyText_sameAsSplittingEveryLine(@ForAll("mapsText") String text)
      throws IOException {
    Path f = Files.createTempFile("maps", ".txt");
    try {
      Files.writeString(f, text, StandardCharsets.UTF_8);
      ProcessMaps m = MapsParser.read(f, 4 << 20);
      java.util.TreeSet<String> vgpu = new java.util.TreeSet<>();
      java.util.Set<Long> inodes = new java.util.HashSet<>();
      boolean gpu = false;
      for (String line : Files.readString(f).split("\n", -1)) {
        String[] fields = line.trim().split("\\s+", 6);
        if (fields.length < 6) {
          continue;
        }
        String name = fields[5].substring(fields[5].lastIndexOf('/') + 1);
        if (name.contains("libvgpu")) {
          vgpu.add(fields[5] + " (" + fields[3] + ":" + fields[4] + ")");
        } else if (name.startsWith("libcuda.so") || name.startsWith("libnvidia-ml.so")) {
          gpu = true;
        } else if (name.endsWith(".cache")) {
          try {
            inodes.add(Long.parseLong(fields[4]));
          } catch (NumberFormatException e) {
            // skipped, as the collector skips it
          }
        }
      }
      assertThat(m.vgpu()).containsExactlyElementsOf(vgpu);
      assertThat(m.cacheInodes()).isEqualTo(inodes);
      assertThat(m.gpu()).isEqualTo(gpu);
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
                .map(s -> s + " /x/libcuda.so.1"),
            Arbitraries.longs()
                .map(i -> "7f00-7f01 r-xp 00000000 08:01 " + i + "   /usr/lib/libtorch_cuda.so"),
            Arbitraries.longs()
                .map(i -> "7f00-7f01 rw-s 00000000 00:2a " + i + " /a.cache (deleted)"),
            Arbitraries.strings()
                .withChars("0123456789abcdef-: /.")
                .ofMaxLength(60)
                .map(s -> s + "libnvidia-ml.so.580 x.cache libvgpu"),
            // the names in a directory, not the last element; and after the last '/'
            Arbitraries.of(
                "7f00-7f01 r-xp 00000000 08:01 5   /opt/libvgpu.so/extra",
                "7f00-7f01 r-xp 00000000 08:01 6   /libcuda.so.d/x.cache",
                "7f00-7f01 r-xp 00000000 08:01 7   libvgpu.so",
                "7f00-7f01 r-xp 00000000 08:01 8   /a b/libnvidia-ml.so.1 (deleted)",
                "7f00-7f01 rw-s 00000000 00:2a 9   /x/.cache\t ",
                "/7f00-7f01 rw-s 00000000 00:2a 10 x.cache"));
    return line.list().ofMaxSize(30).map(l -> String.join("\n", l));
  }

  @Property(tries = 300)
  void environment_anyBytes_onlyKnownKeys(@ForAll @Size(max = 400) byte[] bytes)
      throws IOException {
    Path f = Files.createTempFile("environ", "");
    try {
      Files.write(f, bytes);
      Map<String, String> env = EnvironParser.read(f, 64 << 10, KEYS);
      assertThat(KEYS).containsAll(env.keySet());
    } finally {
      Files.delete(f);
    }
  }
}

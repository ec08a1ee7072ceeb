package io.vgpu.regioncodec.hamicore;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.zip.GZIPInputStream;

/**
 * The region files in {@code testdata/hami-core/}, written by HAMi-core's own region code, and the
 * values its manifest says they hold. See that folder's README.md for how they were made.
 */
public final class HamiCoreFixtures {
  /** {@code testdata/hami-core} from a module directory (surefire's working directory). */
  public static final Path DIR = Path.of("../testdata/hami-core").toAbsolutePath().normalize();

  private HamiCoreFixtures() {}

  /** The parsed {@code manifest.json}. */
  public static Map<String, Object> manifest() {
    try {
      return castMap(
          MiniJson.parse(Files.readString(DIR.resolve("manifest.json"), StandardCharsets.UTF_8)));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The fixture entries of the manifest, in file order. */
  public static List<Object> fixtures() {
    return MiniJson.arr(manifest(), "fixtures");
  }

  /** Decompresses the fixture's {@code file} into {@code dir} under {@code name}; returns it. */
  public static Path extract(Object fixture, Path dir, String name) {
    Path out = dir.resolve(name);
    try (InputStream in =
        new GZIPInputStream(Files.newInputStream(DIR.resolve(MiniJson.str(fixture, "file"))))) {
      Files.write(out, in.readAllBytes());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out;
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> castMap(Object o) {
    return (Map<String, Object>) o;
  }
}

package io.vgpu.exporter.nvml;

import com.sun.jna.Library;
import com.sun.jna.Native;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The repository's fake {@code libnvidia-ml.so.1} (libvgpu/test/fake/fake_nvml.c) for tests: finds
 * the Makefile's build or compiles the source itself, points the library at a config file through
 * {@code setenv} (the fake reads {@code FAKE_NVML_CONFIG} with getenv on every call) and rewrites
 * that file atomically.
 *
 * <p>The library keeps global state (its init count) for the whole JVM: every test must shut down
 * what it initialised.
 */
public final class FakeNvml {
  private interface LibC extends Library {
    int setenv(String name, String value, int overwrite);
  }

  private static final LibC LIBC = Native.load("c", LibC.class);
  private static Path library;

  private final Path config;
  private final Path callLog;

  private FakeNvml(Path dir) {
    this.config = dir.resolve("fake-nvml.conf");
    this.callLog = dir.resolve("fake-nvml.calls");
    LIBC.setenv("FAKE_NVML_CONFIG", config.toString(), 1);
    LIBC.setenv("FAKE_NVML_CALL_LOG", callLog.toString(), 1);
  }

  /** A fake whose config and call log live in {@code dir}; starts with no config file. */
  public static FakeNvml in(Path dir) {
    return new FakeNvml(dir);
  }

  /** Absolute path of the fake library, built on first use when the Makefile has not. */
  public static synchronized Path library() {
    if (library != null) {
      return library;
    }
    Path root = repositoryRoot();
    Path source = root.resolve("libvgpu/test/fake/fake_nvml.c");
    Path built = root.resolve("libvgpu/build/fake/libnvidia-ml.so.1");
    try {
      if (Files.exists(built) && newerThanSources(built, source.getParent())) {
        library = built;
        return library;
      }
      Path out = root.resolve("exporter/target/fake-nvml/libnvidia-ml.so.1");
      Files.createDirectories(out.getParent());
      Process gcc =
          new ProcessBuilder(
                  List.of(
                      "cc",
                      "-std=c11",
                      "-O1",
                      "-shared",
                      "-fPIC",
                      "-fvisibility=hidden",
                      "-o",
                      out.toString(),
                      source.toString(),
                      "-lpthread"))
              .redirectErrorStream(true)
              .start();
      String output =
          new String(gcc.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
      if (!gcc.waitFor(60, TimeUnit.SECONDS) || gcc.exitValue() != 0) {
        throw new IllegalStateException("building the fake NVML failed:\n" + output);
      }
      library = out;
      return library;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** Whether {@code built} is newer than fake_nvml.c and every fake_nvml*.inc it includes. */
  private static boolean newerThanSources(Path built, Path fakeDir) throws IOException {
    var builtAt = Files.getLastModifiedTime(built);
    try (var sources = Files.list(fakeDir)) {
      for (Path p : sources.toList()) {
        String n = p.getFileName().toString();
        if (n.startsWith("fake_nvml")
            && (n.endsWith(".c") || n.endsWith(".inc"))
            && builtAt.compareTo(Files.getLastModifiedTime(p)) < 0) {
          return false;
        }
      }
    }
    return true;
  }

  private static Path repositoryRoot() {
    Path dir = Path.of("").toAbsolutePath();
    for (Path p = dir; p != null; p = p.getParent()) {
      if (Files.exists(p.resolve("libvgpu/test/fake/fake_nvml.c"))) {
        return p;
      }
    }
    throw new IllegalStateException("no libvgpu/test/fake/fake_nvml.c above " + dir);
  }

  /**
   * A sampler on the fake through the production loading path, pretending the library lacks {@code
   * hiddenSymbols} (an older driver).
   */
  public static NvmlSampler sampler(
      NvmlSampler.Settings settings, java.time.InstantSource clock, String... hiddenSymbols) {
    return new NvmlSampler(
        () -> JnaNvmlClient.load(library().toString(), java.util.Set.of(hiddenSymbols)),
        settings,
        clock);
  }

  /** A JNA client on the fake, through the production loading path. */
  public NvmlClient client() {
    return JnaNvmlClient.load(library().toString()).orElse(null);
  }

  /** Replaces the config atomically; the fake notices the new inode on its next call. */
  public FakeNvml write(String... lines) {
    try {
      Path tmp = Files.createTempFile(config.getParent(), "conf", ".tmp");
      Files.writeString(tmp, String.join("\n", lines) + "\n");
      Files.move(tmp, config, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      return this;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  public Path config() {
    return config;
  }

  /** How many times the fake was called with exactly {@code function}. */
  public long calls(String function) {
    try {
      if (!Files.exists(callLog)) {
        return 0;
      }
      try (var lines = Files.lines(callLog)) {
        return lines.filter(function::equals).count();
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}

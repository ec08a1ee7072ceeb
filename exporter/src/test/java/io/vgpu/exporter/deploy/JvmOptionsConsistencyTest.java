package io.vgpu.exporter.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The JVM's footprint flags are written three times: bin/vgpu-exporter's defaults, the image's
 * VGPU_EXPORTER_JAVA_OPTS (and its launcher's compiled-in defaults) and the chart's jvmOptions. The
 * chart's memory request and limit were measured with the launcher's (README: Footprint), so the
 * three carry the same -X/-XX flags; only the image and chart add their /tmp properties (the root
 * filesystem is read-only there).
 */
class JvmOptionsConsistencyTest {
  static final Pattern LAUNCHER = Pattern.compile("(?s)default_opts=\\((.*?)\\)");
  static final Pattern DOCKERFILE = Pattern.compile("ENV VGPU_EXPORTER_JAVA_OPTS=\"([^\"]*)\"");
  static final Pattern IMAGE_LAUNCHER =
      Pattern.compile("(?s)#define DEFAULT_JAVA_OPTS\\s*\\\\\\s*(\".*?\")\\s*#endif");
  static final Pattern VALUES = Pattern.compile("(?m)^  jvmOptions: >-\\n((?:    \\S.*\\n)+)");

  static Set<String> memoryFlags(String options) {
    Set<String> flags = new TreeSet<>();
    Arrays.stream(options.trim().split("\\s+"))
        .filter(o -> o.startsWith("-X") && !o.equals("-Xshare:auto"))
        .forEach(flags::add);
    return flags;
  }

  static String group(Pattern p, Path file) throws IOException {
    Matcher m = p.matcher(Files.readString(file));
    assertThat(m.find()).as(p + " in " + file).isTrue();
    return m.group(1);
  }

  @Test
  void launcherImageAndChart_carryTheSameJvmFlags() throws IOException {
    Path root = HelmChart.repoRoot();
    Set<String> launcher = memoryFlags(group(LAUNCHER, root.resolve("bin/vgpu-exporter")));
    Set<String> image = memoryFlags(group(DOCKERFILE, root.resolve("Dockerfile")));
    Set<String> chart = memoryFlags(group(VALUES, HelmChart.chartDir().resolve("values.yaml")));

    assertThat(launcher).contains("-Xmx48m", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError");
    assertThat(image).as("Dockerfile VGPU_EXPORTER_JAVA_OPTS").isEqualTo(launcher);
    // The image's launcher falls back to its compiled-in flags when the variable is unset.
    String compiled =
        group(IMAGE_LAUNCHER, root.resolve("deploy/image/vgpu-exporter-launcher.c"))
            .replaceAll("\"\\s*\\\\?\\s*\"", "")
            .replace("\"", "");
    assertThat(memoryFlags(compiled)).as("vgpu-exporter-launcher.c defaults").isEqualTo(launcher);
    assertThat(chart).as("values.yaml jvmOptions").isEqualTo(launcher);
  }
}

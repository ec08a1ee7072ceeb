package io.vgpu.exporter.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.vgpu.exporter.testing.TestNode;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Compares the scrape of {@link TestNode} with {@code fixtures/scrape/node.prom}. After an intended
 * change, rewrite it with {@code ./mvnw -pl exporter test -Dtest=GoldenScrapeTest
 * -Dfixtures.update=true} and review the diff.
 */
class GoldenScrapeTest {
  static final Path GOLDEN = Path.of("src/test/resources/fixtures/scrape/node.prom");

  /** Timing families differ run to run. */
  static final Set<String> VOLATILE =
      Set.of(MetricNames.EXPORTER_COLLECTOR_DURATION, MetricNames.EXPORTER_SCRAPE_DURATION);

  @TempDir Path root;

  static String scrape(TestNode node) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    PrometheusTextFormatWriter.create()
        .write(out, node.registry().scrape(name -> !VOLATILE.contains(name)));
    return out.toString(StandardCharsets.UTF_8);
  }

  @Test
  void scrape_standardNode_matchesGoldenFile() throws IOException {
    try (TestNode node = new TestNode(root)) {
      String actual = scrape(node);
      if (Boolean.getBoolean("fixtures.update")) {
        Files.createDirectories(GOLDEN.getParent());
        Files.writeString(GOLDEN, actual);
      }
      assertThat(actual).isEqualTo(Files.readString(GOLDEN));
    }
  }
}

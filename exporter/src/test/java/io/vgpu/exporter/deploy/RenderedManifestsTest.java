package io.vgpu.exporter.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.deploy.HelmChart.Mode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * deploy/manifests/ holds the chart rendered once per documented mode, for kubectl users. It is
 * generated, never edited: this test fails when it differs from a fresh render. Regenerate with
 * {@code ./mvnw -pl exporter test -Dtest=RenderedManifestsTest -Dfixtures.update=true}.
 */
class RenderedManifestsTest {
  private static final boolean UPDATE = Boolean.getBoolean("fixtures.update");

  static String header(Mode mode) {
    return """
        # GENERATED from deploy/helm/vgpu-exporter%s (release %s, namespace %s). Do not edit.
        # Regenerate: ./mvnw -pl exporter test -Dtest=RenderedManifestsTest -Dfixtures.update=true
        # Apply: kubectl create namespace %s; kubectl apply -f deploy/manifests/%s
        """
        .formatted(
            mode.valuesFile.map(f -> " with " + f).orElse(" with default values"),
            HelmChart.RELEASE,
            HelmChart.NAMESPACE,
            HelmChart.NAMESPACE,
            mode.manifestFile);
  }

  @ParameterizedTest
  @EnumSource(Mode.class)
  void manifests_checkedIn_equalFreshRenderOfChart(Mode mode) throws IOException {
    String fresh = header(mode) + HelmChart.render(mode, Map.of());
    Path file = HelmChart.repoRoot().resolve("deploy/manifests").resolve(mode.manifestFile);
    if (UPDATE) {
      Files.createDirectories(file.getParent());
      Files.writeString(file, fresh);
    }

    assertThat(file).exists();
    assertThat(Files.readString(file))
        .as("%s is out of date with the chart; regenerate with -Dfixtures.update=true", file)
        .isEqualTo(fresh);
    // What kubectl users apply parses like the chart output (same objects, same model).
    assertThat(HelmChart.parse(Files.readString(file))).isNotEmpty();
  }
}

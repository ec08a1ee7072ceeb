package io.vgpu.exporter.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.Service;
import io.vgpu.exporter.metrics.MetricNames;
import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Every vgpu_* series the alert rules and the dashboard query is one the exporter defines in {@link
 * MetricNames} (counters gain {@code _total}, info metrics {@code _info} on exposition), so a
 * renamed metric breaks this test instead of silently emptying a panel or muting an alert.
 */
class MetricReferencesTest {
  private static final Pattern METRIC = Pattern.compile("\\b(vgpu_[a-z0-9_]+)\\b");

  static Set<String> exporterFamilies() throws IllegalAccessException {
    Set<String> names = new TreeSet<>();
    for (Field f : MetricNames.class.getFields()) {
      if (Modifier.isStatic(f.getModifiers()) && f.getType() == String.class) {
        String n = (String) f.get(null);
        names.add(n);
        names.add(n + "_total");
        names.add(n + "_info");
      }
    }
    return names;
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "deploy/rules/vgpu-exporter.rules.yaml",
        "grafana/vgpu-exporter.json",
        "grafana/vgpu-exporter-cluster.json",
        "grafana/vgpu-usage-cost.json"
      })
  void references_everyVgpuSeries_isAnExporterMetric(String file)
      throws IOException, IllegalAccessException {
    String text = Files.readString(HelmChart.repoRoot().resolve(file));
    Set<String> referenced = new TreeSet<>();
    Matcher m = METRIC.matcher(text);
    while (m.find()) {
      referenced.add(m.group(1));
    }
    // Names that are not series: the exporter's own job name and dashboard uid.
    referenced.remove("vgpu_exporter");

    assertThat(referenced).as("series queried by %s", file).hasSizeGreaterThan(10);
    assertThat(exporterFamilies()).as("MetricNames").containsAll(referenced);
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "deploy/rules/vgpu-exporter.rules.yaml",
        "grafana/vgpu-exporter.json",
        "grafana/vgpu-exporter-cluster.json"
      })
  void references_exporterJobMatcher_matchesTheJobTheServiceMonitorCreates(String file)
      throws IOException {
    String text = Files.readString(HelmChart.repoRoot().resolve(file)).replace("\\\"", "\"");
    Matcher job = Pattern.compile("job=~\"([^\"]+)\"").matcher(text);
    List<HasMetadata> objects =
        HelmChart.parse(
            HelmChart.render(HelmChart.Mode.PLAIN, Map.of("serviceMonitor.enabled", true)));
    GenericKubernetesResource monitor = HelmChart.ofKind(objects, "ServiceMonitor").getFirst();
    String jobLabel = monitor.get("spec", "jobLabel");
    // Prometheus Operator: job = the Service's value of the jobLabel label.
    String jobName =
        HelmChart.ofType(objects, Service.class).getFirst().getMetadata().getLabels().get(jobLabel);

    assertThat(jobName).isNotNull();
    assertThat(job.find()).as("%s selects the exporter's up series by job", file).isTrue();
    do {
      assertThat(jobName).as("job matcher in %s", file).matches(job.group(1));
    } while (job.find());
  }
}

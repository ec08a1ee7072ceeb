package io.vgpu.exporter.deploy;

import com.marcnuri.helm.Helm;
import com.marcnuri.helm.TemplateCommand;
import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.apps.DaemonSet;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Renders deploy/helm/vgpu-exporter with helm-java (Helm's own Go code through JNA, offline) and
 * parses the output into fabric8's typed model. Shared by every chart test.
 */
final class HelmChart {
  static final String RELEASE = "vgpu-exporter";
  static final String NAMESPACE = "vgpu-exporter";

  private static final Pattern DOCUMENT_SEPARATOR = Pattern.compile("(?m)^---\\s*$");
  private static final KubernetesSerialization SERIALIZATION = new KubernetesSerialization();

  /** The documented values files; README's "## Deploy" describes each. */
  enum Mode {
    PLAIN(Optional.empty(), "vgpu-exporter.yaml"),
    HAMI_REPLACEMENT(Optional.of("values-hami-replacement.yaml"), "hami-replacement.yaml"),
    INSTALLER(Optional.of("values-installer.yaml"), "installer.yaml");

    final Optional<String> valuesFile;

    /** File under deploy/manifests/ that holds this mode rendered for kubectl users. */
    final String manifestFile;

    Mode(Optional<String> valuesFile, String manifestFile) {
      this.valuesFile = valuesFile;
      this.manifestFile = manifestFile;
    }
  }

  /** A values combination: a mode plus --set overrides, with a name for test reports. */
  record Combination(String name, Mode mode, Map<String, Object> sets) {
    Combination {
      sets = Map.copyOf(sets);
    }

    @Override
    public String toString() {
      return name;
    }
  }

  private HelmChart() {}

  /** Every values combination the chart documents; each must lint, render and parse. */
  static List<Combination> combinations() {
    return List.of(
        new Combination("plain", Mode.PLAIN, Map.of()),
        new Combination("hami-replacement", Mode.HAMI_REPLACEMENT, Map.of()),
        new Combination("installer", Mode.INSTALLER, Map.of()),
        new Combination(
            "plain+operator+dashboard",
            Mode.PLAIN,
            Map.of(
                "serviceMonitor.enabled", true,
                "prometheusRule.enabled", true,
                "dashboard.enabled", true,
                "dashboard.folder", "GPU")),
        new Combination(
            "plain+hostpid-repair", Mode.PLAIN, Map.of("exporter.writeBack.hostPidRepair", true)),
        new Combination(
            "plain+no-pod-resources", Mode.PLAIN, Map.of("exporter.podResources.enabled", false)),
        new Combination(
            "plain+remove-stale-dirs",
            Mode.PLAIN,
            Map.of("exporter.writeBack.removeStaleDirs", true)),
        new Combination(
            "plain+nvidia-runtime-class+pod-labels",
            Mode.PLAIN,
            Map.of(
                "exporter.nvidia.runtimeClassName", "nvidia",
                "exporter.podLabels[0]", "app",
                "exporter.podLabels[1]", "team",
                "exporter.extraFlags.nvml\\.sample-interval", "2s")),
        new Combination("plain+no-nvml", Mode.PLAIN, Map.of("exporter.extraFlags.nvml", "false")),
        new Combination(
            "plain+web-config-tls+operator",
            Mode.PLAIN,
            Map.of(
                "exporter.web.configSecret", "vgpu-exporter-web",
                "exporter.web.tls", true,
                "exporter.web.statusPages", "off",
                "serviceMonitor.enabled", true,
                "serviceMonitor.tlsConfig.serverName", "vgpu-exporter",
                "serviceMonitor.basicAuth.username.name", "vgpu-exporter-scrape",
                "serviceMonitor.basicAuth.username.key", "user",
                "serviceMonitor.basicAuth.password.name", "vgpu-exporter-scrape",
                "serviceMonitor.basicAuth.password.key", "password")),
        new Combination(
            "plain+existing-service-account",
            Mode.PLAIN,
            Map.of("serviceAccount.create", false, "serviceAccount.name", "gpu-monitoring")),
        new Combination(
            "installer-only",
            Mode.INSTALLER,
            Map.of(
                "exporter.enabled",
                false,
                "installer.writePreload",
                true,
                "installer.libraryNames[0]",
                "libvgpu.so",
                "installer.libraryNames[1]",
                "libvgpu.so.v2.7.0")));
  }

  /** The combinations that render the exporter DaemonSet (all but installer-only). */
  static List<Combination> exporterCombinations() {
    return combinations().stream()
        .filter(c -> !Boolean.FALSE.equals(c.sets().get("exporter.enabled")))
        .toList();
  }

  /**
   * Whether a combination turns on an optional object ({@code serviceMonitor}, {@code
   * prometheusRule}, {@code dashboard}): the non-default modes' values files turn all three on.
   */
  static boolean enables(Combination c, String valuesKey) {
    return c.mode() != Mode.PLAIN || Boolean.TRUE.equals(c.sets().get(valuesKey + ".enabled"));
  }

  static Path repoRoot() {
    // Surefire runs in exporter/; fall back to the working directory when run from the root.
    Path here = Path.of("").toAbsolutePath();
    for (Path p = here; p != null; p = p.getParent()) {
      if (Files.isDirectory(p.resolve("deploy/helm/vgpu-exporter"))) {
        return p;
      }
    }
    throw new IllegalStateException("deploy/helm/vgpu-exporter not found above " + here);
  }

  static Path chartDir() {
    return repoRoot().resolve("deploy/helm/vgpu-exporter");
  }

  static Helm helm() {
    return new Helm(chartDir());
  }

  static String render(Combination c) {
    return render(c.mode(), c.sets());
  }

  static String render(Mode mode, Map<String, Object> sets) {
    TemplateCommand cmd = helm().template().withName(RELEASE).withNamespace(NAMESPACE);
    if (mode.valuesFile.isPresent()) {
      cmd = cmd.withValuesFile(chartDir().resolve(mode.valuesFile.get()));
    }
    for (Map.Entry<String, Object> e : sets.entrySet()) {
      cmd = cmd.set(e.getKey(), e.getValue());
    }
    return cmd.call();
  }

  /** Splits a multi-document YAML stream; documents that are only comments are dropped. */
  static List<String> documents(String yaml) {
    List<String> out = new ArrayList<>();
    for (String doc : DOCUMENT_SEPARATOR.splitAsStream(yaml).toList()) {
      boolean empty =
          doc.lines().map(String::strip).allMatch(l -> l.isEmpty() || l.startsWith("#"));
      if (!empty) {
        out.add(doc);
      }
    }
    return out;
  }

  /** Every rendered object in fabric8's typed model (CRD kinds as GenericKubernetesResource). */
  static List<HasMetadata> parse(String yaml) {
    List<HasMetadata> out = new ArrayList<>();
    for (String doc : documents(yaml)) {
      Object o = SERIALIZATION.unmarshal(doc);
      if (!(o instanceof HasMetadata h)) {
        throw new IllegalStateException("not a Kubernetes object: " + doc);
      }
      out.add(h);
    }
    return out;
  }

  static <T extends HasMetadata> List<T> ofType(List<HasMetadata> objects, Class<T> type) {
    return objects.stream().filter(type::isInstance).map(type::cast).toList();
  }

  static List<GenericKubernetesResource> ofKind(List<HasMetadata> objects, String kind) {
    return ofType(objects, GenericKubernetesResource.class).stream()
        .filter(g -> kind.equals(g.getKind()))
        .toList();
  }

  /** The exporter DaemonSet (component=exporter), which every mode but installer-only has. */
  static DaemonSet exporterDaemonSet(List<HasMetadata> objects) {
    List<DaemonSet> found =
        ofType(objects, DaemonSet.class).stream()
            .filter(
                d ->
                    "exporter"
                        .equals(d.getMetadata().getLabels().get("app.kubernetes.io/component")))
            .toList();
    if (found.size() != 1) {
      throw new IllegalStateException("expected one exporter DaemonSet, found " + found.size());
    }
    return found.getFirst();
  }

  /** "--name=value" arguments as a name to value map (what ExporterConfig.resolve takes). */
  static Map<String, String> flagsOf(List<String> args) {
    Map<String, String> flags = new LinkedHashMap<>();
    for (String a : args) {
      if (!a.startsWith("--")) {
        continue;
      }
      int eq = a.indexOf('=');
      if (eq < 0) {
        throw new IllegalArgumentException("flag without =value: " + a);
      }
      if (flags.put(a.substring(2, eq), a.substring(eq + 1)) != null) {
        throw new IllegalArgumentException("flag given twice: " + a);
      }
    }
    return flags;
  }
}

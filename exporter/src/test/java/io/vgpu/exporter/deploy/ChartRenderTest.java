package io.vgpu.exporter.deploy;

import static org.assertj.core.api.Assertions.assertThat;

import com.marcnuri.helm.LintResult;
import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.ServiceAccount;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.VolumeMount;
import io.fabric8.kubernetes.api.model.apps.DaemonSet;
import io.fabric8.kubernetes.api.model.rbac.ClusterRole;
import io.fabric8.kubernetes.api.model.rbac.ClusterRoleBinding;
import io.fabric8.kubernetes.api.model.rbac.PolicyRule;
import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.vgpu.exporter.deploy.HelmChart.Combination;
import io.vgpu.exporter.deploy.HelmChart.Mode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import tools.jackson.core.type.TypeReference;

/** helm lint + helm template of every documented values combination, checked object by object. */
class ChartRenderTest {
  private static final Set<String> CRD_KINDS = Set.of("ServiceMonitor", "PrometheusRule");

  static List<Combination> combinations() {
    return HelmChart.combinations();
  }

  /**
   * Narrow sources, so that no case passes by returning early: each lists only the combinations
   * that render what the test inspects (JUnit fails a source that provides none).
   */
  static List<Combination> exporterCombinations() {
    return HelmChart.exporterCombinations();
  }

  static List<Combination> prometheusRuleCombinations() {
    return combinations().stream().filter(c -> HelmChart.enables(c, "prometheusRule")).toList();
  }

  static List<Combination> dashboardCombinations() {
    return combinations().stream().filter(c -> HelmChart.enables(c, "dashboard")).toList();
  }

  static List<Combination> installerCombinations() {
    return combinations().stream().filter(c -> c.mode() == Mode.INSTALLER).toList();
  }

  /** Whether a combination turns on any write-back switch (the chart must then mount rw). */
  private static boolean writes(Combination c) {
    return c.mode() == Mode.HAMI_REPLACEMENT
        || c.sets().entrySet().stream()
            .anyMatch(
                e ->
                    e.getKey().startsWith("exporter.writeBack.")
                        && Boolean.TRUE.equals(e.getValue()));
  }

  private static boolean exporterEnabled(Combination c) {
    return !Boolean.FALSE.equals(c.sets().get("exporter.enabled"));
  }

  @Test
  void lint_strictWithDefaultValues_reportsNoProblem() {
    LintResult result = HelmChart.helm().lint().strict().call();

    assertThat(result.isFailed()).as(String.join("\n", result.getMessages())).isFalse();
    assertThat(result.getMessages())
        .noneMatch(m -> m.contains("[ERROR]") || m.contains("[WARNING]"));
  }

  /**
   * helm-java's lint takes no values file, so each documented mode is linted on a copy of the chart
   * whose values.yaml is the defaults deep-merged with the mode's file (what `helm lint -f` does).
   * Links in the chart are copied as the files they point to.
   */
  @ParameterizedTest
  @org.junit.jupiter.params.provider.EnumSource(Mode.class)
  void lint_strictWithEachModesValues_reportsNoProblem(Mode mode, @TempDir Path tmp)
      throws IOException {
    Path chart = HelmChart.chartDir();
    Path copy = tmp.resolve("vgpu-exporter");
    try (var paths = Files.walk(chart)) {
      for (Path p : paths.toList()) {
        Path target = copy.resolve(chart.relativize(p).toString());
        if (Files.isDirectory(p)) {
          Files.createDirectories(target);
        } else {
          Files.copy(p, target); // follows links: files/ points into deploy/rules and grafana/
        }
      }
    }
    if (mode.valuesFile.isPresent()) {
      var serialization = new KubernetesSerialization();
      var type = new TypeReference<Map<String, Object>>() {};
      Map<String, Object> merged =
          serialization.unmarshal(Files.readString(chart.resolve("values.yaml")), type);
      Map<String, Object> overrides =
          serialization.unmarshal(Files.readString(chart.resolve(mode.valuesFile.get())), type);
      merged = deepMerge(merged, overrides);
      Files.writeString(copy.resolve("values.yaml"), serialization.asYaml(merged));
    }

    LintResult result = new com.marcnuri.helm.Helm(copy).lint().strict().call();

    assertThat(result.isFailed()).as(String.join("\n", result.getMessages())).isFalse();
    assertThat(result.getMessages())
        .noneMatch(m -> m.contains("[ERROR]") || m.contains("[WARNING]"));
  }

  /**
   * Helm's values merge: maps merge key by key, null in the override deletes the key, anything else
   * in the override replaces.
   */
  @SuppressWarnings("unchecked")
  private static Map<String, Object> deepMerge(
      Map<String, Object> base, Map<String, Object> override) {
    Map<String, Object> out = new java.util.LinkedHashMap<>(base == null ? Map.of() : base);
    if (override == null) {
      return out;
    }
    for (Map.Entry<String, Object> e : override.entrySet()) {
      Object current = out.get(e.getKey());
      Object value = e.getValue();
      if (value == null) {
        out.remove(e.getKey());
      } else if (current instanceof Map<?, ?> cm && value instanceof Map<?, ?> vm) {
        out.put(e.getKey(), deepMerge((Map<String, Object>) cm, (Map<String, Object>) vm));
      } else {
        out.put(e.getKey(), value);
      }
    }
    return out;
  }

  @ParameterizedTest
  @MethodSource("combinations")
  void template_combination_everyObjectParsesIntoTypedModelWithNoUnknownField(Combination c) {
    List<HasMetadata> objects = HelmChart.parse(HelmChart.render(c));

    assertThat(objects).isNotEmpty();
    for (HasMetadata o : objects) {
      String id = o.getKind() + "/" + o.getMetadata().getName();
      if (o instanceof GenericKubernetesResource g) {
        assertThat(CRD_KINDS).as("only CRD kinds stay untyped: %s", id).contains(g.getKind());
        assertThat(g.getApiVersion()).as(id).isEqualTo("monitoring.coreos.com/v1");
      }
      assertThat(UnknownFields.in(o))
          .as("fields the Kubernetes model does not know in %s", id)
          .isEmpty();
      assertThat(o.getMetadata().getName())
          .as(id)
          .matches("[a-z0-9]([-a-z0-9]*[a-z0-9])?")
          .hasSizeLessThan(64);
      if (!(o instanceof ClusterRole) && !(o instanceof ClusterRoleBinding)) {
        assertThat(o.getMetadata().getNamespace()).as(id).isEqualTo(HelmChart.NAMESPACE);
      }
      assertThat(o.getMetadata().getLabels())
          .as(id)
          .containsEntry("app.kubernetes.io/instance", HelmChart.RELEASE);
    }
  }

  @ParameterizedTest
  @MethodSource("combinations")
  void template_combination_everyContainerIsHardenedAndBounded(Combination c) {
    List<HasMetadata> objects = HelmChart.parse(HelmChart.render(c));

    List<DaemonSet> daemonSets = HelmChart.ofType(objects, DaemonSet.class);
    assertThat(daemonSets).isNotEmpty();
    for (DaemonSet ds : daemonSets) {
      PodSpec pod = ds.getSpec().getTemplate().getSpec();
      assertThat(pod.getSecurityContext().getSeccompProfile().getType())
          .isEqualTo("RuntimeDefault");
      assertThat(pod.getTolerations()).anyMatch(t -> "nvidia.com/gpu".equals(t.getKey()));
      assertThat(pod.getNodeSelector()).isNotEmpty();
      for (Container ctr : pod.getContainers()) {
        String id = ds.getMetadata().getName() + "/" + ctr.getName();
        var sc = ctr.getSecurityContext();
        assertThat(sc.getAllowPrivilegeEscalation()).as(id).isFalse();
        assertThat(sc.getPrivileged()).as(id).isFalse();
        assertThat(sc.getReadOnlyRootFilesystem()).as(id).isTrue();
        assertThat(sc.getCapabilities().getDrop()).as(id).containsExactly("ALL");
        assertThat(ctr.getResources().getLimits()).as(id).containsKey("memory");
        assertThat(ctr.getResources().getRequests()).as(id).containsKeys("cpu", "memory");
      }
    }
  }

  @ParameterizedTest
  @MethodSource("exporterCombinations")
  void template_exporter_privilegesFollowWriteMode(Combination c) {
    DaemonSet ds = HelmChart.exporterDaemonSet(HelmChart.parse(HelmChart.render(c)));
    PodSpec pod = ds.getSpec().getTemplate().getSpec();
    Container ctr = pod.getContainers().getFirst();
    VolumeMount cache = mountOf(ctr, "cache-root");

    assertThat(pod.getHostPID()).isTrue();
    if (writes(c)) {
      assertThat(pod.getSecurityContext().getRunAsUser()).isZero();
      assertThat(pod.getSecurityContext().getRunAsNonRoot()).isFalse();
      assertThat(cache.getReadOnly()).as("write-back needs the cache root read-write").isFalse();
      assertThat(ctr.getSecurityContext().getCapabilities().getAdd())
          .containsExactly("DAC_OVERRIDE");
    } else {
      assertThat(pod.getSecurityContext().getRunAsNonRoot()).isTrue();
      assertThat(pod.getSecurityContext().getRunAsUser()).isPositive();
      assertThat(cache.getReadOnly()).as("read-only mode mounts the cache root read-only").isTrue();
      assertThat(ctr.getSecurityContext().getCapabilities().getAdd()).isNullOrEmpty();
    }
    // Every hostPath the exporter sees is the cache root and, read-only, the kubelet's
    // pod-resources directory (docs/pod-resources.md); /proc comes from hostPID, not a mount.
    boolean podResources = !Boolean.FALSE.equals(c.sets().get("exporter.podResources.enabled"));
    var hostPaths =
        pod.getVolumes().stream().filter(v -> v.getHostPath() != null).map(Volume::getName);
    if (podResources) {
      assertThat(hostPaths).containsExactly("cache-root", "pod-resources");
      VolumeMount kubelet = mountOf(ctr, "pod-resources");
      assertThat(kubelet.getReadOnly()).as("the kubelet's directory is never writable").isTrue();
      assertThat(kubelet.getMountPath()).isEqualTo("/var/lib/kubelet/pod-resources");
      assertThat(ctr.getArgs())
          .contains("--kubelet.pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock");
    } else {
      assertThat(hostPaths).containsExactly("cache-root");
      assertThat(ctr.getArgs()).contains("--kubelet.pod-resources-socket=");
    }
  }

  @ParameterizedTest
  @MethodSource("combinations")
  void template_rbac_grantsOnlyReadsOfPodsAndNodes(Combination c) {
    List<HasMetadata> objects = HelmChart.parse(HelmChart.render(c));
    List<ClusterRole> roles = HelmChart.ofType(objects, ClusterRole.class);

    assertThat(objects)
        .noneMatch(o -> o.getKind().equals("Role") || o.getKind().equals("RoleBinding"));
    if (!exporterEnabled(c)) {
      assertThat(roles).isEmpty();
      return;
    }
    assertThat(roles).hasSize(1);
    for (PolicyRule rule : roles.getFirst().getRules()) {
      assertThat(rule.getApiGroups()).containsExactly("");
      assertThat(rule.getResources()).isSubsetOf("pods", "nodes");
      assertThat(rule.getVerbs()).isSubsetOf("get", "list", "watch");
      assertThat(rule.getResourceNames()).isNullOrEmpty();
    }
    ClusterRoleBinding binding = HelmChart.ofType(objects, ClusterRoleBinding.class).getFirst();
    String sa =
        HelmChart.exporterDaemonSet(objects)
            .getSpec()
            .getTemplate()
            .getSpec()
            .getServiceAccountName();
    assertThat(binding.getRoleRef().getName()).isEqualTo(roles.getFirst().getMetadata().getName());
    assertThat(binding.getSubjects())
        .singleElement()
        .satisfies(
            s -> {
              assertThat(s.getName()).isEqualTo(sa);
              assertThat(s.getNamespace()).isEqualTo(HelmChart.NAMESPACE);
            });
    boolean created = !Boolean.FALSE.equals(c.sets().get("serviceAccount.create"));
    assertThat(
            HelmChart.ofType(objects, ServiceAccount.class).stream()
                .map(s -> s.getMetadata().getName())
                .toList())
        .isEqualTo(created ? List.of(sa) : List.of());
  }

  @ParameterizedTest
  @MethodSource("exporterCombinations")
  void template_serviceAndServiceMonitor_reachTheExporterPort(Combination c) {
    List<HasMetadata> objects = HelmChart.parse(HelmChart.render(c));
    DaemonSet ds = HelmChart.exporterDaemonSet(objects);
    Map<String, String> podLabels = ds.getSpec().getTemplate().getMetadata().getLabels();
    ContainerPort port =
        ds.getSpec().getTemplate().getSpec().getContainers().getFirst().getPorts().getFirst();
    Service svc = HelmChart.ofType(objects, Service.class).getFirst();

    assertThat(svc.getSpec().getClusterIP()).as("headless").isEqualTo("None");
    assertThat(podLabels).containsAllEntriesOf(svc.getSpec().getSelector());
    assertThat(ds.getSpec().getSelector().getMatchLabels()).isEqualTo(svc.getSpec().getSelector());
    assertThat(svc.getSpec().getPorts())
        .singleElement()
        .satisfies(
            p -> {
              assertThat(p.getPort()).isEqualTo(port.getContainerPort());
              assertThat(p.getTargetPort().getStrVal()).isEqualTo(port.getName());
            });

    List<GenericKubernetesResource> monitors = HelmChart.ofKind(objects, "ServiceMonitor");
    assertThat(monitors).hasSize(HelmChart.enables(c, "serviceMonitor") ? 1 : 0);
    for (GenericKubernetesResource sm : monitors) {
      Map<String, String> matchLabels = sm.get("spec", "selector", "matchLabels");
      List<Map<String, Object>> endpoints = sm.get("spec", "endpoints");
      assertThat(svc.getMetadata().getLabels()).containsAllEntriesOf(matchLabels);
      assertThat(endpoints)
          .singleElement()
          .satisfies(
              e -> {
                assertThat(e).containsEntry("port", svc.getSpec().getPorts().getFirst().getName());
                assertThat(e).containsEntry("path", "/metrics");
                assertThat(e).containsEntry("honorLabels", true);
              });
      List<String> namespaces = sm.get("spec", "namespaceSelector", "matchNames");
      assertThat(namespaces).containsExactly(HelmChart.NAMESPACE);
    }
  }

  @ParameterizedTest
  @MethodSource("combinations")
  void template_optionalObjects_renderedExactlyWhenEnabled(Combination c) {
    List<HasMetadata> objects = HelmChart.parse(HelmChart.render(c));

    assertThat(HelmChart.ofKind(objects, "PrometheusRule"))
        .hasSize(HelmChart.enables(c, "prometheusRule") ? 1 : 0);
    assertThat(HelmChart.ofType(objects, ConfigMap.class))
        .hasSize(HelmChart.enables(c, "dashboard") ? 1 : 0);
    assertThat(
            HelmChart.ofType(objects, DaemonSet.class).stream()
                .filter(
                    d ->
                        "installer"
                            .equals(
                                d.getMetadata().getLabels().get("app.kubernetes.io/component"))))
        .hasSize(c.mode() == Mode.INSTALLER ? 1 : 0);
  }

  @ParameterizedTest
  @MethodSource("prometheusRuleCombinations")
  void template_prometheusRule_isTheRulesFileAndPassesPromtool(Combination c, @TempDir Path tmp)
      throws IOException, InterruptedException {
    List<GenericKubernetesResource> rules =
        HelmChart.ofKind(HelmChart.parse(HelmChart.render(c)), "PrometheusRule");
    assertThat(rules).hasSize(1);
    var serialization = new KubernetesSerialization();
    Path rulesFile = HelmChart.repoRoot().resolve("deploy/rules/vgpu-exporter.rules.yaml");
    Map<String, Object> source =
        serialization.unmarshal(
            Files.readString(rulesFile), new TypeReference<Map<String, Object>>() {});
    Object renderedGroups = rules.getFirst().get("spec", "groups");

    assertThat(renderedGroups).isEqualTo(source.get("groups"));
    Path extracted = tmp.resolve("from-chart.rules.yaml");
    Files.writeString(extracted, serialization.asYaml(Map.of("groups", renderedGroups)));
    Process promtool =
        new ProcessBuilder("promtool", "check", "rules", extracted.toString())
            .redirectErrorStream(true)
            .start();
    String out = new String(promtool.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(promtool.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(promtool.exitValue()).as(out).isZero();
    assertThat(out).contains("SUCCESS");
  }

  @ParameterizedTest
  @MethodSource("dashboardCombinations")
  void template_dashboardConfigMap_isTheDashboardFileWithSidecarLabel(Combination c)
      throws IOException {
    List<ConfigMap> maps = HelmChart.ofType(HelmChart.parse(HelmChart.render(c)), ConfigMap.class);
    assertThat(maps).hasSize(1);
    ConfigMap cm = maps.getFirst();
    String json = Files.readString(HelmChart.repoRoot().resolve("grafana/vgpu-exporter.json"));

    assertThat(cm.getMetadata().getLabels()).containsEntry("grafana_dashboard", "1");
    assertThat(cm.getData())
        .containsOnlyKeys(
            "vgpu-exporter.json", "vgpu-exporter-cluster.json", "vgpu-usage-cost.json");
    assertThat(cm.getData().get("vgpu-exporter.json").strip()).isEqualTo(json.strip());
    String cluster =
        Files.readString(HelmChart.repoRoot().resolve("grafana/vgpu-exporter-cluster.json"));
    assertThat(cm.getData().get("vgpu-exporter-cluster.json").strip()).isEqualTo(cluster.strip());
    String usage = Files.readString(HelmChart.repoRoot().resolve("grafana/vgpu-usage-cost.json"));
    assertThat(cm.getData().get("vgpu-usage-cost.json").strip()).isEqualTo(usage.strip());
    // `kubectl apply` (client side) keeps the whole object in an annotation limited to 256 KiB.
    int bytes =
        cm.getData().values().stream()
            .mapToInt(v -> v.getBytes(java.nio.charset.StandardCharsets.UTF_8).length)
            .sum();
    assertThat(bytes).as("dashboard ConfigMap data bytes").isLessThan(256 * 1024);
    if (c.sets().containsKey("dashboard.folder")) {
      assertThat(cm.getMetadata().getAnnotations())
          .containsEntry("grafana_folder", String.valueOf(c.sets().get("dashboard.folder")));
    }
  }

  @ParameterizedTest
  @MethodSource("installerCombinations")
  void template_installer_placesLibraryWhereHamiMountsIt(Combination c) {
    List<DaemonSet> installers =
        HelmChart.ofType(HelmChart.parse(HelmChart.render(c)), DaemonSet.class).stream()
            .filter(
                d ->
                    "installer"
                        .equals(d.getMetadata().getLabels().get("app.kubernetes.io/component")))
            .toList();
    assertThat(installers).hasSize(1);
    PodSpec pod = installers.getFirst().getSpec().getTemplate().getSpec();
    Container ctr = pod.getContainers().getFirst();
    List<String> command = ctr.getCommand();

    assertThat(pod.getAutomountServiceAccountToken())
        .as("the installer needs no API access")
        .isFalse();
    assertThat(pod.getHostPID()).isNull();
    assertThat(pod.getSecurityContext().getRunAsUser()).isZero();
    assertThat(ctr.getSecurityContext().getCapabilities().getAdd()).isNullOrEmpty();
    assertThat(command)
        .contains(
            "--to=/usr/local/vgpu",
            "/opt/vgpu/lib/libvgpu.so:libvgpu.so",
            "/opt/vgpu/bin/shrreg-tool");
    assertThat(command.contains("--preload"))
        .isEqualTo(Boolean.TRUE.equals(c.sets().get("installer.writePreload")));
    VolumeMount m = mountOf(ctr, "host-dir");
    assertThat(m.getMountPath()).isEqualTo("/usr/local/vgpu");
    assertThat(m.getReadOnly()).isNotEqualTo(true);
    assertThat(pod.getVolumes())
        .singleElement()
        .satisfies(v -> assertThat(v.getHostPath().getPath()).isEqualTo("/usr/local/vgpu"));
  }

  @Test
  void template_defaultValues_createNoOperatorObjectsAndNoInstaller() {
    List<HasMetadata> objects = HelmChart.parse(HelmChart.render(Mode.PLAIN, Map.of()));
    List<String> kinds =
        new ArrayList<>(objects.stream().map(HasMetadata::getKind).sorted().toList());

    assertThat(kinds)
        .containsExactly(
            "ClusterRole", "ClusterRoleBinding", "DaemonSet", "Service", "ServiceAccount");
  }

  /**
   * The web configuration Secret is mounted read-only where --web.config.file points, probes and
   * the ServiceMonitor switch to HTTPS with it, and the ServiceMonitor sends basic-auth
   * credentials; without it, plain HTTP and the status views limited to loopback clients by
   * default.
   */
  @Test
  void template_webConfig_mountedPassedAndScrapedOverHttps() {
    Combination tls =
        HelmChart.combinations().stream()
            .filter(c -> c.name().equals("plain+web-config-tls+operator"))
            .findFirst()
            .orElseThrow();
    List<HasMetadata> objects = HelmChart.parse(HelmChart.render(tls));
    DaemonSet ds = HelmChart.exporterDaemonSet(objects);
    Container ctr = ds.getSpec().getTemplate().getSpec().getContainers().getFirst();
    assertThat(ctr.getArgs())
        .contains("--web.config.file=/etc/vgpu-exporter/web/web-config.yml")
        .contains("--web.status-pages=off");
    VolumeMount m = mountOf(ctr, "web-config");
    assertThat(m.getMountPath()).isEqualTo("/etc/vgpu-exporter/web");
    assertThat(m.getReadOnly()).isTrue();
    assertThat(
            ds.getSpec().getTemplate().getSpec().getVolumes().stream()
                .filter(v -> v.getName().equals("web-config"))
                .map(v -> v.getSecret().getSecretName()))
        .containsExactly("vgpu-exporter-web");
    assertThat(ctr.getLivenessProbe().getHttpGet().getScheme()).isEqualTo("HTTPS");
    assertThat(ctr.getReadinessProbe().getHttpGet().getScheme()).isEqualTo("HTTPS");
    GenericKubernetesResource sm = HelmChart.ofKind(objects, "ServiceMonitor").getFirst();
    List<Map<String, Object>> endpoints = sm.get("spec", "endpoints");
    assertThat(endpoints.getFirst())
        .containsEntry("scheme", "https")
        .containsKey("tlsConfig")
        .containsKey("basicAuth");

    DaemonSet plain =
        HelmChart.exporterDaemonSet(HelmChart.parse(HelmChart.render(Mode.PLAIN, Map.of())));
    Container p = plain.getSpec().getTemplate().getSpec().getContainers().getFirst();
    assertThat(p.getArgs())
        .contains("--web.status-pages=loopback")
        .noneMatch(a -> a.startsWith("--web.config.file"));
    assertThat(p.getLivenessProbe().getHttpGet().getScheme()).isNull();
  }

  /**
   * docs/operate.md ("Operate: kubectl exec recipes") promises, per chart mode, who the pod runs
   * as, how the cache root is mounted and whether {@code cleanup --apply} / {@code unlock --apply}
   * work. Each mode's rendered DaemonSet must grant exactly that, plus what every mode's read-only
   * recipe needs: the host's /proc, a writable /tmp for the exec'd JVM, the cache root in {@code
   * VGPU_EXPORTER_PATH_CACHE_ROOT} (so the exec'd subcommands read what serve reads), {@code
   * NODE_NAME}, and API reads of nodes (doctor's annotations) and pods (doctor --pod).
   */
  @ParameterizedTest
  @org.junit.jupiter.params.provider.EnumSource(Mode.class)
  void template_eachMode_grantsWhatItsKubectlExecRecipeSays(Mode mode) throws IOException {
    Map<String, List<String>> table = recipeTable();
    String valuesFile = mode.valuesFile.orElse("values.yaml");
    assertThat(table).as("docs/operate.md recipe table rows").hasSize(Mode.values().length);
    List<String> row = table.get(valuesFile);
    assertThat(row).as("docs/operate.md recipe table has a row for %s", valuesFile).isNotNull();
    String runsAs = row.get(2);
    String cacheRoot = row.get(3);
    String apply = row.get(5);

    List<HasMetadata> objects = HelmChart.parse(HelmChart.render(mode, Map.of()));
    PodSpec pod = HelmChart.exporterDaemonSet(objects).getSpec().getTemplate().getSpec();
    Container ctr = pod.getContainers().getFirst();
    VolumeMount cache = mountOf(ctr, "cache-root");
    var uid = java.util.regex.Pattern.compile("uid (\\d+)").matcher(runsAs);
    assertThat(uid.find()).as("runs-as column names a uid: %s", runsAs).isTrue();
    assertThat(pod.getSecurityContext().getRunAsUser()).isEqualTo(Long.parseLong(uid.group(1)));
    List<String> added = ctr.getSecurityContext().getCapabilities().getAdd();
    if (runsAs.contains("no capabilities")) {
      assertThat(added).isNullOrEmpty();
    } else {
      assertThat(added)
          .containsExactlyInAnyOrder(
              runsAs.substring(uid.end()).replaceFirst("^[,\\s]+", "").split("[,\\s]+", -1));
    }
    assertThat(cacheRoot).isIn("read-only", "read-write");
    assertThat(cache.getReadOnly())
        .as("%s: cache root", mode)
        .isEqualTo(cacheRoot.equals("read-only"));
    assertThat(apply).isIn("yes", "no");
    assertThat(apply.equals("yes"))
        .as("%s: --apply works exactly when the cache root is writable", mode)
        .isEqualTo(!cache.getReadOnly());
    assertThat(row.get(4)).isEqualTo("yes");

    assertThat(pod.getHostPID()).isTrue();
    assertThat(mountOf(ctr, "tmp").getMountPath()).isEqualTo("/tmp");
    Map<String, io.fabric8.kubernetes.api.model.EnvVar> env = new java.util.HashMap<>();
    ctr.getEnv().forEach(e -> env.put(e.getName(), e));
    assertThat(env)
        .as("exec'd subcommands find the cache root and node through the pod's env")
        .containsKeys("VGPU_EXPORTER_PATH_CACHE_ROOT", "NODE_NAME");
    assertThat(env.get("VGPU_EXPORTER_PATH_CACHE_ROOT").getValue())
        .isEqualTo(cache.getMountPath())
        .isEqualTo(HelmChart.flagsOf(ctr.getArgs()).get("path.cache-root"));
    assertThat(env.get("NODE_NAME").getValueFrom().getFieldRef().getFieldPath())
        .isEqualTo("spec.nodeName");
    assertThat(pod.getAutomountServiceAccountToken()).isNotEqualTo(false);
    List<PolicyRule> rules = HelmChart.ofType(objects, ClusterRole.class).getFirst().getRules();
    assertThat(rules)
        .anyMatch(r -> r.getResources().contains("nodes") && r.getVerbs().contains("get"))
        .anyMatch(r -> r.getResources().contains("pods") && r.getVerbs().contains("list"));
  }

  /** docs/operate.md's recipe table: the values file (column 2) to the row's cells. */
  private static Map<String, List<String>> recipeTable() throws IOException {
    String recipes = Files.readString(HelmChart.repoRoot().resolve("docs/operate.md"));
    assertThat(recipes)
        .as("docs/operate.md is \"Operate: kubectl exec recipes\"")
        .startsWith("# Operate: kubectl exec recipes\n");
    Map<String, List<String>> rows = new java.util.LinkedHashMap<>();
    for (String line : recipes.split("\n", -1)) {
      if (!line.startsWith("| ") || line.startsWith("| chart mode")) {
        continue;
      }
      List<String> cells =
          java.util.Arrays.stream(line.substring(1, line.length() - 1).split("\\|"))
              .map(x -> x.strip().replace("`", ""))
              .toList();
      assertThat(cells).as(line).hasSize(6);
      rows.put(cells.get(1), cells);
    }
    return rows;
  }

  private static VolumeMount mountOf(Container ctr, String volume) {
    return ctr.getVolumeMounts().stream()
        .filter(m -> m.getName().equals(volume))
        .findFirst()
        .orElseThrow(
            () -> new AssertionError("no mount of volume " + volume + " in " + ctr.getName()));
  }
}

package io.vgpu.exporter.deploy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.HTTPGetAction;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.VolumeMount;
import io.fabric8.kubernetes.api.model.apps.DaemonSet;
import io.fabric8.kubernetes.api.model.rbac.ClusterRoleBinding;
import io.vgpu.exporter.attribution.AttributionService;
import io.vgpu.exporter.cli.Cli;
import io.vgpu.exporter.config.Endpoints;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.config.Flags;
import io.vgpu.exporter.deploy.HelmChart.Combination;
import io.vgpu.exporter.deploy.HelmChart.Mode;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The exporter DaemonSet the chart renders must match what the exporter actually reads and serves:
 * its arguments go through the exporter's own command line (picocli, {@link Cli}) and its own
 * config resolution ({@link ExporterConfig#resolve}), and ports, probes, mounts and privileges are
 * checked against the resolved values and {@link Endpoints}, not against copies of them.
 */
class DaemonSetContractTest {
  private static final String DOWNWARD_NODE_NAME = "gpu-node-7";

  static List<Combination> exporterCombinations() {
    return HelmChart.combinations().stream()
        .filter(c -> !Boolean.FALSE.equals(c.sets().get("exporter.enabled")))
        .toList();
  }

  /** The environment the kubelet would give the container (downward API resolved). */
  private static Map<String, String> environmentOf(Container ctr) {
    Map<String, String> env = new HashMap<>();
    for (EnvVar e : ctr.getEnv()) {
      if (e.getValue() != null) {
        env.put(e.getName(), e.getValue());
      } else if (e.getValueFrom() != null
          && e.getValueFrom().getFieldRef() != null
          && "spec.nodeName".equals(e.getValueFrom().getFieldRef().getFieldPath())) {
        env.put(e.getName(), DOWNWARD_NODE_NAME);
      }
    }
    return env;
  }

  private static ExporterConfig resolve(Container ctr) {
    return ExporterConfig.resolve(HelmChart.flagsOf(ctr.getArgs()), environmentOf(ctr));
  }

  /**
   * Whether the exporter writes into the cache root under this config: its attribution service's
   * own decision ({@link AttributionService.Settings#writes()}) or stale-directory removal.
   */
  private static boolean exporterWrites(ExporterConfig config) {
    AttributionService.Settings d = AttributionService.Settings.defaults();
    AttributionService.Settings attribution =
        new AttributionService.Settings(
            d.interval(),
            d.feedbackInterval(),
            config.get(Flags.ATTRIBUTION_FEEDBACK),
            config.get(Flags.ATTRIBUTION_REPAIR_HOSTPID),
            d.reconciler());
    return attribution.writes() || config.get(Flags.STALE_REMOVE);
  }

  @ParameterizedTest
  @ValueSource(strings = {"feedback", "hostPidRepair", "removeStaleDirs"})
  void writeBackSwitch_eachChartSwitchAlone_makesTheExporterWriteAndTheMountReadWrite(String key) {
    Container off = exporterContainer(new Combination("plain", Mode.PLAIN, Map.of()));
    Container on =
        exporterContainer(
            new Combination(key, Mode.PLAIN, Map.of("exporter.writeBack." + key, true)));

    assertThat(exporterWrites(resolve(off))).isFalse();
    assertThat(exporterWrites(resolve(on))).as("writeBack.%s turns on a write mode", key).isTrue();
    assertThat(on.getVolumeMounts())
        .anyMatch(m -> m.getName().equals("cache-root") && !m.getReadOnly());
  }

  @ParameterizedTest
  @MethodSource("exporterCombinations")
  void args_parseWithTheExportersOwnCommandLineAndConfig(Combination c) {
    Container ctr = exporterContainer(c);
    List<String> args = ctr.getArgs();
    StringWriter err = new StringWriter();

    assertThat(args.getFirst()).isEqualTo("serve");
    assertThat(Cli.SUBCOMMANDS).containsKey(args.getFirst());
    assertThatCode(
            () ->
                Cli.commandLine(new PrintWriter(new StringWriter()), new PrintWriter(err))
                    .parseArgs(args.toArray(String[]::new)))
        .as("picocli rejects the chart's args: %s", err)
        .doesNotThrowAnyException();
    assertThatCode(() -> resolve(ctr)).doesNotThrowAnyException();
    for (String name : HelmChart.flagsOf(args).keySet()) {
      assertThat(Flags.ALL)
          .as("--%s is an exporter flag", name)
          .anyMatch(f -> f.name().equals(name));
    }
    for (EnvVar e : ctr.getEnv()) {
      // VGPU_EXPORTER_JAVA_OPTS is the image launcher's (JVM options), not the exporter's.
      if (e.getName().startsWith("VGPU_EXPORTER_")
          && !e.getName().equals("VGPU_EXPORTER_JAVA_OPTS")) {
        assertThat(Flags.ALL)
            .as("env %s is read by a flag", e.getName())
            .anyMatch(f -> f.envVar().equals(e.getName()));
      }
    }
  }

  @ParameterizedTest
  @MethodSource("exporterCombinations")
  void portAndProbes_matchWhatTheExporterServes(Combination c) {
    Container ctr = exporterContainer(c);
    ExporterConfig config = resolve(ctr);
    ContainerPort port = ctr.getPorts().getFirst();
    HTTPGetAction liveness = ctr.getLivenessProbe().getHttpGet();
    HTTPGetAction readiness = ctr.getReadinessProbe().getHttpGet();

    assertThat(ctr.getPorts()).hasSize(1);
    assertThat(port.getContainerPort()).isEqualTo(config.port());
    assertThat(liveness.getPath()).isEqualTo(Endpoints.HEALTHZ);
    assertThat(readiness.getPath()).isEqualTo(Endpoints.READYZ);
    assertThat(List.of(liveness.getPort().getStrVal(), readiness.getPort().getStrVal()))
        .containsOnly(port.getName());
    // Reachable from the kubelet and Prometheus: not bound to loopback.
    assertThat(config.bindAddress()).isIn("0.0.0.0", "::");
  }

  @ParameterizedTest
  @MethodSource("exporterCombinations")
  void nodeName_comesFromTheDownwardApiThroughAVariableTheExporterReads(Combination c) {
    Container ctr = exporterContainer(c);

    assertThat(resolve(ctr).nodeName()).isEqualTo(DOWNWARD_NODE_NAME);
    assertThat(ctr.getEnv())
        .filteredOn(e -> Flags.NODE_NAME.envVars().contains(e.getName()))
        .singleElement()
        .satisfies(
            e ->
                assertThat(e.getValueFrom().getFieldRef().getFieldPath())
                    .isEqualTo("spec.nodeName"));
  }

  @ParameterizedTest
  @MethodSource("exporterCombinations")
  void mounts_giveTheExporterItsCacheRootAndProcfsWithTheAccessItsModeNeeds(Combination c) {
    List<HasMetadata> objects = HelmChart.parse(HelmChart.render(c));
    DaemonSet ds = HelmChart.exporterDaemonSet(objects);
    PodSpec pod = ds.getSpec().getTemplate().getSpec();
    Container ctr = pod.getContainers().getFirst();
    ExporterConfig config = resolve(ctr);
    boolean writes = exporterWrites(config);
    String cacheRoot = config.cacheRoot().toString();

    VolumeMount mount =
        ctr.getVolumeMounts().stream()
            .filter(m -> Path.of(m.getMountPath()).equals(config.cacheRoot()))
            .findFirst()
            .orElseThrow(
                () -> new AssertionError("nothing mounted at the cache root " + cacheRoot));
    Volume volume =
        pod.getVolumes().stream()
            .filter(v -> v.getName().equals(mount.getName()))
            .findFirst()
            .orElseThrow();
    assertThat(volume.getHostPath().getPath())
        .as("same path on host and in the container")
        .isEqualTo(cacheRoot);
    assertThat(mount.getReadOnly())
        .as("read-only exactly when the exporter writes nothing")
        .isEqualTo(!writes);
    assertThat(pod.getSecurityContext().getRunAsNonRoot()).isEqualTo(!writes);
    // /proc of the host pid namespace: the container's own /proc once hostPID is on.
    assertThat(config.procfs()).isEqualTo(Path.of("/proc"));
    assertThat(pod.getHostPID()).isTrue();
    // The JVM writes only to /tmp (JNA's stub, temp files): an emptyDir under a read-only root.
    assertThat(ctr.getSecurityContext().getReadOnlyRootFilesystem()).isTrue();
    assertThat(ctr.getVolumeMounts()).anyMatch(m -> m.getMountPath().equals("/tmp"));
    if (config.kubernetes()) {
      assertThat(pod.getAutomountServiceAccountToken()).isNotEqualTo(false);
      assertThat(HelmChart.ofType(objects, ClusterRoleBinding.class))
          .anyMatch(
              b ->
                  b.getSubjects().stream()
                      .anyMatch(s -> s.getName().equals(pod.getServiceAccountName())));
    }
  }

  @Test
  void hamiReplacement_usesHamisPathPortAndFeedbackLoop() {
    Container ctr = exporterContainer(new Combination("hami", Mode.HAMI_REPLACEMENT, Map.of()));
    ExporterConfig config = resolve(ctr);

    assertThat(config.port()).isEqualTo(Endpoints.DEFAULT_PORT).isEqualTo(9394);
    assertThat(config.cacheRoot()).isEqualTo(Path.of("/usr/local/vgpu/containers"));
    assertThat(config.get(Flags.ATTRIBUTION_FEEDBACK)).isTrue();
    assertThat(config.hamiCompat()).isTrue();
  }

  @Test
  void plain_writesNothing() {
    ExporterConfig config =
        resolve(exporterContainer(new Combination("plain", Mode.PLAIN, Map.of())));

    assertThat(exporterWrites(config)).isFalse();
  }

  private static Container exporterContainer(Combination c) {
    DaemonSet ds = HelmChart.exporterDaemonSet(HelmChart.parse(HelmChart.render(c)));
    return ds.getSpec().getTemplate().getSpec().getContainers().getFirst();
  }
}

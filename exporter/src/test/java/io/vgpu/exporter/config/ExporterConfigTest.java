package io.vgpu.exporter.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class ExporterConfigTest {
  @Test
  void resolve_nothingGiven_usesDocumentedDefaults() {
    ExporterConfig c = ExporterConfig.defaults();
    assertThat(c.port()).isEqualTo(9394);
    assertThat(c.bindAddress()).isEqualTo("0.0.0.0");
    assertThat(c.cacheRoot()).isEqualTo(Path.of("/usr/local/vgpu/containers"));
    assertThat(c.rescanInterval()).isEqualTo(Duration.ofSeconds(10));
    assertThat(c.hamiCompat()).isTrue();
    assertThat(c.get(Flags.STALE_REMOVE)).isFalse();
  }

  @Test
  void resolve_envOnly_readsPrefixedVariable() {
    ExporterConfig c =
        ExporterConfig.resolve(
            Map.of(),
            Map.of("VGPU_EXPORTER_WEB_LISTEN_PORT", "9500", "VGPU_EXPORTER_HAMI_COMPAT", "false"));
    assertThat(c.port()).isEqualTo(9500);
    assertThat(c.hamiCompat()).isFalse();
    assertThat(c.source(Flags.WEB_LISTEN_PORT)).contains("VGPU_EXPORTER_WEB_LISTEN_PORT");
  }

  @Test
  void resolve_commandLineAndEnv_commandLineWins() {
    ExporterConfig c =
        ExporterConfig.resolve(
            Map.of("web.listen-port", "9600"), Map.of("VGPU_EXPORTER_WEB_LISTEN_PORT", "9500"));
    assertThat(c.port()).isEqualTo(9600);
  }

  @Test
  void nodeName_downwardApiAlias_isUsedWhenPrefixedVariableAbsent() {
    assertThat(ExporterConfig.resolve(Map.of(), Map.of("NODE_NAME", "gpu-7")).nodeName())
        .isEqualTo("gpu-7");
    assertThat(
            ExporterConfig.resolve(
                    Map.of(), Map.of("NODE_NAME", "gpu-7", "VGPU_EXPORTER_NODE_NAME", "gpu-8"))
                .nodeName())
        .isEqualTo("gpu-8");
  }

  @Test
  void resolve_severalBadValues_reportsEachWithFlagSourceAndExpectation() {
    assertThatThrownBy(
            () ->
                ExporterConfig.resolve(
                    Map.of("web.listen-port", "70000", "discovery.rescan-interval", "10"),
                    Map.of(
                        "VGPU_EXPORTER_LOG_LEVEL",
                        "loud",
                        "VGPU_EXPORTER_KUBERNETES_POD_LABELS",
                        "ok,bad key")))
        .isInstanceOfSatisfying(
            ConfigException.class,
            e ->
                assertThat(e.problems())
                    .hasSize(4)
                    .anySatisfy(
                        p ->
                            assertThat(p)
                                .contains("--web.listen-port")
                                .contains("70000")
                                .contains("0-65535"))
                    .anySatisfy(
                        p ->
                            assertThat(p).contains("--discovery.rescan-interval").contains("500ms"))
                    .anySatisfy(
                        p ->
                            assertThat(p)
                                .contains("--log.level")
                                .contains("environment VGPU_EXPORTER_LOG_LEVEL"))
                    .anySatisfy(
                        p -> assertThat(p).contains("'bad key' is not a Kubernetes label key")));
  }

  @Test
  void resolve_unknownFlag_isRejected() {
    assertThatThrownBy(() -> ExporterConfig.resolve(Map.of("no.such-flag", "1"), Map.of()))
        .hasMessageContaining("unknown flag --no.such-flag");
  }

  @Test
  void resolve_rescanBelowMinimum_isRejected() {
    assertThatThrownBy(
            () -> ExporterConfig.resolve(Map.of("discovery.rescan-interval", "50ms"), Map.of()))
        .hasMessageContaining("at least 100ms");
  }

  @Test
  void flags_all_haveUniqueNamesEnvVarsAndParseableDefaults() {
    Set<String> names = new HashSet<>();
    Set<String> envs = new HashSet<>();
    for (Flag<?> f : Flags.ALL) {
      assertThat(names.add(f.name())).as("duplicate flag %s", f.name()).isTrue();
      assertThat(envs.add(f.envVar())).as("duplicate env %s", f.envVar()).isTrue();
      assertThat(f.envVar()).matches("VGPU_EXPORTER_[A-Z0-9_]+");
      assertThat(f.description()).isNotBlank();
      f.defaultParsed(); // throws if a default does not parse
    }
  }

  @Test
  void defaults_writeNothing_andEachWriterIsAnnouncedWithTheFieldsItWrites() {
    // The binary's default is read-only; the HAMi-replacement chart mode turns feedback on.
    assertThat(ExporterConfig.defaults().get(Flags.ATTRIBUTION_FEEDBACK)).isFalse();
    assertThat(RegionWrites.of(ExporterConfig.defaults()).any()).isFalse();
    assertThat(RegionWrites.of(ExporterConfig.defaults()).summary()).startsWith("read-only");

    RegionWrites on =
        RegionWrites.of(
            ExporterConfig.defaults()
                .with(Flags.ATTRIBUTION_FEEDBACK, true)
                .with(Flags.ATTRIBUTION_REPAIR_HOSTPID, true));
    assertThat(on.writers()).hasSize(2);
    assertThat(on.summary())
        .contains("--attribution.feedback", "recent_kernel", "utilization_switch")
        .contains("--attribution.repair-hostpid", "hostpid");
  }

  @Test
  void with_override_replacesOnlyThatFlag() {
    ExporterConfig c = ExporterConfig.defaults().with(Flags.WEB_LISTEN_PORT, 0);
    assertThat(c.port()).isZero();
    assertThat(c.cacheRoot()).isEqualTo(Path.of("/usr/local/vgpu/containers"));
  }

  @Test
  void endpoints_all_areDistinctAbsolutePaths() {
    assertThat(Endpoints.ALL).doesNotHaveDuplicates().allMatch(p -> p.startsWith("/"));
    assertThat(Endpoints.ALL)
        .containsAll(List.of("/metrics", "/healthz", "/readyz", "/api/v1/containers"));
  }
}

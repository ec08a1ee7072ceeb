package io.vgpu.exporter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.Configurator;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ServiceLoader;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/** Logging as configured at start-up (no logback.xml) and by the log flags. */
class LogSetupTest {
  private final PrintStream realErr = System.err;

  @AfterEach
  void restore() {
    System.setErr(realErr);
    LogSetup.configure("info", "logfmt");
  }

  /** Configures a context while stderr is captured, logs two lines, returns what was written. */
  private static String capture(Runnable configure, Runnable log) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    PrintStream previous = System.err;
    System.setErr(new PrintStream(bytes, true, StandardCharsets.UTF_8));
    try {
      configure.run();
      log.run();
    } finally {
      System.setErr(previous);
    }
    return bytes.toString(StandardCharsets.UTF_8);
  }

  @Test
  void startupConfigurator_isFoundByLogback_andWritesLogfmtAtInfo() {
    assertThat(ServiceLoader.load(Configurator.class).stream().map(ServiceLoader.Provider::type))
        .contains(StartupLogConfigurator.class);
    LoggerContext ctx = (LoggerContext) LoggerFactory.getILoggerFactory();
    String out =
        capture(
            () -> new StartupLogConfigurator().configure(ctx),
            () -> {
              LoggerFactory.getLogger("io.vgpu.exporter.Probe").atDebug().log("hidden");
              LoggerFactory.getLogger("io.vgpu.exporter.Probe")
                  .atInfo()
                  .setMessage("shown")
                  .addKeyValue("n", 1)
                  .log();
              LoggerFactory.getLogger("org.eclipse.jetty.Server").info("noisy");
            });
    assertThat(out)
        .matches("(?s)ts=\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z level=INFO .*")
        .contains("level=INFO logger=Probe msg=\"shown\" n=1")
        .doesNotContain("hidden")
        .doesNotContain("noisy");
  }

  @Test
  void flags_jsonAtDebug_oneJsonObjectPerLine() {
    LoggerContext ctx = (LoggerContext) LoggerFactory.getILoggerFactory();
    String out =
        capture(
            () -> LogSetup.configure(ctx, "debug", "json"),
            () -> LoggerFactory.getLogger("io.vgpu.exporter.Probe").debug("now shown"));
    assertThat(out.lines().filter(l -> l.contains("now shown")).findFirst())
        .hasValueSatisfying(
            l -> assertThat(l).startsWith("{").endsWith("}").contains("\"level\":\"DEBUG\""));
  }

  @Test
  void logfmt_tenantNameWithEscapesAndNewline_oneLineWithoutControls() {
    LoggerContext ctx = (LoggerContext) LoggerFactory.getILoggerFactory();
    String out =
        capture(
            () -> LogSetup.configure(ctx, "info", "logfmt"),
            () ->
                LoggerFactory.getLogger("io.vgpu.exporter.Probe")
                    .atInfo()
                    .setMessage("x")
                    .addKeyValue(
                        "file",
                        "/c/a\u001b[2J\u001b]0;t\u0007\u009b1m\u202e\nts=forged level=ERROR.cache")
                    .log());
    assertThat(out.lines()).hasSize(1);
    assertThat(out)
        .contains("msg=\"x\" file=\"/c/a")
        .doesNotContain("\u001b", "\u0007", "\u009b", "\u202e");
  }

  /** An event with key-value pairs and an exception, as the exporter's code logs them. */
  private static void logFailure() {
    LoggerFactory.getLogger("io.vgpu.exporter.Probe")
        .atWarn()
        .setMessage("region write failed")
        .addKeyValue("file", "/c/u_main/a.cache")
        .addKeyValue("slot", 3)
        .addKeyValue("msg", "a pair named like a field")
        .setCause(new IllegalStateException("boom", new java.io.IOException("disk\nfull")))
        .log();
  }

  @Test
  void json_keyValuePairsAreFields_stackTraceIsOneField_oneLine() {
    LoggerContext ctx = (LoggerContext) LoggerFactory.getILoggerFactory();
    String out = capture(() -> LogSetup.configure(ctx, "info", "json"), LogSetupTest::logFailure);
    assertThat(out.lines()).hasSize(1);
    JsonNode line = JsonMapper.builder().build().readTree(out);
    assertThat(line.get("msg").asString()).isEqualTo("region write failed");
    assertThat(line.get("level").asString()).isEqualTo("WARN");
    assertThat(line.get("logger").asString()).isEqualTo("io.vgpu.exporter.Probe");
    assertThat(line.get("ts").asString()).matches("\\d{4}-\\d\\d-\\d\\dT.*Z");
    assertThat(line.get("file").asString()).isEqualTo("/c/u_main/a.cache");
    assertThat(line.get("slot").isNumber()).isTrue();
    assertThat(line.get("slot").asInt()).isEqualTo(3);
    assertThat(line.get("kv_msg").asString()).isEqualTo("a pair named like a field");
    assertThat(line.get("error").asString())
        .startsWith("java.lang.IllegalStateException: boom")
        .contains("\tat io.vgpu.exporter.cli.LogSetupTest.logFailure")
        .contains("Caused by: java.io.IOException: disk\nfull");
  }

  @Test
  void logfmt_keyValuePairsAreFields_stackTraceIsOneQuotedField_oneLine() {
    LoggerContext ctx = (LoggerContext) LoggerFactory.getILoggerFactory();
    String out = capture(() -> LogSetup.configure(ctx, "info", "logfmt"), LogSetupTest::logFailure);
    assertThat(out.lines()).hasSize(1);
    assertThat(out)
        .contains(
            " level=WARN logger=Probe msg=\"region write failed\" file=/c/u_main/a.cache slot=3"
                + " kv_msg=\"a pair named like a field\" error=\"java.lang.IllegalStateException:"
                + " boom\\n\\tat io.vgpu.exporter.cli.LogSetupTest.logFailure")
        .contains("Caused by: java.io.IOException: disk\\nfull")
        .endsWith("\"\n");
  }
}

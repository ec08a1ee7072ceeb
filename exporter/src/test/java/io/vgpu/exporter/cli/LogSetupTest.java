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
              LoggerFactory.getLogger("io.vgpu.exporter.Probe").debug("msg=\"hidden\"");
              LoggerFactory.getLogger("io.vgpu.exporter.Probe").info("msg=\"shown\" n=1");
              LoggerFactory.getLogger("org.eclipse.jetty.Server").info("msg=\"noisy\"");
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
            () -> LoggerFactory.getLogger("io.vgpu.exporter.Probe").debug("msg=\"now shown\""));
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
                    .info(
                        "msg=\"x\" file=\"{}\"",
                        "/c/a\u001b[2J\u001b]0;t\u0007\u009b1m\u202e\nts=forged level=ERROR.cache"));
    assertThat(out.lines()).hasSize(1);
    assertThat(out)
        .contains("msg=\"x\" file=\"/c/a")
        .doesNotContain("\u001b", "\u0007", "\u009b", "\u202e");
  }
}

package io.vgpu.exporter.k8s;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * The log under a steady API-server outage: one WARN naming the fix ({@code --kubernetes=false}),
 * then reports with exponential back-off, whatever fabric8's retry rate; no stack traces.
 */
class ApiServerOutageLogTest {

  @Test
  void problemLog_aSteadyFailureEveryTwoSeconds_logsAFewLinesAnHour() {
    AtomicLong now = new AtomicLong();
    var logger = (ch.qos.logback.classic.Logger) LoggerFactory.getLogger("outage-test");
    ListAppender<ILoggingEvent> events = new ListAppender<>();
    events.start();
    logger.addAppender(events);
    ProblemLog log = new ProblemLog(logger, "pod metadata unavailable", now::get);
    String problem = "API server unreachable for pods: ConnectException Connection refused";
    String fix = KubernetesMetadataSource.fixFor(problem);
    int perMinute = 30;
    int[] linesByHour = new int[4];
    for (int minute = 0; minute < 4 * 60; minute++) {
      int before = events.list.size();
      for (int i = 0; i < perMinute; i++) {
        log.problem("n1", problem, fix);
        now.addAndGet(Duration.ofSeconds(2).toNanos());
      }
      int lines = events.list.size() - before;
      assertThat(lines).as("minute %d", minute).isLessThanOrEqualTo(1);
      linesByHour[minute / 60] += lines;
    }
    // 0, 1, 3, 7, 15, 31 min in the first hour, then the back-off reaches its hour.
    assertThat(linesByHour[0]).isEqualTo(6);
    assertThat(linesByHour[1]).isBetween(1, 2);
    assertThat(linesByHour[2]).isEqualTo(1);
    assertThat(events.list.getFirst().getFormattedMessage()).contains("retrying with back-off");
    assertThat(events.list.getFirst().getKeyValuePairs().toString())
        .contains("--kubernetes=false")
        .doesNotContain("repeated");
    assertThat(events.list.get(1).getKeyValuePairs().toString()).contains("repeated=\"30\"");

    // Another problem is news; recovery is one INFO; the next outage starts with a fresh report.
    int before = events.list.size();
    log.problem("n1", "RBAC forbids list/watch pods (grant get/list/watch on pods)", "grant");
    log.recovered("n1");
    log.recovered("n1");
    log.problem("n1", problem, fix);
    assertThat(events.list.subList(before, events.list.size()))
        .extracting(ILoggingEvent::getLevel)
        .containsExactly(Level.WARN, Level.INFO, Level.WARN);
    logger.detachAppender(events);
  }

  @Test
  void informers_againstAClosedPort_logOneWarnWithTheFixAndNoStackTraces() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    LoggerContext ctx = (LoggerContext) LoggerFactory.getILoggerFactory();
    io.vgpu.exporter.cli.LogSetup.configure("info", "logfmt");
    ch.qos.logback.classic.Logger root = ctx.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
    ListAppender<ILoggingEvent> events = new ListAppender<>();
    events.setContext(ctx);
    events.start();
    root.addAppender(events);
    KubernetesClient client =
        new KubernetesClientBuilder()
            .withConfig(
                new ConfigBuilder()
                    .withMasterUrl("http://127.0.0.1:" + port)
                    .withConnectionTimeout(500)
                    .withRequestTimeout(500)
                    .withRequestRetryBackoffLimit(0)
                    .build())
            .build();
    Duration watched = Duration.ofSeconds(20);
    try (KubernetesMetadataSource source =
        new KubernetesMetadataSource(client, "n1", List.of(), Duration.ofMinutes(5))) {
      source.start();
      long end = System.nanoTime() + watched.toNanos();
      while (System.nanoTime() < end) {
        source.health();
        Thread.sleep(200);
      }
      assertThat(source.health().up()).isFalse();
    } finally {
      root.detachAppender(events);
    }
    List<ILoggingEvent> loud =
        events.list.stream().filter(e -> e.getLevel().isGreaterOrEqual(Level.WARN)).toList();
    long bytes =
        loud.stream()
            .mapToLong(
                e -> e.getFormattedMessage().length() + e.getKeyValuePairs().toString().length())
            .sum();
    System.out.printf(
        "outage log: %d WARN+ line(s), %d bytes in %d s%n",
        loud.size(), bytes, watched.toSeconds());
    assertThat(loud)
        .as("one report per informer (pods, node), then back-off: %s", loud)
        .hasSizeBetween(1, 2)
        .allSatisfy(
            e -> {
              assertThat(e.getLoggerName()).doesNotStartWith("io.fabric8");
              assertThat(e.getThrowableProxy()).isNull();
              assertThat(e.getKeyValuePairs().toString()).contains("--kubernetes=false");
            });
  }
}

package io.vgpu.exporter.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.Samples;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The network defences are visible on {@code /metrics}: connections closed by the per-client limit
 * and by the TLS handshake timeout ({@code vgpu_exporter_http_connections_rejected_total{reason}})
 * and requests answered 429 by the saturated password hashing ({@code
 * vgpu_exporter_http_auth_throttled_total}). Before, the limits worked unseen: a flood showed only
 * in the attacker's failures.
 */
class NetworkDefenceMetricsTest {
  private static final String PASSWORD = "correct horse battery staple";

  @TempDir Path dir;

  @Test
  @Timeout(value = 120, unit = TimeUnit.SECONDS)
  void perClientLimit_handshakeTimeout_saturatedHashing_eachCounted() throws Exception {
    Path root = Files.createDirectories(dir.resolve("containers"));
    LiveExporter.writeHealthy(root);
    Path web = NetworkFloodTest.selfSignedWebConfig(dir);
    String hash =
        new String(
            at.favre.lib.crypto.bcrypt.BCrypt.withDefaults().hash(12, PASSWORD.toCharArray()),
            StandardCharsets.UTF_8);
    Files.writeString(
        web, "basic_auth_users:\n  prometheus: " + hash + "\n", StandardOpenOption.APPEND);
    SSLContext tls = NetworkFloodTest.tls(dir);
    try (LiveExporter ex =
        LiveExporter.start(
            root,
            Map.of(
                "web.config.file", web.toString(),
                "web.max-connections-per-client", "2",
                "web.tls-handshake-timeout", "1s"))) {
      int port = ex.app.port();
      Samples before = scrape(port, tls);
      assertThat(rejected(before, "per_client_limit")).isZero();
      assertThat(rejected(before, "handshake_timeout")).isZero();
      assertThat(before.value("vgpu_exporter_http_auth_throttled_total")).isZero();

      // Four connections from one client that send one byte of a ClientHello: two are over the
      // limit, the other two never finish their handshake.
      List<Socket> held = new ArrayList<>();
      try {
        for (int i = 0; i < 4; i++) {
          Socket s = new Socket();
          held.add(s);
          s.bind(new InetSocketAddress(InetAddress.ofLiteral("127.0.0.2"), 0));
          s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 2000);
          s.getOutputStream().write(0x16);
        }
        Await.until(
            Duration.ofSeconds(20),
            () -> {
              Samples s = scrape(port, tls);
              return rejected(s, "per_client_limit") >= 2 && rejected(s, "handshake_timeout") >= 2;
            });
      } finally {
        for (Socket s : held) {
          s.close();
        }
      }

      // Eight clients check wrong passwords at once against a cost-12 hash: one hashes, two wait,
      // the rest are answered 429 unchecked.
      List<Thread> guessers = new ArrayList<>();
      List<Integer> statuses = java.util.Collections.synchronizedList(new ArrayList<>());
      for (int i = 0; i < 8; i++) {
        InetAddress from = InetAddress.ofLiteral("127.0.0." + (10 + i));
        guessers.add(
            Thread.ofPlatform()
                .start(
                    () -> {
                      for (int k = 0; k < 4; k++) {
                        try {
                          statuses.add(
                              NetworkFloodTest.get(
                                  from,
                                  port,
                                  "/metrics",
                                  tls,
                                  NetworkFloodTest.basic("mallory", "guess" + k)));
                        } catch (IOException e) {
                          statuses.add(-1);
                        }
                      }
                    }));
      }
      for (Thread t : guessers) {
        t.join(60_000);
      }
      long answered429 = statuses.stream().filter(s -> s == 429).count();
      assertThat(answered429).as("429s among %s", statuses).isPositive();
      assertThat(scrape(port, tls).value("vgpu_exporter_http_auth_throttled_total"))
          .isEqualTo((double) answered429);
    }
  }

  private static double rejected(Samples s, String reason) {
    return s.value("vgpu_exporter_http_connections_rejected_total", "reason", reason);
  }

  private static Samples scrape(int port, SSLContext tls) throws IOException {
    String r =
        NetworkFloodTest.exchange(
            InetAddress.getLoopbackAddress(),
            port,
            "/metrics",
            tls,
            NetworkFloodTest.basic("prometheus", PASSWORD));
    assertThat(r).startsWith("HTTP/1.1 200");
    return Samples.parse(r.substring(r.indexOf("\r\n\r\n") + 4));
  }
}

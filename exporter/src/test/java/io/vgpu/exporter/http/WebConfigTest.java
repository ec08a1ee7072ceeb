package io.vgpu.exporter.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import at.favre.lib.crypto.bcrypt.BCrypt;
import io.vgpu.exporter.ExporterApp;
import io.vgpu.exporter.config.ConfigException;
import io.vgpu.exporter.config.Flags;
import io.vgpu.exporter.config.StatusPages;
import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.TestNode;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * --web.config.file over real HTTPS: certificates made by openssl, a bcrypt user, Java's HTTP
 * client and a real Prometheus scraping with basic auth and the CA; client certificates required
 * and checked against the client CA; the status views served to nobody or only to loopback clients.
 */
class WebConfigTest {
  @TempDir static Path pki;
  @TempDir Path tmp;

  private static final String PASSWORD = "correct horse battery staple";

  @BeforeAll
  static void makeCertificates() throws Exception {
    openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=test-ca");
    for (String who : List.of("server", "client")) {
      openssl(
          "req",
          "-newkey",
          "ec",
          "-pkeyopt",
          "ec_paramgen_curve:P-256",
          "-nodes",
          "-keyout",
          who + ".key",
          "-out",
          who + ".csr",
          "-subj",
          "/CN=" + who);
      Files.writeString(
          pki.resolve(who + ".ext"),
          who.equals("server")
              ? "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
              : "extendedKeyUsage=clientAuth\n");
      openssl(
          "x509",
          "-req",
          "-in",
          who + ".csr",
          "-CA",
          "ca.pem",
          "-CAkey",
          "ca.key",
          "-CAcreateserial",
          "-out",
          who + ".pem",
          "-days",
          "2",
          "-extfile",
          who + ".ext");
    }
    // A client certificate no configured CA signed.
    openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "rogue.key",
        "-out",
        "rogue.pem",
        "-days",
        "2",
        "-subj",
        "/CN=rogue");
    for (String who : List.of("client", "rogue")) {
      openssl(
          "pkcs12",
          "-export",
          "-in",
          who + ".pem",
          "-inkey",
          who + ".key",
          "-out",
          who + ".p12",
          "-passout",
          "pass:pw");
    }
  }

  private static void openssl(String... args) throws Exception {
    List<String> cmd = new java.util.ArrayList<>(List.of("openssl"));
    cmd.addAll(List.of(args));
    Process p =
        new ProcessBuilder(cmd)
            .directory(pki.toFile())
            .redirectErrorStream(true)
            .redirectOutput(pki.resolve("openssl.log").toFile())
            .start();
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue())
        .as("openssl %s: %s", cmd, Files.readString(pki.resolve("openssl.log")))
        .isZero();
  }

  private Path webConfig(String clientAuth) throws IOException {
    String hash =
        new String(BCrypt.withDefaults().hash(6, PASSWORD.toCharArray()), StandardCharsets.UTF_8);
    Path f = pki.resolve("web-" + clientAuth + ".yml");
    Files.writeString(
        f,
        """
        tls_server_config:
          cert_file: server.pem
          key_file: server.key
          client_ca_file: ca.pem
          client_auth_type: %s
        basic_auth_users:
          prometheus: %s
        """
            .formatted(clientAuth, hash));
    return f;
  }

  private ExporterApp start(Path root, TestNode node, Path webConfig, String statusPages) {
    return ExporterApp.builder(
            HttpServerTest.config(root)
                .with(Flags.PROCFS, node.writeProcfs())
                .with(Flags.WEB_CONFIG_FILE, java.util.Optional.ofNullable(webConfig))
                .with(Flags.WEB_STATUS_PAGES, StatusPages.parse(statusPages)))
        .metadata(node.metadata)
        .regionsOnly()
        .build()
        .start();
  }

  private static SSLContext tls(String clientP12) throws Exception {
    KeyStore trust = KeyStore.getInstance("PKCS12");
    trust.load(null, null);
    try (InputStream in = Files.newInputStream(pki.resolve("ca.pem"))) {
      trust.setCertificateEntry(
          "ca", CertificateFactory.getInstance("X.509").generateCertificate(in));
    }
    TrustManagerFactory tmf =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(trust);
    KeyManagerFactory kmf = null;
    if (clientP12 != null) {
      KeyStore ks = KeyStore.getInstance("PKCS12");
      try (InputStream in = Files.newInputStream(pki.resolve(clientP12))) {
        ks.load(in, "pw".toCharArray());
      }
      kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      kmf.init(ks, "pw".toCharArray());
    }
    SSLContext ctx = SSLContext.getInstance("TLS");
    ctx.init(kmf == null ? null : kmf.getKeyManagers(), tmf.getTrustManagers(), null);
    return ctx;
  }

  private static HttpResponse<String> get(HttpClient http, URI uri, String user, String password)
      throws Exception {
    HttpRequest.Builder b = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(20));
    if (user != null) {
      b.header(
          "Authorization",
          "Basic "
              + Base64.getEncoder()
                  .encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8)));
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void httpsWithBasicAuth_rightPasswordScrapes_wrongOrNone401_probesAnswerWithoutCredentials()
      throws Exception {
    Path root = Files.createDirectories(tmp.resolve("containers"));
    try (TestNode node = new TestNode(root);
        ExporterApp app = start(root, node, webConfig("VerifyClientCertIfGiven"), "all");
        HttpClient http = HttpClient.newBuilder().sslContext(tls(null)).build()) {
      Await.until(Duration.ofSeconds(10), () -> app.discovery().current().generation() > 0);
      String base = "https://127.0.0.1:" + app.port();
      HttpResponse<String> ok = get(http, URI.create(base + "/metrics"), "prometheus", PASSWORD);
      assertThat(ok.statusCode()).isEqualTo(200);
      assertThat(ok.body()).contains("vgpu_container_memory_used_bytes{");
      // Remembered after the first check: the same credentials again.
      assertThat(get(http, URI.create(base + "/metrics"), "prometheus", PASSWORD).statusCode())
          .isEqualTo(200);
      for (String[] creds :
          new String[][] {{"prometheus", "wrong"}, {"nobody", PASSWORD}, {null, null}}) {
        HttpResponse<String> denied = get(http, URI.create(base + "/metrics"), creds[0], creds[1]);
        assertThat(denied.statusCode()).as("credentials %s", (Object) creds).isEqualTo(401);
        assertThat(denied.headers().firstValue("WWW-Authenticate"))
            .hasValueSatisfying(v -> assertThat(v).startsWith("Basic "));
        assertThat(denied.body()).doesNotContain("vgpu_");
      }
      assertThat(get(http, URI.create(base + "/"), null, null).statusCode()).isEqualTo(401);
      assertThat(get(http, URI.create(base + "/api/v1/containers"), null, null).statusCode())
          .isEqualTo(401);
      assertThat(get(http, URI.create(base + "/healthz"), null, null).statusCode()).isEqualTo(200);
      HttpResponse<String> ready = get(http, URI.create(base + "/readyz"), null, null);
      assertThat(ready.statusCode()).isIn(200, 503);
      assertThat(ready.body().lines().count()).as("no reasons without credentials").isEqualTo(1);
      // No plain HTTP on the TLS port.
      try (HttpClient plain = HttpClient.newHttpClient()) {
        boolean plainServed;
        try {
          plainServed =
              get(
                          plain,
                          URI.create("http://127.0.0.1:" + app.port() + "/metrics"),
                          "prometheus",
                          PASSWORD)
                      .statusCode()
                  == 200;
        } catch (IOException e) {
          plainServed = false;
        }
        assertThat(plainServed).as("plain HTTP served on the TLS port").isFalse();
      }
    }
  }

  @Test
  void requireAndVerifyClientCert_onlyACertificateOfTheClientCaGetsIn() throws Exception {
    Path root = Files.createDirectories(tmp.resolve("containers"));
    try (TestNode node = new TestNode(root);
        ExporterApp app = start(root, node, webConfig("RequireAndVerifyClientCert"), "all")) {
      URI metrics = URI.create("https://127.0.0.1:" + app.port() + "/metrics");
      try (HttpClient withCert = HttpClient.newBuilder().sslContext(tls("client.p12")).build()) {
        assertThat(get(withCert, metrics, "prometheus", PASSWORD).statusCode()).isEqualTo(200);
        assertThat(get(withCert, metrics, "prometheus", "wrong").statusCode()).isEqualTo(401);
      }
      for (String p12 : new String[] {null, "rogue.p12"}) {
        try (HttpClient other = HttpClient.newBuilder().sslContext(tls(p12)).build()) {
          assertThatThrownBy(() -> get(other, metrics, "prometheus", PASSWORD))
              .as("client certificate %s", p12)
              .isInstanceOf(IOException.class);
        }
      }
    }
  }

  @Test
  void prometheus_scrapesOverHttpsWithBasicAuth() throws Exception {
    assertThat(PrometheusScrapeTest.hasPrometheus())
        .as("prometheus installed (make deps)")
        .isTrue();
    Path root = Files.createDirectories(tmp.resolve("containers"));
    try (TestNode node = new TestNode(root);
        ExporterApp app = start(root, node, webConfig("VerifyClientCertIfGiven"), "off")) {
      int promPort = PrometheusScrapeTest.freePort();
      Path config = tmp.resolve("prometheus.yml");
      Files.writeString(
          config,
          """
          global:
            scrape_interval: 1s
          scrape_configs:
            - job_name: vgpu
              scheme: https
              tls_config:
                ca_file: %s
              basic_auth:
                username: prometheus
                password: %s
              static_configs:
                - targets: ['127.0.0.1:%d']
          """
              .formatted(pki.resolve("ca.pem"), PASSWORD, app.port()));
      Process prom =
          new ProcessBuilder(
                  "prometheus",
                  "--config.file=" + config,
                  "--storage.tsdb.path=" + tmp.resolve("data"),
                  "--web.listen-address=127.0.0.1:" + promPort)
              .redirectErrorStream(true)
              .redirectOutput(tmp.resolve("prometheus.log").toFile())
              .start();
      try (HttpClient http = HttpClient.newHttpClient()) {
        String q =
            "vgpu_container_memory_used_bytes{namespace=\"ml\",pod=\"train-0\",device_index=\"0\"}";
        URI uri =
            URI.create(
                "http://127.0.0.1:"
                    + promPort
                    + "/api/v1/query?query="
                    + URLEncoder.encode(q, StandardCharsets.UTF_8));
        Await.until(
            Duration.ofSeconds(60),
            () -> get(http, uri, null, null).body().contains("\"value\":["));
        assertThat(get(http, uri, null, null).body()).contains("\"1073741824\"");
      } finally {
        prom.destroy();
        if (!prom.waitFor(10, TimeUnit.SECONDS)) {
          prom.destroyForcibly();
        }
      }
    }
  }

  @Test
  void statusPages_offIs404_loopbackServesLoopbackClients() throws Exception {
    Path root = Files.createDirectories(tmp.resolve("containers"));
    try (TestNode node = new TestNode(root);
        HttpClient http = HttpClient.newHttpClient()) {
      try (ExporterApp app = start(root, node, null, "off")) {
        String base = "http://127.0.0.1:" + app.port();
        assertThat(get(http, URI.create(base + "/"), null, null).statusCode()).isEqualTo(404);
        assertThat(get(http, URI.create(base + "/api/v1/containers"), null, null).statusCode())
            .isEqualTo(404);
        assertThat(get(http, URI.create(base + "/metrics"), null, null).statusCode())
            .isEqualTo(200);
      }
      try (ExporterApp app = start(root, node, null, "loopback")) {
        String base = "http://127.0.0.1:" + app.port();
        assertThat(get(http, URI.create(base + "/"), null, null).statusCode()).isEqualTo(200);
        assertThat(get(http, URI.create(base + "/api/v1/containers"), null, null).statusCode())
            .isEqualTo(200);
      }
    }
    assertThat(HttpServer.isLoopback("127.0.0.1")).isTrue();
    assertThat(HttpServer.isLoopback("::1")).isTrue();
    assertThat(HttpServer.isLoopback("0:0:0:0:0:0:0:1")).isTrue();
    assertThat(HttpServer.isLoopback("10.0.0.7")).isFalse();
    assertThat(HttpServer.isLoopback("::ffff:10.0.0.7")).isFalse();
    assertThat(HttpServer.isLoopback("localhost")).as("names are not resolved").isFalse();
    assertThat(HttpServer.isLoopback("")).isFalse();
  }

  @Test
  void load_refusesWhatItWouldIgnoreOrCannotUse() throws Exception {
    Path f = tmp.resolve("web.yml");
    Files.writeString(
        f, "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_allowed_sans: [x]\n");
    assertThatThrownBy(() -> WebConfig.load(f))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("client_allowed_sans");
    Files.writeString(f, "basic_auth_users:\n  alice: plaintext\n");
    assertThatThrownBy(() -> WebConfig.load(f)).hasMessageContaining("not a bcrypt hash");
    Files.writeString(f, "http_server_config:\n  http2: false\n");
    assertThatThrownBy(() -> WebConfig.load(f)).hasMessageContaining("http_server_config");
    Files.writeString(
        f,
        "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n");
    assertThatThrownBy(() -> WebConfig.load(f)).hasMessageContaining("needs client_ca_file");
    Files.writeString(f, "");
    assertThat(WebConfig.load(f)).isEqualTo(WebConfig.none());
    Files.writeString(f, "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n");
    WebConfig c = WebConfig.load(f);
    assertThat(c.tls())
        .hasValueSatisfying(
            t -> {
              assertThat(t.certFile()).isEqualTo(tmp.resolve("c.pem"));
              assertThat(t.clientAuth()).isEqualTo(WebConfig.ClientAuth.NO_CLIENT_CERT);
              assertThat(t.minVersion()).isEqualTo("TLSv1.2");
            });
  }
}

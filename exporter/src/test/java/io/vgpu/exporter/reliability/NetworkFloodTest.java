package io.vgpu.exporter.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Network floods that need no credentials, against {@code serve} in a child JVM at the launcher's
 * heap ({@link ForkedServe}): an attacker on its own address (127.0.0.2, as a pod has its own IP)
 * opens hundreds of connections that cost the server memory and never finish, while a legitimate
 * scraper on 127.0.0.1 keeps opening fresh connections. Before the connection limits and handshake
 * timeout ({@code HttpServer}, {@code ConnectionGuard}) each flood exhausted the 48 MiB heap and
 * {@code -XX:+ExitOnOutOfMemoryError} ended the process (a crash loop for as long as the attacker
 * wanted); now the exporter lives and every legitimate probe answers.
 */
class NetworkFloodTest {
  static final InetAddress ATTACKER = address("127.0.0.2");
  static final Duration OPEN_BUDGET = Duration.ofSeconds(90);
  static final Duration HOLD = Duration.ofSeconds(12);

  @TempDir Path dir;

  /**
   * ~700 plain-HTTP connections, each with 16 KiB of pipelined {@code GET /healthz} whose responses
   * are never read (the attacker's receive buffer is 4 KiB): the server's writes block and every
   * connection holds its request, response and buffers.
   */
  @Test
  void pipelinedHealthzNeverRead_launcherHeap_exporterLivesAndScrapesAnswer() throws Exception {
    byte[] one = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII);
    byte[] payload = new byte[one.length * (16 * 1024 / one.length)];
    for (int off = 0; off < payload.length; off += one.length) {
      System.arraycopy(one, 0, payload, off, one.length);
    }
    try (ForkedServe s = ForkedServe.start(dir, List.of())) {
      FloodResult r = flood(s, 700, payload, null);
      report("pipelined /healthz", r);
      assertSurvived(s, r);
    }
  }

  /**
   * ~1 350 TLS connections that each send the first byte of a ClientHello and stop: every one held
   * an SSLEngine and its buffers for as long as the attacker kept it open.
   */
  @Test
  void oneByteClientHello_tls_launcherHeap_exporterLivesAndScrapesAnswer() throws Exception {
    Path web = selfSignedWebConfig(dir);
    try (ForkedServe s = ForkedServe.start(dir, List.of("--web.config.file=" + web))) {
      FloodResult r = flood(s, 1350, new byte[] {0x16}, tls(dir));
      report("one-byte ClientHello", r);
      assertSurvived(s, r);
    }
  }

  /**
   * 48 attackers (16 on each of 127.0.0.2-4, within the per-client connection limit) send wrong
   * passwords as fast as they are answered while a Prometheus that authenticated before scrapes
   * /metrics every 250 ms with a 10 s timeout (its default). Before, every check waited for one
   * lock around bcrypt: the attackers held the server's 16 threads and legitimate scrapes timed out
   * behind them. Now a remembered credential needs no hash and the checks beyond the hashing's
   * small waiting room are answered 429 at once.
   */
  @Test
  void wrongPasswordFlood_legitimateScrapesAnswer() throws Exception {
    String password = "correct horse battery staple";
    String hash =
        new String(
            at.favre.lib.crypto.bcrypt.BCrypt.withDefaults().hash(10, password.toCharArray()),
            StandardCharsets.UTF_8);
    Path web = dir.resolve("web.yml");
    Files.writeString(web, "basic_auth_users:\n  prometheus: " + hash + "\n");
    String good = basic("prometheus", password);
    InetAddress scraper = InetAddress.getLoopbackAddress();
    try (ForkedServe s = ForkedServe.start(dir, List.of("--web.config.file=" + web))) {
      assertThat(get(scraper, s.port, "/metrics", null, good)).isEqualTo(200);
      assertThat(get(scraper, s.port, "/metrics", null, basic("prometheus", "nope")))
          .isEqualTo(401);
      java.util.concurrent.atomic.AtomicBoolean stop =
          new java.util.concurrent.atomic.AtomicBoolean();
      java.util.concurrent.ConcurrentHashMap<String, java.util.concurrent.atomic.LongAdder>
          answers = new java.util.concurrent.ConcurrentHashMap<>();
      List<Thread> attackers = new ArrayList<>();
      for (int i = 0; i < 48; i++) {
        InetAddress from = address("127.0.0." + (2 + i / 16));
        String user = i % 2 == 0 ? "prometheus" : "mallory" + i;
        attackers.add(
            Thread.ofPlatform()
                .start(
                    () -> {
                      for (int k = 0; !stop.get() && k < 100_000; k++) {
                        String key;
                        try {
                          key = "" + get(from, s.port, "/metrics", null, basic(user, "guess" + k));
                        } catch (IOException e) {
                          key = e.getClass().getSimpleName();
                        }
                        answers
                            .computeIfAbsent(key, x -> new java.util.concurrent.atomic.LongAdder())
                            .increment();
                      }
                    }));
      }
      List<String> failures = new ArrayList<>();
      int probes = 0;
      long end = System.nanoTime() + Duration.ofSeconds(20).toNanos();
      try {
        TimeUnit.SECONDS.sleep(2); // the flood under way
        while (System.nanoTime() < end && s.alive()) {
          probes++;
          try {
            int status = get(scraper, s.port, "/metrics", null, good);
            if (status != 200) {
              failures.add("/metrics " + status);
            }
          } catch (IOException e) {
            failures.add("/metrics " + e);
          }
          TimeUnit.MILLISECONDS.sleep(250);
        }
      } finally {
        stop.set(true);
        for (Thread t : attackers) {
          t.join(30_000);
        }
      }
      System.out.printf(
          "wrong-password flood: legitimate /metrics probes %d, failed %d (%.1f %%); attacker"
              + " answers %s; failures %s%n",
          probes,
          failures.size(),
          100.0 * failures.size() / Math.max(1, probes),
          answers,
          failures);
      assertThat(s.alive()).as("exporter alive; log: %s", s.logText()).isTrue();
      assertThat(s.logText()).doesNotContain("OutOfMemoryError");
      assertThat(failures).as("legitimate scrapes that failed during the flood").isEmpty();
      assertThat(answers.keySet()).as("the attackers were never let in").doesNotContain("200");
    }
  }

  static String basic(String user, String password) {
    return "Basic "
        + java.util.Base64.getEncoder()
            .encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8));
  }

  record FloodResult(
      int opened,
      int refused,
      int stillOpen,
      int probes,
      int probesFailed,
      List<String> failures) {}

  private static void report(String what, FloodResult r) {
    System.out.printf(
        "network flood (%s): %d attacker connections opened (%d refused), %d still open at the"
            + " end; legitimate probes %d, failed %d %s%n",
        what, r.opened, r.refused, r.stillOpen, r.probes, r.probesFailed, r.failures);
  }

  private static void assertSurvived(ForkedServe s, FloodResult r) {
    assertThat(s.alive()).as("exporter alive after the flood; log: %s", s.logText()).isTrue();
    assertThat(s.logText()).doesNotContain("OutOfMemoryError");
    assertThat(r.probesFailed)
        .as("legitimate probes that failed during the flood: %s", r.failures)
        .isZero();
    // The server closed all but --web.max-connections-per-client (16) of the attacker's.
    assertThat(r.stillOpen).as("attacker connections the server kept open").isLessThanOrEqualTo(16);
  }

  /**
   * Opens up to {@code n} attacker connections (bounded by {@link #OPEN_BUDGET}), writes {@code
   * payload} on each without ever reading, probes legitimately every 50 connections, then holds
   * them all for {@link #HOLD} while probing every second.
   */
  private static FloodResult flood(ForkedServe s, int n, byte[] payload, SSLContext tls)
      throws Exception {
    InetSocketAddress target = new InetSocketAddress(InetAddress.getLoopbackAddress(), s.port);
    List<SocketChannel> held = new ArrayList<>();
    List<String> failures = new ArrayList<>();
    int refused = 0;
    int probes = 0;
    long deadline = System.nanoTime() + OPEN_BUDGET.toNanos();
    try {
      for (int i = 0; i < n && System.nanoTime() < deadline && s.alive(); i++) {
        try {
          SocketChannel ch = SocketChannel.open();
          held.add(ch);
          ch.setOption(StandardSocketOptions.SO_RCVBUF, 4096);
          ch.bind(new InetSocketAddress(ATTACKER, 0));
          ch.socket().connect(target, 2000);
          ch.configureBlocking(false);
          ch.write(ByteBuffer.wrap(payload));
        } catch (IOException e) {
          refused++;
        }
        if (i % 50 == 49) {
          probes += probe(s, tls, failures);
        }
      }
      long holdEnd = System.nanoTime() + HOLD.toNanos();
      while (System.nanoTime() < holdEnd && s.alive()) {
        for (SocketChannel ch : held) {
          try {
            ch.write(ByteBuffer.wrap(payload)); // more pipelined bytes, where the server reads
          } catch (IOException e) {
            // closed by the server
          }
        }
        probes += probe(s, tls, failures);
        TimeUnit.SECONDS.sleep(1);
      }
      if (!s.alive()) {
        failures.add("the exporter died");
      }
      int stillOpen = 0;
      ByteBuffer sink = ByteBuffer.allocate(64 * 1024);
      for (SocketChannel ch : held) {
        try {
          int got;
          do {
            got = ch.read(sink.clear()); // the responses the attacker never read; EOF if closed
          } while (got > 0);
          if (got == 0) {
            stillOpen++;
          }
        } catch (IOException e) {
          // reset by the server, or never connected
        }
      }
      return new FloodResult(
          held.size() - refused, refused, stillOpen, probes, failures.size(), failures);
    } finally {
      for (SocketChannel ch : held) {
        try {
          ch.close();
        } catch (IOException e) {
          // already closed
        }
      }
    }
  }

  /** One /healthz and one /metrics on fresh connections from 127.0.0.1; returns 2. */
  private static int probe(ForkedServe s, SSLContext tls, List<String> failures) {
    for (String path : List.of("/healthz", "/metrics")) {
      try {
        int status = get(s.port, path, tls);
        if (status != 200) {
          failures.add(path + " " + status);
        }
      } catch (IOException e) {
        failures.add(path + " " + e);
      }
    }
    return 2;
  }

  /** A GET with {@code Connection: close} on a fresh socket: the status code (10 s timeout). */
  static int get(int port, String path, SSLContext tls) throws IOException {
    return get(InetAddress.getLoopbackAddress(), port, path, tls, null);
  }

  /** The same from {@code from}, with an {@code Authorization} header when one is given. */
  static int get(InetAddress from, int port, String path, SSLContext tls, String authorization)
      throws IOException {
    String head = exchange(from, port, path, tls, authorization);
    return Integer.parseInt(head.substring(9, 12));
  }

  /** The whole response (status line, headers, body) of that GET. */
  static String exchange(
      InetAddress from, int port, String path, SSLContext tls, String authorization)
      throws IOException {
    Socket plain = new Socket();
    plain.bind(new InetSocketAddress(from, 0));
    plain.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 10_000);
    plain.setSoTimeout(10_000);
    try (Socket sock =
        tls == null ? plain : tls.getSocketFactory().createSocket(plain, "127.0.0.1", port, true)) {
      if (sock instanceof SSLSocket ssl) {
        ssl.startHandshake();
      }
      OutputStream out = sock.getOutputStream();
      out.write(
          ("GET "
                  + path
                  + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                  + (authorization == null ? "" : "Authorization: " + authorization + "\r\n")
                  + "\r\n")
              .getBytes(StandardCharsets.US_ASCII));
      out.flush();
      InputStream in = sock.getInputStream();
      String response = new String(in.readAllBytes(), StandardCharsets.UTF_8);
      if (!response.startsWith("HTTP/1.1 ")) {
        throw new IOException(
            "no status line: " + response.substring(0, Math.min(response.length(), 16)));
      }
      return response;
    }
  }

  /** A self-signed certificate for 127.0.0.1 and a web config serving TLS with it. */
  static Path selfSignedWebConfig(Path dir) throws Exception {
    Process p =
        new ProcessBuilder(
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.pem",
                "-days",
                "2",
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1")
            .directory(dir.toFile())
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("openssl.log").toFile())
            .start();
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as(Files.readString(dir.resolve("openssl.log"))).isZero();
    Path web = dir.resolve("web.yml");
    Files.writeString(web, "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n");
    return web;
  }

  /** A client context trusting only the self-signed certificate. */
  static SSLContext tls(Path dir) throws Exception {
    KeyStore trust = KeyStore.getInstance("PKCS12");
    trust.load(null, null);
    try (InputStream in = Files.newInputStream(dir.resolve("server.pem"))) {
      trust.setCertificateEntry(
          "server", CertificateFactory.getInstance("X.509").generateCertificate(in));
    }
    TrustManagerFactory tmf =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(trust);
    SSLContext ctx = SSLContext.getInstance("TLS");
    ctx.init(null, tmf.getTrustManagers(), null);
    return ctx;
  }

  private static InetAddress address(String literal) {
    return InetAddress.ofLiteral(literal);
  }
}

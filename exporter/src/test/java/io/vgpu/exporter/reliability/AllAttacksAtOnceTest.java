package io.vgpu.exporter.reliability;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.testing.StallingFuse;
import io.vgpu.exporter.testing.TestRegions;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocket;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 31's "done when" stress run: every exporter-side attack at once against one {@code serve}
 * at the launcher's heap ({@code -Xmx48m}, {@code -XX:+ExitOnOutOfMemoryError}) with TLS and basic
 * auth on, while a legitimate Prometheus scrapes {@code /metrics} every 250 ms: a side-file flood
 * and a cache-file flood past the 8-file cap, hard-linked and copied 1024-slot x 16-device regions,
 * pods whose {@code maps} spend the pass's and the pod's read budgets, a pod process whose root is
 * a frozen FUSE filesystem (its {@code /etc/ld.so.preload} reads never return), a region rewriting
 * its device uuids, hundreds of one-byte TLS ClientHellos, TLS connections of pipelined requests
 * whose answers are never read, and a wrong-password flood. Every {@code /metrics} answers 200 with
 * the neighbour on it, the process never exits, no OutOfMemoryError, the churning region adds at
 * most {@code 1 + 4} identities. The attacks alone: TenantFileAttacksTest, MapsBudgetAttackTest,
 * StalledTenantReadCliTest, DeviceIdentitiesTest, NetworkFloodTest.
 */
class AllAttacksAtOnceTest {
  private static final String CHURN_UID = "abababab-0000-4000-8000-000000000031";
  private static final String FROZEN_UID = "fafafafa-0000-4000-8000-000000000031";
  private static final String PASSWORD = "correct horse battery staple";
  private static final Duration ATTACK = Duration.ofSeconds(25);
  private static final Pattern CHURN_SERIES =
      Pattern.compile("\\{[^}]*pod_uid=\"" + CHURN_UID + "\"[^}]*}");
  private static final Pattern DEVICE_UUID = Pattern.compile("device_uuid=\"([^\"]*)\"");

  @TempDir Path tmp;

  @Test
  @Timeout(value = 240, unit = TimeUnit.SECONDS)
  void everyAttackAtOnce_launcherHeap_everyScrapeAnswersAndNoOom() throws Exception {
    long t0 = System.nanoTime();
    Path root = Files.createDirectories(tmp.resolve("containers"));
    Path proc = Files.createDirectories(tmp.resolve("proc"));
    LiveExporter.writeHealthy(root);
    LiveExporter.neighbourProcesses(proc, root);
    TenantFileAttacksTest.sideFileFlood(root, 20_000);
    TenantFileAttacksTest.cacheFileFlood(root, 2_000);
    TenantFileAttacksTest.slotBombs(root, true);
    TenantFileAttacksTest.slotBombs(root, false);
    mapsFlood(root, proc);
    Path churning = churnRegion(root, new Random(31));
    Path web = NetworkFloodTest.selfSignedWebConfig(tmp);
    String hash =
        new String(
            at.favre.lib.crypto.bcrypt.BCrypt.withDefaults().hash(10, PASSWORD.toCharArray()),
            StandardCharsets.UTF_8);
    Files.writeString(web, "basic_auth_users:\n  prometheus: " + hash + "\n", APPEND);
    SSLContext tls = NetworkFloodTest.tls(tmp);
    String good = NetworkFloodTest.basic("prometheus", PASSWORD);
    System.out.printf("all attacks: fixtures in %d ms%n", (System.nanoTime() - t0) / 1_000_000);

    try (StallingFuse fuse = StallingFuse.start(tmp.resolve("frozen"));
        LauncherHeapServe serve =
            LauncherHeapServe.start(
                root,
                tmp,
                "--path.procfs=" + proc,
                "--web.config.file=" + web,
                "--discovery.rescan-interval=1s",
                "--web.status-max-age=2s")) {
      frozenPodProcess(root, proc, fuse);
      awaitAnswer(serve, tls, good);
      AtomicBoolean stop = new AtomicBoolean();
      AtomicLong attackerAnswers = new AtomicLong();
      List<Thread> attackers = new ArrayList<>();
      attackers.add(daemon("uuid-churn", () -> churn(churning, stop)));
      attackers.add(daemon("client-hello", () -> clientHellos(serve.port, 600, stop)));
      attackers.add(daemon("pipelined", () -> pipelinedUnread(serve.port, tls, 40, stop)));
      for (int i = 0; i < 16; i++) {
        String user = i % 2 == 0 ? "prometheus" : "mallory" + i;
        attackers.add(
            daemon(
                "wrong-password-" + i,
                () -> {
                  InetAddress from = InetAddress.ofLiteral("127.0.0.4");
                  for (int k = 0; !stop.get(); k++) {
                    try {
                      int s =
                          NetworkFloodTest.get(
                              from,
                              serve.port,
                              "/metrics",
                              tls,
                              NetworkFloodTest.basic(user, "guess" + k));
                      assertThat(s).as("an attacker let in").isNotEqualTo(200);
                      attackerAnswers.incrementAndGet();
                    } catch (IOException e) {
                      // refused or closed by the limits
                    }
                  }
                }));
      }

      List<String> failures = new ArrayList<>();
      Set<String> churnIdentities = new HashSet<>();
      int scrapes = 0;
      long slowest = 0;
      long slowestView = 0;
      String lastMetrics = "";
      int pagesAnswered = 0;
      int pagesLate = 0;
      boolean neighbour = false;
      try {
        long end = System.nanoTime() + ATTACK.toNanos();
        while (System.nanoTime() < end) {
          long s0 = System.nanoTime();
          try {
            String r =
                NetworkFloodTest.exchange(
                    InetAddress.getLoopbackAddress(), serve.port, "/metrics", tls, good);
            if (!r.startsWith("HTTP/1.1 200")) {
              failures.add("/metrics " + r.substring(0, 12));
            }
            neighbour |= r.contains(LiveExporter.HEALTHY_UID);
            lastMetrics = r;
            Matcher m = CHURN_SERIES.matcher(r);
            while (m.find()) {
              Matcher u = DEVICE_UUID.matcher(m.group());
              if (m.group().contains("device_index=\"0\"") && u.find()) {
                churnIdentities.add(u.group(1));
              }
            }
          } catch (IOException e) {
            failures.add("/metrics " + e);
          }
          scrapes++;
          slowest = Math.max(slowest, (System.nanoTime() - s0) / 1_000_000);
          for (String view : scrapes % 4 == 1 ? new String[] {"/readyz", "/"} : new String[] {}) {
            try {
              long v0 = System.nanoTime();
              int s =
                  NetworkFloodTest.get(
                      InetAddress.getLoopbackAddress(), serve.port, view, tls, good);
              slowestView = Math.max(slowestView, (System.nanoTime() - v0) / 1_000_000);
              if (s != 200 && s != 503) {
                failures.add(view + " " + s);
              } else if (view.equals("/")) {
                pagesAnswered++;
              }
            } catch (IOException e) {
              if (view.equals("/")) {
                // The page waits up to 5 s for a running pass, then computes its model: on a
                // loaded machine it may pass the client's 10 s. Counted, not a failure; /metrics
                // and /readyz are.
                pagesLate++;
              } else {
                failures.add(view + " " + e);
              }
            }
          }
          TimeUnit.MILLISECONDS.sleep(250);
        }
      } finally {
        stop.set(true);
        for (Thread t : attackers) {
          t.join(20_000);
        }
      }
      System.out.printf(
          "all attacks at once (launcher heap, TLS + basic auth): %d /metrics in %d s, failed %d"
              + " %s, slowest %d ms (/readyz and / every 4th round: slowest %d ms); attacker"
              + " answers %d; churning region's device-0 identities %s; frozen reads %d; total"
              + " %d s%n",
          scrapes,
          ATTACK.toSeconds(),
          failures.size(),
          failures,
          slowest,
          slowestView,
          attackerAnswers.get(),
          churnIdentities,
          fuse.stalledReads(),
          (System.nanoTime() - t0) / 1_000_000_000);
      assertThat(serve.process.isAlive()).as("alive; output:\n%s", serve.output()).isTrue();
      assertThat(serve.output()).doesNotContain("OutOfMemoryError");
      assertThat(failures)
          .as("legitimate requests that failed; log:\n%s", serve.output())
          .isEmpty();
      assertThat(neighbour).as("the neighbour exported").isTrue();
      System.out.printf("all attacks: / answered %d, late %d%n", pagesAnswered, pagesLate);
      assertThat(pagesAnswered).as("/ answered at least once").isPositive();
      // Device 0's identity: the first uuid, then at most 4 changes (DeviceIdentities) while NVML
      // is down, however often the tenant rewrites it.
      assertThat(churnIdentities.size())
          .as(
              "device 0 identities of the churning region; its lines: %s",
              lastMetrics.lines().filter(l -> l.contains(CHURN_UID)).toList())
          .isBetween(1, 5);
      assertThat(fuse.stalledReads()).as("the frozen root was read (and stalled)").isPositive();
      // The defences at work are on /metrics.
      String r =
          NetworkFloodTest.exchange(
              InetAddress.getLoopbackAddress(), serve.port, "/metrics", tls, good);
      io.vgpu.exporter.testing.Samples s =
          io.vgpu.exporter.testing.Samples.parse(r.substring(r.indexOf("\r\n\r\n") + 4));
      String rejected = "vgpu_exporter_http_connections_rejected_total";
      System.out.printf(
          "all attacks: connections rejected per_client_limit %.0f, handshake_timeout %.0f; auth"
              + " throttled %.0f; tenant reads given up %.0f%n",
          s.value(rejected, "reason", "per_client_limit"),
          s.value(rejected, "reason", "handshake_timeout"),
          s.value("vgpu_exporter_http_auth_throttled_total"),
          s.value("vgpu_exporter_tenant_reads_given_up_total"));
      assertThat(s.value(rejected, "reason", "per_client_limit")).isPositive();
      // Not asserted: handshake_timeout. At the total connection limit the idle timeout (2 s) may
      // close the held ClientHellos before their 10 s handshake deadline (NetworkDefenceMetricsTest
      // counts each reason alone).
      assertThat(s.value("vgpu_exporter_tenant_reads_given_up_total")).isPositive();
    }
  }

  private static final java.nio.file.OpenOption APPEND = java.nio.file.StandardOpenOption.APPEND;

  private static Thread daemon(String name, Runnable r) {
    return Thread.ofPlatform().daemon().name(name).start(r);
  }

  private static void awaitAnswer(LauncherHeapServe serve, SSLContext tls, String auth)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
    while (System.nanoTime() < deadline && serve.process.isAlive()) {
      try {
        if (NetworkFloodTest.get(
                InetAddress.getLoopbackAddress(), serve.port, "/metrics", tls, auth)
            == 200) {
          return;
        }
      } catch (IOException e) {
        // not listening yet
      }
      TimeUnit.MILLISECONDS.sleep(200);
    }
    throw new AssertionError("serve never answered; output:\n" + serve.output());
  }

  /**
   * Four pods of five processes, each with ~3.5 MB of maps (within one process's 4 MiB bound): each
   * pod passes its 16 MiB budget and together they pass the pass's 64 MiB.
   */
  private static void mapsFlood(Path root, Path proc) throws IOException {
    String line =
        "7f3000000000-7f3000001000 r-xp 00000000 08:01 4242                 /usr/lib/libpad.so.1\n";
    String maps = line.repeat(3_500_000 / line.length());
    for (int pod = 0; pod < 4; pod++) {
      String uid = "9090909%d-0000-4000-8000-000000000031".formatted(pod);
      TestRegions.write(
          root, uid, "budget", "a.cache", TestRegions.spec(1, 1024, 0, new int[] {7}, 10, 1, true));
      for (int p = 0; p < 5; p++) {
        int hostPid = 20_000 + pod * 10 + p;
        LiveExporter.writePodProcess(proc, hostPid, 7 + p, uid);
        Files.writeString(proc.resolve(hostPid + "/maps"), maps);
      }
    }
  }

  /** A pod process (slot pid 4001, host pid 5001) whose root is the frozen FUSE filesystem. */
  private static void frozenPodProcess(Path root, Path proc, StallingFuse fuse) throws IOException {
    Path region =
        TestRegions.write(
            root,
            FROZEN_UID,
            "frozen",
            "a.cache",
            TestRegions.spec(1, 1024, 0, new int[] {4001}, 10, 1, true));
    LiveExporter.writePodProcess(proc, 5001, 4001, FROZEN_UID);
    long inode = ((Number) Files.getAttribute(region, "unix:ino")).longValue();
    Files.writeString(
        proc.resolve("5001/maps"),
        "7f2000000000-7f2002000000 r-xp 00000000 08:01 777 /usr/lib/libcuda.so.580.159.04\n"
            + "7f0000000000-7f00001ea000 rw-s 00000000 00:2a "
            + inode
            + " "
            + region
            + "\n");
    Files.createDirectories(proc.resolve("5001"));
    fuse.becomeRootOf(proc.resolve("5001"));
  }

  private static Path churnRegion(Path root, Random random) throws IOException {
    return TestRegions.write(root, CHURN_UID, "churn", "a.cache", churnSpec(random));
  }

  private static io.vgpu.regioncodec.RegionSpec churnSpec(Random random) {
    io.vgpu.regioncodec.RegionSpec.Builder b =
        io.vgpu.regioncodec.RegionSpec.builder(io.vgpu.regioncodec.Layout.V1_2);
    for (int d = 0; d < 16; d++) {
      b.device(
          "GPU-%08x-%04x-4%03x-8%03x-%012x"
              .formatted(
                  random.nextInt(),
                  random.nextInt(1 << 16),
                  random.nextInt(1 << 12),
                  random.nextInt(1 << 12),
                  random.nextLong() & 0xffffffffffffL),
          1L << 30,
          0);
    }
    b.slot(7, 1007, 1, new io.vgpu.regioncodec.DeviceUsage(0, 1 << 20, 1 << 20, 0, 2 << 20, 0, 0));
    return b.build();
  }

  /**
   * Rewrites the region's 16 uuids (valid GPU syntax, fresh each time) in place every 200 ms, as a
   * tenant writes its mapped region.
   */
  private static void churn(Path region, AtomicBoolean stop) {
    Random random = new Random(32);
    while (!stop.get()) {
      try (java.nio.channels.FileChannel ch =
          java.nio.channels.FileChannel.open(region, java.nio.file.StandardOpenOption.WRITE)) {
        ch.write(ByteBuffer.wrap(io.vgpu.regioncodec.RegionWriter.encode(churnSpec(random))), 0);
      } catch (IOException e) {
        // the next round writes again
      }
      try {
        TimeUnit.MILLISECONDS.sleep(200);
      } catch (InterruptedException e) {
        return;
      }
    }
  }

  /** Holds up to {@code n} connections from 127.0.0.2 that sent one byte of a ClientHello. */
  private static void clientHellos(int port, int n, AtomicBoolean stop) {
    InetSocketAddress target = new InetSocketAddress(InetAddress.getLoopbackAddress(), port);
    SocketChannel[] held = new SocketChannel[n];
    ByteBuffer sink = ByteBuffer.allocate(1024);
    try {
      while (!stop.get()) {
        for (int i = 0; i < n && !stop.get(); i++) {
          try {
            if (held[i] != null && held[i].read(sink.clear()) >= 0) {
              continue; // still open
            }
          } catch (IOException e) {
            // reset: open another
          }
          close(held[i]);
          held[i] = null;
          try {
            SocketChannel ch = SocketChannel.open();
            held[i] = ch;
            ch.bind(new InetSocketAddress(InetAddress.ofLiteral("127.0.0.2"), 0));
            ch.socket().connect(target, 2000);
            ch.configureBlocking(false);
            ch.write(ByteBuffer.wrap(new byte[] {0x16}));
          } catch (IOException e) {
            // refused: the limits at work
          }
        }
        TimeUnit.MILLISECONDS.sleep(200);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      for (SocketChannel ch : held) {
        close(ch);
      }
    }
  }

  /**
   * Holds up to {@code n} TLS connections from 127.0.0.3, each with 16 KiB of pipelined {@code GET
   * /healthz} whose answers are never read (a 4 KiB receive buffer).
   */
  private static void pipelinedUnread(int port, SSLContext tls, int n, AtomicBoolean stop) {
    byte[] one = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII);
    byte[] payload = new byte[one.length * (16 * 1024 / one.length)];
    for (int off = 0; off < payload.length; off += one.length) {
      System.arraycopy(one, 0, payload, off, one.length);
    }
    List<Socket> held = new ArrayList<>();
    try {
      while (!stop.get()) {
        held.removeIf(Socket::isClosed);
        while (held.size() < n && !stop.get()) {
          Socket plain = new Socket();
          held.add(plain);
          try {
            plain.setReceiveBufferSize(4096);
            plain.bind(new InetSocketAddress(InetAddress.ofLiteral("127.0.0.3"), 0));
            plain.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 2000);
            plain.setSoTimeout(2000);
            SSLSocket ssl =
                (SSLSocket) tls.getSocketFactory().createSocket(plain, "127.0.0.1", port, true);
            held.set(held.size() - 1, ssl);
            ssl.startHandshake();
            Thread.ofVirtual().start(() -> writeQuietly(ssl, payload));
          } catch (IOException e) {
            close(held.removeLast());
          }
        }
        TimeUnit.MILLISECONDS.sleep(500);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      held.forEach(AllAttacksAtOnceTest::close);
    }
  }

  private static void writeQuietly(Socket s, byte[] payload) {
    try {
      OutputStream out = s.getOutputStream();
      out.write(payload); // blocks once the server stops reading: never read back
      out.flush();
    } catch (IOException e) {
      close(s); // closed by the server
    }
  }

  private static void close(java.io.Closeable c) {
    if (c == null) {
      return;
    }
    try {
      c.close();
    } catch (IOException e) {
      // already closed
    }
  }
}

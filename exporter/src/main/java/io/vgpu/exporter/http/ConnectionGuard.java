package io.vgpu.exporter.http;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.eclipse.jetty.io.Connection;
import org.eclipse.jetty.io.ssl.SslConnection;
import org.eclipse.jetty.io.ssl.SslHandshakeListener;
import org.eclipse.jetty.server.NetworkConnectionLimit;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.thread.Scheduler;

/**
 * What a connection may cost before it has proven anything, so that anyone who can reach the port
 * (no credentials needed) cannot exhaust the heap or the threads with connections that never
 * finish: every open connection holds an SSLEngine or a request/response pair and their buffers
 * (tens of KB), and at the launcher's {@code -Xmx48m} ~700 pipelined-but-never-read connections or
 * ~1 350 one-byte ClientHellos used to end the process.
 *
 * <ul>
 *   <li>At most {@link NetworkLimits#maxConnections()} connections in all: at the limit the server
 *       stops accepting (new ones wait in the kernel's backlog) and the idle timeout of the open
 *       ones drops to {@link #IDLE_TIMEOUT_AT_LIMIT}, so idle and stalled connections make room
 *       fast.
 *   <li>At most {@link NetworkLimits#maxPerClient()} per client address: more are closed as soon as
 *       they open, so one pod cannot take the whole budget from the scrapers on other addresses
 *       (the pod's own 127.0.0.1 and ::1 excepted, see {@link #OWN_LOOPBACK}).
 *   <li>A TLS handshake not finished within {@link NetworkLimits#handshakeTimeout()} is closed,
 *       however slowly its bytes keep coming (the idle timeout alone restarts with every byte).
 *   <li>A connection with no progress (read or write) for {@link NetworkLimits#idleTimeout()} is
 *       closed: this is what frees a connection whose responses are never read.
 * </ul>
 */
final class ConnectionGuard implements Connection.Listener {
  /** The idle timeout of open connections while the connection limit is reached. */
  static final Duration IDLE_TIMEOUT_AT_LIMIT = Duration.ofSeconds(2);

  private final NetworkLimits limits;
  private final ServerConnector connector;
  private final Map<InetAddress, Integer> perClient = new HashMap<>();
  private final Map<Connection, Object> counted = new ConcurrentHashMap<>();
  private final AtomicLong rejectedPerClient = new AtomicLong();
  private final AtomicLong handshakeTimeouts = new AtomicLong();

  private final io.vgpu.exporter.metrics.CollectorStats stats;

  private ConnectionGuard(
      NetworkLimits limits,
      ServerConnector connector,
      io.vgpu.exporter.metrics.CollectorStats stats) {
    this.limits = Objects.requireNonNull(limits, "limits");
    this.connector = connector;
    this.stats = Objects.requireNonNull(stats, "stats");
  }

  /** Puts the limits on {@code connector} (before the server starts) and returns its guard. */
  static ConnectionGuard install(
      Server server,
      ServerConnector connector,
      NetworkLimits limits,
      io.vgpu.exporter.metrics.CollectorStats stats) {
    connector.setIdleTimeout(limits.idleTimeout().toMillis());
    ConnectionGuard guard = new ConnectionGuard(limits, connector, stats);
    connector.addBean(guard);
    NetworkConnectionLimit total = new NetworkConnectionLimit(limits.maxConnections(), connector);
    total.setEndPointIdleTimeout(IDLE_TIMEOUT_AT_LIMIT.toMillis());
    server.addBean(total);
    return guard;
  }

  /** Connections closed because their client address had too many open. */
  long rejectedPerClient() {
    return rejectedPerClient.get();
  }

  /** TLS connections closed because their handshake did not finish in time. */
  long handshakeTimeouts() {
    return handshakeTimeouts.get();
  }

  @Override
  public void onOpened(Connection connection) {
    // Over TLS the HTTP connection runs on the TLS connection's decrypted end point: the network
    // connection is counted (and timed) once, as the TLS connection.
    if (connection.getEndPoint() instanceof SslConnection.SslEndPoint) {
      return;
    }
    InetAddress client = clientOf(connection.getEndPoint().getRemoteSocketAddress());
    int open;
    synchronized (perClient) {
      open = perClient.merge(client, 1, Integer::sum);
    }
    counted.put(connection, client);
    if (open > limits.maxPerClient() && !OWN_LOOPBACK.contains(client)) {
      rejectedPerClient.incrementAndGet();
      stats.connectionRejected(
          io.vgpu.exporter.metrics.CollectorStats.ConnectionRejection.PER_CLIENT_LIMIT);
      connection.getEndPoint().close();
      return;
    }
    if (connection instanceof SslConnection ssl) {
      handshakeDeadline(ssl);
    }
  }

  @Override
  public void onClosed(Connection connection) {
    Object client = counted.remove(connection);
    if (client instanceof InetAddress a) {
      release(a);
    }
  }

  private void release(InetAddress client) {
    synchronized (perClient) {
      perClient.computeIfPresent(client, (k, n) -> n <= 1 ? null : n - 1);
    }
  }

  private void handshakeDeadline(SslConnection ssl) {
    AtomicBoolean done = new AtomicBoolean();
    ssl.addHandshakeListener(
        new SslHandshakeListener() {
          @Override
          public void handshakeSucceeded(Event event) {
            done.set(true);
          }

          @Override
          public void handshakeFailed(Event event, Throwable failure) {
            done.set(true);
          }
        });
    Scheduler scheduler = connector.getScheduler();
    Scheduler.Task task =
        scheduler.schedule(
            () -> {
              if (!done.get() && ssl.getEndPoint().isOpen()) {
                handshakeTimeouts.incrementAndGet();
                stats.connectionRejected(
                    io.vgpu.exporter.metrics.CollectorStats.ConnectionRejection.HANDSHAKE_TIMEOUT);
                ssl.getEndPoint().close();
              }
            },
            limits.handshakeTimeout().toMillis(),
            TimeUnit.MILLISECONDS);
    // The task must not keep a closed connection reachable until it fires.
    ssl.addEventListener(
        new Connection.Listener() {
          @Override
          public void onClosed(Connection c) {
            task.cancel();
          }
        });
  }

  /** The client's address; one shared key when the end point does not say (never expected). */
  private static InetAddress clientOf(SocketAddress remote) {
    if (remote instanceof InetSocketAddress isa && isa.getAddress() != null) {
      return isa.getAddress();
    }
    return UNKNOWN_CLIENT;
  }

  private static final InetAddress UNKNOWN_CLIENT = InetAddress.ofLiteral("0.0.0.0");

  /**
   * Not held to the per-client limit: the pod's own loopback, which only the pod's containers,
   * {@code kubectl exec} and {@code kubectl port-forward} reach (the exporter runs without
   * hostNetwork), where load tests and several viewers legitimately share one address. Other 127/8
   * addresses are held to it like any client. The total limit applies to everyone.
   */
  private static final java.util.Set<InetAddress> OWN_LOOPBACK =
      java.util.Set.of(InetAddress.ofLiteral("127.0.0.1"), InetAddress.ofLiteral("::1"));
}

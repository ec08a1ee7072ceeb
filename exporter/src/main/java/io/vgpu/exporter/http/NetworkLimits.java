package io.vgpu.exporter.http;

import java.time.Duration;
import java.util.Objects;

/**
 * What connections to the HTTP(S) listener may cost before they prove anything ({@link
 * ConnectionGuard}): {@code --web.max-connections}, {@code --web.max-connections-per-client},
 * {@code --web.idle-timeout} and {@code --web.tls-handshake-timeout}.
 *
 * @param maxConnections open connections in all; at the limit new ones wait in the backlog
 * @param maxPerClient open connections per client address; more are closed as they open
 * @param idleTimeout a connection without progress (read or write) this long is closed
 * @param handshakeTimeout a TLS handshake not finished this long after the connection opened is
 *     closed
 */
public record NetworkLimits(
    int maxConnections, int maxPerClient, Duration idleTimeout, Duration handshakeTimeout) {
  public NetworkLimits {
    Objects.requireNonNull(idleTimeout, "idleTimeout");
    Objects.requireNonNull(handshakeTimeout, "handshakeTimeout");
    if (maxConnections < 1 || maxPerClient < 1) {
      throw new IllegalArgumentException("connection limits must be at least 1");
    }
    if (!idleTimeout.isPositive() || !handshakeTimeout.isPositive()) {
      throw new IllegalArgumentException("timeouts must be positive");
    }
  }
}

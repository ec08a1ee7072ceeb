package io.vgpu.exporter.k8s;

import java.time.Instant;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * HAMi's node annotations, decoded.
 *
 * @param known whether the Node object was seen at all
 * @param handshake when {@code hami.io/node-handshake} was last written; empty when absent or
 *     undecodable
 * @param handshakeRaw the raw annotation (for /api and doctor), empty when absent
 * @param registeredDevices devices in {@code hami.io/node-nvidia-register}; empty when undecodable
 * @param mutexLocked whether {@code hami.io/mutex.lock} is present
 */
public record NodeMeta(
    boolean known,
    Optional<Instant> handshake,
    Optional<String> handshakeRaw,
    OptionalInt registeredDevices,
    boolean mutexLocked) {
  public NodeMeta {
    Objects.requireNonNull(handshake, "handshake");
    Objects.requireNonNull(handshakeRaw, "handshakeRaw");
    Objects.requireNonNull(registeredDevices, "registeredDevices");
  }

  public static NodeMeta unknown() {
    return new NodeMeta(false, Optional.empty(), Optional.empty(), OptionalInt.empty(), false);
  }
}

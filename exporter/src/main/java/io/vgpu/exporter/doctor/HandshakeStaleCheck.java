package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * 14: HAMi's node handshake annotation is missing, undecodable or older than the scheduler accepts.
 */
final class HandshakeStaleCheck implements DoctorCheck {
  @Override
  public int number() {
    return 14;
  }

  @Override
  public String id() {
    return "handshake-stale";
  }

  @Override
  public String title() {
    return "node handshake annotation fresh";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    Optional<List<Finding>> unreadable = Checks.nodeUnreadable(this, e);
    if (unreadable.isPresent()) {
      return unreadable.get();
    }
    var meta = e.node().orElseThrow();
    String fix =
        "Check the device plugin on this node: it rewrites hami.io/node-handshake every 30 s; look for \"patch node error\" (RBAC, NODE_NAME), a crash loop, or clock skew between node and scheduler.";
    if (meta.handshakeRaw().isEmpty()) {
      return List.of(
          finding(
              Severity.FAIL,
              Checks.NODE,
              "hami.io/node-handshake is missing: the scheduler will not place vGPU pods here",
              List.of(),
              fix));
    }
    String raw = "hami.io/node-handshake=" + meta.handshakeRaw().get();
    if (meta.handshake().isEmpty()) {
      return List.of(
          finding(
              Severity.FAIL,
              Checks.NODE,
              "hami.io/node-handshake cannot be decoded",
              List.of(raw),
              fix));
    }
    Duration age = Duration.between(meta.handshake().get(), e.now());
    List<String> ev =
        List.of(
            raw,
            "age "
                + age.toSeconds()
                + " s (limit "
                + e.thresholds().handshakeMaxAge().toSeconds()
                + " s)");
    if (age.compareTo(e.thresholds().handshakeMaxAge()) > 0) {
      return List.of(
          finding(
              Severity.FAIL,
              Checks.NODE,
              "handshake is stale: the scheduler distrusts this node's devices",
              ev,
              fix));
    }
    return List.of(ok(Checks.NODE, "handshake fresh", ev));
  }
}

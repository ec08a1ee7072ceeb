package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.*;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.node.NodeState;
import java.time.Duration;
import java.util.List;

/**
 * HAMi's node annotations as metrics, so scheduler/device-plugin failures show on a dashboard.
 * Emitted only once the Node object has been seen. Example:
 *
 * <pre>
 * vgpu_node_handshake_age_seconds{node="gpu-1"} 12.0
 * vgpu_node_registered_devices{node="gpu-1"} 8.0
 * vgpu_node_mutex_locked{node="gpu-1"} 0.0
 * </pre>
 */
public final class NodeCollector extends VgpuCollector {
  private static final FamilySpec.Gauge NODE_HANDSHAKE_AGE =
      FamilySpec.gauge(
          MetricNames.NODE_HANDSHAKE_AGE,
          "Seconds since the device plugin last wrote hami.io/node-handshake (the scheduler distrusts the node past ~300 s).",
          L_NODE);
  private static final FamilySpec.Gauge NODE_REGISTERED_DEVICES =
      FamilySpec.gauge(
          MetricNames.NODE_REGISTERED_DEVICES,
          "GPUs registered in hami.io/node-nvidia-register (0 when absent: the device plugin did not register).",
          L_NODE);
  private static final FamilySpec.Gauge NODE_MUTEX_LOCKED =
      FamilySpec.gauge(
          MetricNames.NODE_MUTEX_LOCKED,
          "1 while hami.io/mutex.lock is present (the scheduler is allocating on this node, or a stuck lock).",
          L_NODE);

  private static final List<FamilySpec> FAMILIES =
      List.of(NODE_HANDSHAKE_AGE, NODE_REGISTERED_DEVICES, NODE_MUTEX_LOCKED);

  public NodeCollector() {
    super(FAMILIES);
  }

  @Override
  protected void collect(NodeState state, Sink out) {
    NodeMeta m = state.nodeMeta();
    if (!m.known()) {
      return;
    }
    Labels l = labels.node(state.node());
    var age = families.gauge(NODE_HANDSHAKE_AGE);
    m.handshake()
        .ifPresent(
            t -> age.add(Math.max(0, Duration.between(t, state.at()).toMillis() / 1000.0), l));
    var reg = families.gauge(NODE_REGISTERED_DEVICES);
    m.registeredDevices().ifPresent(n -> reg.add(n, l));
    var mutex = families.gauge(NODE_MUTEX_LOCKED);
    mutex.add(m.mutexLocked() ? 1 : 0, l);
    RegionUsageCollector.addIf(out, NODE_HANDSHAKE_AGE, age.build());
    RegionUsageCollector.addIf(out, NODE_REGISTERED_DEVICES, reg.build());
    RegionUsageCollector.addIf(out, NODE_MUTEX_LOCKED, mutex.build());
  }
}

package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.*;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.DeadlineReads;
import io.vgpu.exporter.node.EvidenceCollector;
import io.vgpu.exporter.node.EvidencePass;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.node.NodeState;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * What the background evidence pass could not judge, and the GPU processes it found unlimited.
 * Example:
 *
 * <pre>
 * vgpu_exporter_evidence_pass_age_seconds{node="gpu-1"} 4.2
 * vgpu_exporter_evidence_pass_stalled{node="gpu-1"} 0
 * vgpu_exporter_evidence_unseen_processes{node="gpu-1",reason="pod_budget"} 12
 * vgpu_exporter_evidence_pods_not_fully_seen{node="gpu-1"} 1
 * vgpu_exporter_tenant_reads_given_up_total{node="gpu-1"} 0
 * vgpu_container_unslotted_processes{container="main",...,reason="not_registered"} 1
 * </pre>
 *
 * Reads the latest pass only (no I/O in a scrape).
 */
public final class EvidenceHealthCollector extends VgpuCollector {
  private static final FamilySpec.Gauge EVIDENCE_PASS_AGE =
      FamilySpec.gauge(
          MetricNames.EVIDENCE_PASS_AGE,
          "Seconds since the latest evidence pass (slot liveness, status page) finished.",
          L_NODE);
  private static final FamilySpec.Gauge EVIDENCE_PASS_STALLED =
      FamilySpec.gauge(
          MetricNames.EVIDENCE_PASS_STALLED,
          "1 while the evidence pass loop is stuck in a pass or failing (readiness is then false).",
          L_NODE);
  private static final FamilySpec.Gauge EVIDENCE_UNSEEN_PROCESSES =
      FamilySpec.gauge(
          MetricNames.EVIDENCE_UNSEEN_PROCESSES,
          "Pod processes the latest evidence pass did not see whole, by reason (pass_budget, pod_budget, maps_too_large, unreadable, deadline): their pods' slots stay UNKNOWN, never GONE.",
          L_NODE,
          "reason");
  private static final FamilySpec.Gauge EVIDENCE_PODS_NOT_FULLY_SEEN =
      FamilySpec.gauge(
          MetricNames.EVIDENCE_PODS_NOT_FULLY_SEEN,
          "Pods with a process the latest evidence pass did not see whole.",
          L_NODE);
  private static final FamilySpec.Counter TENANT_READS_GIVEN_UP =
      FamilySpec.counter(
          MetricNames.TENANT_READS_GIVEN_UP,
          "Reads of tenant files (maps, environ, ld.so.preload) given up at their deadline or because earlier reads are still blocked.",
          L_NODE);
  private static final FamilySpec.Gauge CONTAINER_UNSLOTTED_PROCESSES =
      FamilySpec.gauge(
          MetricNames.CONTAINER_UNSLOTTED_PROCESSES,
          "GPU processes of a pod whose regions set limits that hold no slot in any of them (no limit applies), by reason (library_not_loaded, not_registered).",
          L_NODE,
          L_NAMESPACE,
          L_POD,
          L_CONTAINER,
          L_POD_UID,
          "reason");

  private static final List<FamilySpec> FAMILIES =
      List.of(
          EVIDENCE_PASS_AGE,
          EVIDENCE_PASS_STALLED,
          EVIDENCE_UNSEEN_PROCESSES,
          EVIDENCE_PODS_NOT_FULLY_SEEN,
          TENANT_READS_GIVEN_UP,
          CONTAINER_UNSLOTTED_PROCESSES);

  private static final String[] UNSLOTTED_NAMES = {
    L_CONTAINER, L_NAMESPACE, L_NODE, L_POD, L_POD_UID, "reason"
  };

  private final EvidencePass pass;
  private final DeadlineReads reads;

  public EvidenceHealthCollector(EvidencePass pass, DeadlineReads reads) {
    super(FAMILIES);
    this.pass = pass;
    this.reads = reads;
  }

  @Override
  protected void collect(NodeState state, Sink out) {
    String node = state.node();
    Labels nodeLabels = labels.node(node);
    Optional<EvidencePass.Pass> latest = pass.latest();
    latest.ifPresent(
        p -> {
          double age = Duration.between(p.evidence().now(), state.at()).toMillis() / 1000.0;
          out.add(families.gauge(EVIDENCE_PASS_AGE).add(Math.max(0, age), nodeLabels).build());
        });
    out.add(
        families
            .gauge(EVIDENCE_PASS_STALLED)
            .add(pass.loopHealth().problem().isPresent() ? 1 : 0, nodeLabels)
            .build());
    Map<String, Integer> unseen = latest.map(p -> p.evidence().unseenProcesses()).orElse(Map.of());
    var byReason = families.gauge(EVIDENCE_UNSEEN_PROCESSES);
    for (String reason : EvidenceCollector.shortfallReasons()) {
      byReason.add(unseen.getOrDefault(reason, 0), labels.nodeWith(node, "reason", reason));
    }
    out.add(byReason.build());
    out.add(
        families
            .gauge(EVIDENCE_PODS_NOT_FULLY_SEEN)
            .add(latest.map(p -> p.evidence().podsNotFullySeen().size()).orElse(0), nodeLabels)
            .build());
    out.add(
        families.counter(TENANT_READS_GIVEN_UP).add((double) reads.givenUp(), nodeLabels).build());
    if (latest.isEmpty()) {
      return;
    }
    Map<List<String>, Integer> counts =
        new TreeMap<>(java.util.Comparator.comparing(Object::toString));
    for (NodeEvidence.Unslotted u : latest.get().evidence().unslottedProcesses()) {
      Optional<ContainerState> c =
          state.containers().stream()
              .filter(s -> s.key().podUid().equals(u.podUid()))
              .filter(
                  s ->
                      u.container().isEmpty()
                          || s.key().containerName().equals(u.container().get()))
              .findFirst();
      List<String> values =
          List.of(
              u.container().orElse(""),
              c.map(ContainerState::namespace).orElse(""),
              node,
              c.map(ContainerState::podName).orElse(""),
              u.podUid(),
              u.reason());
      counts.merge(values, 1, Integer::sum);
    }
    var unslotted = families.gauge(CONTAINER_UNSLOTTED_PROCESSES);
    counts.forEach(
        (values, n) -> unslotted.add(n, labels.of(UNSLOTTED_NAMES, values.toArray(new String[0]))));
    out.add(unslotted.build());
  }
}

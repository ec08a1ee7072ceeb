package io.vgpu.exporter.metrics;

import static io.vgpu.exporter.metrics.MetricNames.CONTAINER_FINDINGS;
import static io.vgpu.exporter.metrics.MetricNames.CONTAINER_VERDICT;
import static io.vgpu.exporter.metrics.MetricNames.NODE_FINDINGS;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.discovery.ContainerKey;
import io.vgpu.exporter.doctor.Checks;
import io.vgpu.exporter.doctor.Doctor;
import io.vgpu.exporter.doctor.DoctorReport;
import io.vgpu.exporter.doctor.Finding;
import io.vgpu.exporter.doctor.Judgment;
import io.vgpu.exporter.doctor.Severity;
import io.vgpu.exporter.node.ContainerState;
import io.vgpu.exporter.node.EvidencePass;
import io.vgpu.exporter.node.NodeState;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.function.Supplier;

/**
 * The one judgment as metrics: each container's doctor verdict and its WARN/FAIL findings by check,
 * and the node's own findings, from the same background evidence pass the status page and {@code
 * /api/v1/containers} judge, so every problem the page shows has a series (and an alert on it). The
 * doctor runs once per pass, on the first scrape after it. Example:
 *
 * <pre>
 * vgpu_container_verdict{container="jupyter",namespace="research",node="n1",pod="notebook-alice",pod_uid="..."} 2.0
 * vgpu_container_findings{check="hostpid-wrong",container="jupyter",level="fail",...} 1.0
 * vgpu_node_findings{check="handshake-stale",level="fail",node="n1"} 1.0
 * </pre>
 */
public final class JudgmentCollector extends VgpuCollector {
  private static final String L_CHECK = "check";
  private static final String L_LEVEL = "level";
  private static final String[] C = {
    MetricNames.L_NODE,
    MetricNames.L_NAMESPACE,
    MetricNames.L_POD,
    MetricNames.L_CONTAINER,
    MetricNames.L_POD_UID
  };
  private static final String[] CF = {
    MetricNames.L_NODE,
    MetricNames.L_NAMESPACE,
    MetricNames.L_POD,
    MetricNames.L_CONTAINER,
    MetricNames.L_POD_UID,
    L_CHECK,
    L_LEVEL
  };

  /** The verdict of a container the latest pass has not judged yet (new since, or no pass yet). */
  public static final double NOT_JUDGED = -1;

  private static final FamilySpec.Gauge CONTAINER_VERDICT =
      FamilySpec.gauge(
          MetricNames.CONTAINER_VERDICT,
          "The doctor's verdict about the container, as the status page shows it: 0 OK, 1 WARN,"
              + " 2 FAIL, -1 not judged yet (UNKNOWN)",
          C);
  private static final FamilySpec.Gauge CONTAINER_FINDINGS =
      FamilySpec.gauge(
          MetricNames.CONTAINER_FINDINGS,
          "WARN and FAIL findings of the doctor about the container or its pod, by check and"
              + " level (warn, fail); absent when none",
          CF);
  private static final FamilySpec.Gauge NODE_FINDINGS =
      FamilySpec.gauge(
          MetricNames.NODE_FINDINGS,
          "WARN and FAIL findings of the doctor about the node itself (handshake,"
              + " registration, NVML), by check and level; absent when none",
          MetricNames.L_NODE,
          L_CHECK,
          L_LEVEL);

  private static final List<FamilySpec> FAMILIES =
      List.of(CONTAINER_VERDICT, CONTAINER_FINDINGS, NODE_FINDINGS);

  /** One pass, judged. */
  record Judged(
      EvidencePass.Pass pass,
      Map<ContainerKey, Judgment.Container> containers,
      List<Finding> node) {}

  private final Supplier<Optional<EvidencePass.Pass>> passes;
  private final Doctor doctor = Doctor.standard();
  // The doctor runs off the scrape path, once per pass (thousands of containers take it seconds);
  // a scrape serves the latest finished judgment and never waits for one.
  private final java.util.concurrent.ExecutorService judge =
      java.util.concurrent.Executors.newSingleThreadExecutor(
          r -> Thread.ofPlatform().daemon().name("judgment").unstarted(r));
  private final java.util.concurrent.atomic.AtomicReference<EvidencePass.Pass> queued =
      new java.util.concurrent.atomic.AtomicReference<>();
  private volatile Judged last;

  /**
   * @param passes the latest evidence pass (the one the status page judges)
   */
  public JudgmentCollector(Supplier<Optional<EvidencePass.Pass>> passes) {
    super(FAMILIES);
    this.passes = passes;
  }

  /** The latest finished judgment; starts judging a newer pass in the background. */
  @SuppressWarnings("ReferenceEquality") // a pass is judged once: "this very pass"
  private Optional<Judged> judged() {
    Optional<EvidencePass.Pass> p = passes.get();
    Judged l = last;
    if (p.isPresent() && (l == null || l.pass() != p.get())) {
      EvidencePass.Pass pass = p.get();
      if (queued.getAndSet(pass) != pass) {
        judge.execute(() -> last = judge(pass));
      }
      if (l == null) {
        // The very first judgment: wait for it a little, so a fresh exporter is not all UNKNOWN.
        try {
          for (int i = 0; i < 50 && last == null; i++) {
            Thread.sleep(10);
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        l = last;
      }
    }
    return Optional.ofNullable(l);
  }

  /** Judges one pass now (on the judgment thread; tests may call it directly). */
  Judged judge(EvidencePass.Pass pass) {
    DoctorReport report = doctor.run(pass.evidence());
    List<Finding> node =
        report.findings().stream()
            .filter(f -> f.subject().equals(Checks.NODE))
            .filter(JudgmentCollector::problem)
            .toList();
    return new Judged(pass, Judgment.containers(pass.evidence(), report.findings()), node);
  }

  private static boolean problem(Finding f) {
    return f.severity() == Severity.WARN || f.severity() == Severity.FAIL;
  }

  @Override
  protected void collect(NodeState state, Sink out) {
    Optional<Judged> j = judged();
    String node = state.node();
    var verdict = families.gauge(CONTAINER_VERDICT);
    var findings = families.gauge(CONTAINER_FINDINGS);
    for (ContainerState c : state.containers()) {
      Judgment.Container judged = j.map(x -> x.containers().get(c.key())).orElse(null);
      Labels cl = labels.container(node, c);
      if (judged == null) {
        verdict.add(NOT_JUDGED, cl);
        continue;
      }
      verdict.add(judged.verdict().exitCode(), cl);
      for (Map.Entry<String, Integer> e : countByCheck(judged.problems()).entrySet()) {
        String[] key = e.getKey().split(" ", 2);
        findings.add(
            e.getValue(), labels.containerWithAll(node, c, new String[] {L_CHECK, L_LEVEL}, key));
      }
    }
    var nodeFindings = families.gauge(NODE_FINDINGS);
    if (j.isPresent()) {
      for (Map.Entry<String, Integer> e : countByCheck(j.get().node()).entrySet()) {
        String[] key = e.getKey().split(" ", 2);
        nodeFindings.add(
            e.getValue(),
            labels.of(
                new String[] {MetricNames.L_NODE, L_CHECK, L_LEVEL},
                new String[] {node, key[0], key[1]}));
      }
    }
    RegionUsageCollector.addIf(out, CONTAINER_VERDICT, verdict.build());
    RegionUsageCollector.addIf(out, CONTAINER_FINDINGS, findings.build());
    RegionUsageCollector.addIf(out, NODE_FINDINGS, nodeFindings.build());
  }

  /** "check level" to how many findings, for WARN/FAIL findings. */
  private static Map<String, Integer> countByCheck(List<Finding> problems) {
    Map<String, Integer> out = new TreeMap<>();
    for (Finding f : problems) {
      out.merge(
          f.id() + " " + f.severity().label().toLowerCase(java.util.Locale.ROOT), 1, Integer::sum);
    }
    return out;
  }
}

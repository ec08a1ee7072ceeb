package io.vgpu.exporter.k8s;

import io.fabric8.kubernetes.api.model.Node;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.informers.SharedIndexInformer;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Pod metadata from a node-scoped informer ({@code spec.nodeName=<node>}; never a cluster-wide pod
 * watch) and HAMi's node annotations from an informer on this node's Node object.
 *
 * <p>When the API server is unreachable or RBAC forbids the list/watch, lookups answer from the
 * last known state (possibly nothing), {@link #health()} says why, and the informers keep retrying
 * with back-off: no restart needed. Thread-safe.
 */
public final class KubernetesMetadataSource implements PodMetadataSource {
  private static final Logger LOG = LoggerFactory.getLogger(KubernetesMetadataSource.class);
  private static final String UID_INDEX = "uid";

  private final KubernetesClient client;
  private final String nodeName;
  private final List<String> labelAllowList;
  private final Duration resync;
  private volatile SharedIndexInformer<Pod> pods;
  private volatile SharedIndexInformer<Node> node;
  private volatile String podProblem = "";
  private volatile String nodeProblem = "";
  // One WARN per problem, repeated with back-off: fabric8 retries every few seconds for as long as
  // the API server is away, which must not become a log line per retry.
  private final ProblemLog podLog =
      new ProblemLog(LOG, "pod metadata unavailable (pod informer)", System::nanoTime);
  private final ProblemLog nodeLog =
      new ProblemLog(LOG, "node annotations unavailable (node informer)", System::nanoTime);

  public KubernetesMetadataSource(
      KubernetesClient client, String nodeName, List<String> labelAllowList, Duration resync) {
    this.client = Objects.requireNonNull(client, "client");
    this.nodeName = Objects.requireNonNull(nodeName, "nodeName");
    this.labelAllowList = List.copyOf(labelAllowList);
    this.resync = Objects.requireNonNull(resync, "resync");
  }

  @Override
  public synchronized void start() {
    if (pods != null) {
      return;
    }
    SharedIndexInformer<Pod> p =
        client
            .pods()
            .inAnyNamespace()
            .withField("spec.nodeName", nodeName)
            .runnableInformer(resync.toMillis());
    p.addIndexers(Map.of(UID_INDEX, pod -> List.of(uidOf(pod))));
    p.exceptionHandler(
        (started, t) -> {
          podProblem = describe("pods", t);
          podLog.problem(nodeName, podProblem, fixFor(podProblem));
          return true;
        });
    SharedIndexInformer<Node> n =
        client.nodes().withName(nodeName).runnableInformer(resync.toMillis());
    n.exceptionHandler(
        (started, t) -> {
          nodeProblem = describe("nodes", t);
          nodeLog.problem(nodeName, nodeProblem, fixFor(nodeProblem));
          return true;
        });
    pods = p;
    node = n;
    p.start()
        .whenComplete(
            (v, t) -> {
              if (t == null) {
                podProblem = "";
                LOG.atInfo()
                    .setMessage("pod informer synced")
                    .addKeyValue("node", nodeName)
                    .addKeyValue("pods", p.getStore().list().size())
                    .log();
              }
            });
    n.start().whenComplete((v, t) -> nodeProblem = t == null ? "" : describe("nodes", t));
  }

  /** What the operator can do about {@code problem} (a {@link #describe} text). */
  static String fixFor(String problem) {
    if (problem.startsWith("RBAC")) {
      return "grant get/list/watch on pods and nodes to the exporter's service account (the chart's"
          + " ClusterRole does)";
    }
    if (problem.startsWith("API server rejected")) {
      return "check the service account token or --kubeconfig";
    }
    return "off a cluster run with --kubernetes=false (pods are then named by their directories);"
        + " in a pod check the API server address, network policies and --kubeconfig";
  }

  private static String uidOf(Pod pod) {
    String uid = pod.getMetadata().getUid();
    return uid == null ? "" : uid.toLowerCase(java.util.Locale.ROOT);
  }

  private String describe(String resource, Throwable t) {
    Throwable c = t;
    while (c != null) {
      if (c instanceof KubernetesClientException k && k.getCode() == 403) {
        return "RBAC forbids list/watch "
            + resource
            + " (grant get/list/watch on "
            + resource
            + ")";
      }
      if (c instanceof KubernetesClientException k && k.getCode() == 401) {
        return "API server rejected the credentials for " + resource;
      }
      c = c.getCause();
    }
    Throwable root = t;
    while (root.getCause() != null) {
      root = root.getCause();
    }
    return "API server unreachable for "
        + resource
        + ": "
        + root.getClass().getSimpleName()
        + (root.getMessage() == null ? "" : " " + root.getMessage());
  }

  @Override
  public Optional<PodMeta> pod(String podUid) {
    SharedIndexInformer<Pod> p = pods;
    if (p == null) {
      return Optional.empty();
    }
    List<Pod> hits = p.getIndexer().byIndex(UID_INDEX, podUid);
    return hits.isEmpty()
        ? Optional.empty()
        : Optional.of(PodMetas.of(hits.get(0), labelAllowList));
  }

  @Override
  public Collection<PodMeta> pods() {
    SharedIndexInformer<Pod> p = pods;
    if (p == null) {
      return List.of();
    }
    return p.getStore().list().stream().map(pod -> PodMetas.of(pod, labelAllowList)).toList();
  }

  @Override
  public NodeMeta node() {
    SharedIndexInformer<Node> n = node;
    if (n == null) {
      return NodeMeta.unknown();
    }
    List<Node> nodes = n.getStore().list();
    if (nodes.isEmpty()) {
      return NodeMeta.unknown();
    }
    Map<String, String> ann = nodes.get(0).getMetadata().getAnnotations();
    return NodeAnnotations.decode(ann == null ? Map.of() : ann);
  }

  @Override
  public SourceHealth health() {
    SharedIndexInformer<Pod> p = pods;
    if (p == null) {
      return new SourceHealth(true, false, false, Optional.of("informer not started"));
    }
    boolean up = p.isWatching();
    boolean synced = p.hasSynced();
    if (up) {
      podLog.recovered(nodeName);
    }
    if (node != null && node.isWatching()) {
      nodeLog.recovered(nodeName);
    }
    String problem = podProblem;
    if (up) {
      problem = "";
    } else if (problem.isEmpty()) {
      problem = synced ? "watch on pods lost, reconnecting" : "waiting for the first pod list";
    }
    String np = nodeProblem;
    if (up && !np.isEmpty() && !(node != null && node.isWatching())) {
      problem = np;
    }
    return new SourceHealth(
        true, up, synced, problem.isEmpty() ? Optional.empty() : Optional.of(problem));
  }

  @Override
  public void close() {
    if (pods != null) {
      pods.stop();
    }
    if (node != null) {
      node.stop();
    }
    client.close();
  }
}

package io.vgpu.exporter.cli;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.vgpu.exporter.config.ConfigException;
import io.vgpu.exporter.config.ExporterConfig;
import io.vgpu.exporter.config.Flags;
import io.vgpu.exporter.doctor.Doctor;
import io.vgpu.exporter.doctor.DoctorReport;
import io.vgpu.exporter.doctor.Judgment;
import io.vgpu.exporter.k8s.NodeAnnotations;
import io.vgpu.exporter.k8s.NodeMeta;
import io.vgpu.exporter.node.EvidenceCollector;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import java.time.Clock;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code doctor [--pod NAME|--uid UID] [--json]}: the debugging guides' decision trees, automated.
 */
@Command(
    name = "doctor",
    mixinStandardHelpOptions = true,
    description = {
      "Walk the HAMi debugging decision trees on this node: 17 checks, each with a verdict, the",
      "evidence and the fix, grouped per container after a one-line summary of each.",
      "Exit: 0 ok, 1 warnings, 2 failures, 3 could not run."
    })
public final class DoctorCommand implements Callable<Integer>, FlagOptions.Host {
  @CommandLine.Spec CommandLine.Model.CommandSpec spec;
  @Mixin NodeOptions node = new NodeOptions();

  /** Paths, NVML ({@code --nvml=false} or {@code --no-nvml} skips it) and the node name. */
  @Override
  public List<io.vgpu.exporter.config.Flag<?>> flags() {
    return NodeOptions.PATHS_NVML_NODE;
  }

  @Option(
      names = "--problems",
      description = "Only WARN and FAIL findings, and only containers that have one.")
  boolean problemsOnly;

  @Option(names = "--pod", description = "Only this pod (name; needs API access via --node).")
  String podName;

  @Option(
      names = "--window",
      defaultValue = "2s",
      description = "Time between the two samples (default ${DEFAULT-VALUE}).")
  String window;

  @Option(names = "--no-nvml", description = "Do not query NVML (checks that need it are skipped).")
  boolean noNvml;

  @Option(
      names = "--annotation",
      paramLabel = "KEY=VALUE",
      description = "A node annotation to use instead of the API server (repeatable).")
  Map<String, String> annotations = new LinkedHashMap<>();

  @Override
  public Integer call() {
    // A one-shot command: its report is the output; the exporter's INFO lines (NVML up, ...)
    // would only interleave with it.
    LogSetup.configure("warn", "logfmt");
    var err = spec.commandLine().getErr();
    ExporterConfig config;
    try {
      config = node.config();
    } catch (ConfigException e) {
      e.problems().forEach(p -> err.println("error: " + p));
      err.flush();
      return 3;
    }
    String nodeName = config.get(Flags.NODE_NAME);
    boolean skipNvml = noNvml || !config.get(Flags.NVML);
    String nvmlLibrary = config.get(Flags.NVML_LIBRARY);
    Duration w;
    try {
      w = io.vgpu.exporter.config.Parsers.duration(window);
    } catch (RuntimeException e) {
      err.println("error: --window: " + e.getMessage());
      return 3;
    }
    Optional<NodeMeta> meta = nodeMeta(nodeName, err);
    String uid = node.uid;
    if (podName != null) {
      Optional<String> found = podUid(nodeName, podName, err);
      if (found.isEmpty()) {
        err.println(
            "error: pod "
                + podName
                + " not found on node "
                + nodeName
                + " (use --uid UID without API access)");
        err.flush();
        return 3;
      }
      uid = found.get();
    }
    if (!NodeOptions.targetsExist(List.of(node.cacheRoot()), true, err)) {
      return 3;
    }
    Duration sampleWindow = w;
    EvidenceCollector collector =
        new EvidenceCollector(
            node.procFs(),
            () ->
                skipNvml
                    ? NvmlSnapshot.unavailable(
                        Clock.systemUTC().instant(), NodeEvidence.NVML_NOT_QUERIED)
                    : NodeOptions.sampleNvml(nvmlLibrary, sampleWindow),
            () -> meta,
            Clock.systemUTC(),
            sampleWindow,
            d -> Thread.sleep(d.toMillis()),
            NodeEvidence.Thresholds.defaults());
    NodeEvidence e = collector.collect(List.of(node.cacheRoot()));
    if (uid != null) {
      e = e.forPod(uid);
    }
    DoctorReport report = Doctor.standard().run(e);
    var out = spec.commandLine().getOut();
    List<Judgment.Container> judged =
        List.copyOf(Judgment.containers(e, report.findings()).values());
    out.print(node.json ? report.toJson(judged) : report.toText(judged, problemsOnly));
    out.flush();
    return report.exitCode();
  }

  /**
   * A client for one question: no retries (fabric8 would log "retrying in 1000 ms" and wait), short
   * timeouts; an unreachable API server is one warning line.
   */
  private static KubernetesClient oneShotClient() {
    io.fabric8.kubernetes.client.Config c = io.fabric8.kubernetes.client.Config.autoConfigure(null);
    c.setRequestRetryBackoffLimit(0);
    c.setConnectionTimeout(3000);
    c.setRequestTimeout(5000);
    return new KubernetesClientBuilder().withConfig(c).build();
  }

  private Optional<NodeMeta> nodeMeta(String nodeName, java.io.PrintWriter err) {
    if (!annotations.isEmpty()) {
      return Optional.of(NodeAnnotations.decode(annotations));
    }
    if (nodeName == null || nodeName.isBlank()) {
      return Optional.empty();
    }
    try (KubernetesClient client = oneShotClient()) {
      var n = client.nodes().withName(nodeName).get();
      if (n == null) {
        return Optional.of(NodeMeta.unknown());
      }
      Map<String, String> a = n.getMetadata().getAnnotations();
      return Optional.of(NodeAnnotations.decode(a == null ? Map.of() : a));
    } catch (RuntimeException ex) {
      err.println("warning: node annotations not read: " + ex.getMessage());
      return Optional.empty();
    }
  }

  private Optional<String> podUid(String nodeName, String name, java.io.PrintWriter err) {
    if (nodeName == null || nodeName.isBlank()) {
      return Optional.empty();
    }
    try (KubernetesClient client = oneShotClient()) {
      return client
          .pods()
          .inAnyNamespace()
          .withField("spec.nodeName", nodeName)
          .list()
          .getItems()
          .stream()
          .filter(p -> name.equals(p.getMetadata().getName()))
          .map(p -> p.getMetadata().getUid())
          .findFirst();
    } catch (RuntimeException ex) {
      err.println("warning: pods not listed: " + ex.getMessage());
      return Optional.empty();
    }
  }
}

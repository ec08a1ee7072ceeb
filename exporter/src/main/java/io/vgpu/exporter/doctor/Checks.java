package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.regioncodec.RegionSnapshot;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.BiConsumer;

/** Small helpers shared by the checks. */
public final class Checks {
  private Checks() {}

  public static final String NODE = "node";
  static final String EXPECTED_MAJOR_MINOR = "1.2";

  public static String pod(String uid) {
    return "pod " + uid;
  }

  static String container(NodeEvidence.Container c) {
    return c.key().dirName();
  }

  static String mib(long bytes) {
    return (bytes >> 20) + " MiB";
  }

  /**
   * An exporter subcommand as an operator runs it where the doctor's output is read: in the
   * exporter pod of this node, whose image has {@code vgpu-exporter} and {@code shrreg-tool} on
   * PATH and the cache root and host /proc already configured.
   */
  static String inExporterPod(String args) {
    return "`kubectl -n $NS exec $POD -- vgpu-exporter "
        + args
        + "` ($NS/$POD: the exporter pod on this node; on the node itself `vgpu-exporter "
        + args
        + " --path.cache-root=DIR --path.procfs=/proc`)";
  }

  /**
   * {@code word} when it can be pasted into a shell as one argument unchanged (letters, digits and
   * {@code . _ / : @ + = , -}), else {@code placeholder}. Directory and file names are the
   * tenant's: a fix text must never hand an operator a command line a name can extend.
   */
  public static String shellWord(String word, String placeholder) {
    return word.matches("[A-Za-z0-9._/:@+=,-]{1,4096}") ? word : placeholder;
  }

  /** What {@code --apply} needs, and the way without it ({@code shrreg-tool} in the container). */
  static String applyNeedsWriteMode(NodeEvidence.Container c, String shrregArgs) {
    return " --apply needs a chart mode that mounts the cache root read-write"
        + " (values-hami-replacement.yaml, or any exporter.writeBack.* value true); in the"
        + " read-only and installer modes run `kubectl -n TENANT_NS exec TENANT_POD -c "
        + shellWord(c.key().containerName(), "CONTAINER")
        + " -- /usr/local/vgpu/shrreg-tool "
        + shrregArgs
        + "` (where the installer mode placed it), or restart the container.";
  }

  /** Calls {@code each} for every readable region (latest sample) of every container. */
  static void eachRegion(
      NodeEvidence e, BiConsumer<NodeEvidence.Container, NodeEvidence.Region> each) {
    for (NodeEvidence.Container c : e.containers()) {
      for (NodeEvidence.Region r : c.regions()) {
        if (r.latest().isPresent()) {
          each.accept(c, r);
        }
      }
    }
  }

  static RegionSnapshot latest(NodeEvidence.Region r) {
    return r.latest().orElseThrow();
  }

  /** The findings, or one SKIP when there were none. */
  static List<Finding> orSkip(DoctorCheck check, List<Finding> findings, String why) {
    if (!findings.isEmpty()) {
      return findings;
    }
    List<Finding> one = new ArrayList<>();
    one.add(check.skip(NODE, why));
    return one;
  }

  /**
   * What a node-annotation check reports when there is nothing to judge: a SKIP without API server
   * access, a WARN when the Node object is missing; empty when the annotations can be checked.
   */
  static Optional<List<Finding>> nodeUnreadable(DoctorCheck check, NodeEvidence e) {
    if (e.node().isEmpty()) {
      return Optional.of(
          List.of(check.skip(NODE, "node annotations not read (no API server access)")));
    }
    if (!e.node().get().known()) {
      return Optional.of(
          List.of(
              check.finding(
                  Severity.WARN,
                  NODE,
                  "the Node object was not found",
                  List.of(),
                  "Check NODE_NAME of the exporter.")));
    }
    return Optional.empty();
  }

  /** A region's file and version, for evidence lines. */
  static String describe(NodeEvidence.Region r) {
    RegionSnapshot s = latest(r);
    return r.path()
        + ": layout "
        + s.layout().label()
        + ", version "
        + s.majorVersion()
        + "."
        + s.minorVersion();
  }
}

package io.vgpu.exporter.doctor;

import io.vgpu.exporter.discovery.DegradedMark;
import io.vgpu.exporter.node.DegradedPolicy;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.regioncodec.RegionSnapshot;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * 16: libvgpu left a {@code .degraded} side file: a process could not use the shared region and
 * enforces its limits for its own process tree only. Judged like the metric (see {@link
 * DegradedPolicy}); the content of a malformed file is never shown.
 */
final class LibvgpuDegradedCheck implements DoctorCheck {
  @Override
  public int number() {
    return 16;
  }

  @Override
  public String id() {
    return "libvgpu-degraded";
  }

  @Override
  public String title() {
    return "libvgpu uses the shared region (not degraded)";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    List<Finding> out = new ArrayList<>();
    for (NodeEvidence.Container c : e.containers()) {
      List<RegionSnapshot> regions = new ArrayList<>();
      c.regions().forEach(r -> r.latest().ifPresent(regions::add));
      for (DegradedMark m : c.degraded()) {
        if (m.malformed()) {
          out.add(
              finding(
                  Severity.WARN,
                  Checks.container(c),
                  "degraded-mode side file not written by libvgpu (a link, FIFO, hard link or unparsable content)",
                  List.of(m.path() + ": malformed (content not shown)"),
                  "Remove " + m.path() + "; libvgpu writes a new one if a process degrades."));
        } else if (DegradedPolicy.superseded(m, regions)) {
          out.add(
              ok(
                  Checks.container(c),
                  "old degraded-mode side file: the region has worked since",
                  List.of(describe(m))));
        } else {
          boolean running =
              e.processesOf(c.key().podUid()).stream().anyMatch(p -> p.containerPid() == m.pid());
          out.add(
              finding(
                  Severity.FAIL,
                  Checks.container(c),
                  "libvgpu runs degraded ("
                      + m.cause().label()
                      + "): limits hold per process tree only, not container-wide",
                  List.of(
                      describe(m),
                      running
                          ? "pid " + m.pid() + " is a running GPU process of the pod"
                          : "pid " + m.pid() + " not seen among the pod's GPU processes"),
                  fix(m, c.key().podUid())
                      + " Then restart the degraded processes (they keep process-local limits until they exit) and delete "
                      + m.path()
                      + "."));
        }
      }
    }
    if (out.isEmpty() && !e.containers().isEmpty()) {
      out.add(ok(Checks.NODE, "no degraded-mode side files", List.of()));
    }
    return Checks.orSkip(this, out, "no container directories");
  }

  private static String describe(DegradedMark m) {
    return m.path()
        + ": cause "
        + m.cause().label()
        + ", pid "
        + m.pid()
        + ", since "
        + Instant.ofEpochSecond(m.epochSeconds());
  }

  private static String fix(DegradedMark m, String podUid) {
    String cache = m.cachePath().toString();
    return switch (m.cause()) {
      case DIR_MISSING -> "Create and mount the cache directory of " + cache + ".";
      case UNOPENABLE ->
          "Make "
              + cache
              + " creatable read-write by the container's user (directory writable, filesystem not read-only, no directory at that name).";
      case SYMLINK -> "Remove the symbolic link " + cache + " (libvgpu never follows it).";
      case NOT_REGULAR -> "Remove the FIFO, socket or device at " + cache + ".";
      case SLOT_TABLE_FULL ->
          "Free slots of dead processes: "
              + Checks.inExporterPod("cleanup --uid " + podUid + " --apply")
              + " (needs a chart mode that mounts the cache root read-write); if all 1024 are"
              + " live, run fewer CUDA processes in the container.";
      case NO_SPACE -> "Free space (or quota) on the filesystem holding " + cache + ".";
      case NO_LOCKS ->
          "Put the cache directory on a filesystem with POSIX record locks (a local filesystem, not this FUSE/NFS mount).";
      case VERSION ->
          "Remove the region of another library version at "
              + cache
              + " once its processes have exited (see check 3).";
      case MALFORMED -> "Remove " + m.path() + ".";
    };
  }
}

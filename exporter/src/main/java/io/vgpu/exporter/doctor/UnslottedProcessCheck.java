package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * 17: a GPU process of a pod whose regions set limits has no slot in any of them, so no limit
 * applies to it: it was started without the limit environment (sshd, {@code su -}, a daemon that
 * clears it, Docker-in-Docker) or without libvgpu. The same processes {@code
 * vgpu_container_unslotted_processes} counts and {@code VgpuProcessUnlimited} alerts on.
 */
final class UnslottedProcessCheck implements DoctorCheck {
  @Override
  public int number() {
    return 17;
  }

  @Override
  public String id() {
    return "unslotted-process";
  }

  @Override
  public String title() {
    return "every GPU process of a limited pod holds a slot in its region";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    Map<String, List<NodeEvidence.Unslotted>> byPod = new LinkedHashMap<>();
    for (NodeEvidence.Unslotted u : e.unslottedProcesses()) {
      byPod.computeIfAbsent(u.podUid(), k -> new ArrayList<>()).add(u);
    }
    List<Finding> out = new ArrayList<>();
    byPod.forEach(
        (uid, procs) -> {
          List<String> evidence = new ArrayList<>();
          for (NodeEvidence.Unslotted u : procs) {
            evidence.add(
                "host pid "
                    + u.process().hostPid()
                    + " (container pid "
                    + u.process().containerPid()
                    + u.container().map(c -> ", container " + c).orElse("")
                    + ") uses the GPU with no slot in the pod's regions: "
                    + (u.reason().equals(NodeEvidence.Unslotted.LIBRARY_NOT_LOADED)
                        ? "libvgpu is not mapped"
                        : "libvgpu is mapped but never registered the process"));
          }
          out.add(
              finding(
                  Severity.FAIL,
                  Checks.pod(uid),
                  procs.size() + " GPU process(es) of a limited pod run without limits",
                  evidence,
                  "Processes started without the pod's environment (sshd, su -, a daemon that"
                      + " clears it) lose the limit variables: start them from the container's"
                      + " entrypoint, or use a libvgpu that adopts the container's region"
                      + " without them; then restart the processes."));
        });
    if (out.isEmpty()) {
      out.add(ok(Checks.NODE, "no GPU process of a limited pod is without a slot", List.of()));
    }
    return out;
  }
}

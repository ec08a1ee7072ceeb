package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import java.util.ArrayList;
import java.util.List;

/**
 * 1: the pod's GPU processes run without libvgpu (no mapping in {@code /proc/<pid>/maps}), with the
 * reason when visible: {@code /etc/ld.so.preload} missing or not naming it, or {@code
 * CUDA_DISABLE_CONTROL=true} (HAMi then skips the preload mount). Reports facts about the tenant's
 * files and environment (names libvgpu: yes, no, unreadable), never their contents.
 */
final class LibraryNotLoadedCheck implements DoctorCheck {
  @Override
  public int number() {
    return 1;
  }

  @Override
  public String id() {
    return "library-not-loaded";
  }

  @Override
  public String title() {
    return "libvgpu loaded in the pod's GPU processes";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    List<Finding> out = new ArrayList<>();
    for (String uid : e.podUids()) {
      List<NodeEvidence.PodProcess> gpu =
          e.processesOf(uid).stream().filter(NodeEvidence.PodProcess::usesGpu).toList();
      if (gpu.isEmpty()) {
        continue;
      }
      List<String> evidence = new ArrayList<>();
      boolean disabled = false;
      boolean preloadMissing = false;
      for (NodeEvidence.PodProcess p : gpu) {
        if (!p.vgpuLibraries().isEmpty()) {
          continue;
        }
        evidence.add(
            "host pid "
                + p.hostPid()
                + " (container pid "
                + p.containerPid()
                + ") uses the GPU; /proc/"
                + p.hostPid()
                + "/maps has no libvgpu");
        if ("true".equalsIgnoreCase(p.environment().getOrDefault("CUDA_DISABLE_CONTROL", ""))) {
          disabled = true;
          evidence.add("  its environment has CUDA_DISABLE_CONTROL=true");
        }
        if (p.ldSoPreload() != NodeEvidence.Preload.NAMES_LIBVGPU) {
          preloadMissing = true;
          evidence.add("  its /etc/ld.so.preload " + p.ldSoPreload().says());
        }
        String preloadEnv = p.environment().get("LD_PRELOAD");
        if (preloadEnv != null) {
          // A fact, not the value: the environment is the tenant's.
          evidence.add(
              "  its LD_PRELOAD is set and "
                  + (preloadEnv.contains("libvgpu") ? "names" : "does not name")
                  + " libvgpu");
        }
      }
      if (evidence.isEmpty()) {
        out.add(
            ok(
                Checks.pod(uid),
                gpu.size() + " GPU process(es), all with libvgpu mapped",
                List.of()));
        continue;
      }
      String fix =
          disabled
              ? "Remove CUDA_DISABLE_CONTROL=true from the pod spec if the pod should be limited, then recreate the pod."
              : preloadMissing
                  ? "The device plugin did not mount /etc/ld.so.preload: check its Allocate response mounts and HOOK_PATH, then recreate the pod. Processes started by su/ssh lose LD_PRELOAD; use ld.so.preload."
                  : "The library is preloaded but not mapped: check that libvgpu.so exists at the preloaded path inside the container and matches the container's libc.";
      out.add(
          finding(
              Severity.FAIL,
              Checks.pod(uid),
              "GPU processes run without libvgpu: no memory or SM limits apply",
              evidence,
              fix));
    }
    return Checks.orSkip(this, out, "no GPU processes found in pods on this node");
  }
}

package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import java.util.ArrayList;
import java.util.List;

/** 2: a container directory without a cache file while the pod's processes use the GPU. */
final class CacheFileMissingCheck implements DoctorCheck {
  @Override
  public int number() {
    return 2;
  }

  @Override
  public String id() {
    return "cache-file-missing";
  }

  @Override
  public String title() {
    return "shared-region cache file created";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    List<Finding> out = new ArrayList<>();
    for (String uid : e.podUids()) {
      boolean gpu = e.processesOf(uid).stream().anyMatch(NodeEvidence.PodProcess::usesGpu);
      List<NodeEvidence.Container> dirs = e.containersOf(uid);
      if (dirs.isEmpty()) {
        if (gpu) {
          out.add(
              finding(
                  Severity.FAIL,
                  Checks.pod(uid),
                  "GPU processes but no cache directory on the node",
                  List.of("no " + uid + "_<container> directory under the cache root"),
                  "The pod was not set up by HAMi's device plugin (wrong scheduler or resource name?) or the cache root is not the one the plugin uses (HOOK_PATH)."));
        }
        continue;
      }
      for (NodeEvidence.Container c : dirs) {
        if (!c.regions().isEmpty()) {
          out.add(
              ok(
                  Checks.container(c),
                  c.regions().size() + " cache file(s)",
                  List.of(c.regions().getFirst().path().toString())));
        } else if (gpu) {
          out.add(
              finding(
                  Severity.FAIL,
                  Checks.container(c),
                  "the pod uses the GPU but no cache file was ever created",
                  List.of(
                      c.dir() + " has no *.cache file", "processes of pod " + uid + " use the GPU"),
                  "libvgpu never initialised in this container: check check 1 (library loaded), CUDA_DEVICE_MEMORY_SHARED_CACHE, and that the directory is mounted writable at the path the variable names."));
        } else {
          out.add(
              ok(
                  Checks.container(c),
                  "no cache file yet, and no process uses the GPU (the file appears at the first CUDA call)",
                  List.of(c.dir().toString())));
        }
      }
    }
    return Checks.orSkip(this, out, "no container directories and no GPU processes");
  }
}

package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

/**
 * 4: one pod loads several different libvgpu files, or its regions were created by different
 * versions.
 */
final class MixedLibraryVersionsCheck implements DoctorCheck {
  @Override
  public int number() {
    return 4;
  }

  @Override
  public String id() {
    return "mixed-library-versions";
  }

  @Override
  public String title() {
    return "one library version per pod";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    List<Finding> out = new ArrayList<>();
    for (String uid : e.podUids()) {
      TreeSet<String> libs = new TreeSet<>();
      e.processesOf(uid).forEach(p -> libs.addAll(p.vgpuLibraries()));
      TreeSet<String> created = new TreeSet<>();
      TreeSet<String> versions = new TreeSet<>();
      for (NodeEvidence.Container c : e.containersOf(uid)) {
        for (NodeEvidence.Region r : c.regions()) {
          r.latest()
              .ifPresent(
                  s -> {
                    versions.add(
                        s.majorVersion()
                            + "."
                            + s.minorVersion()
                            + " ("
                            + s.layout().label()
                            + ")");
                    s.extension().ifPresent(x -> created.add(x.libVersion()));
                  });
        }
      }
      if (libs.isEmpty() && versions.isEmpty()) {
        continue;
      }
      List<String> ev = new ArrayList<>();
      libs.forEach(l -> ev.add("mapped: " + l));
      created.forEach(v -> ev.add("region created by: " + v));
      versions.forEach(v -> ev.add("region version: " + v));
      if (libs.size() > 1 || created.size() > 1 || versions.size() > 1) {
        out.add(
            finding(
                Severity.FAIL,
                Checks.pod(uid),
                "several library versions in one pod",
                ev,
                "Every container of a pod must load the same libvgpu build: remove copies baked into images (or LD_PRELOAD pointing at them) so only the device plugin's mounted library is used; then recreate the pod."));
      } else {
        out.add(ok(Checks.pod(uid), "one library version", ev));
      }
    }
    return Checks.orSkip(this, out, "no library mappings or regions to compare");
  }
}

package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.regioncodec.RegionFile;
import java.util.ArrayList;
import java.util.List;

/** 7: the region's 1024-entry slot table is (nearly) full: new processes fail to register. */
final class SlotTableFullCheck implements DoctorCheck {
  @Override
  public int number() {
    return 7;
  }

  @Override
  public String id() {
    return "slot-table-full";
  }

  @Override
  public String title() {
    return "slot table has room";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    List<Finding> out = new ArrayList<>();
    Checks.eachRegion(
        e,
        (c, r) -> {
          var s = Checks.latest(r);
          int used = s.rawProcNum();
          List<String> ev =
              List.of(
                  r.path()
                      + ": proc_num "
                      + used
                      + " of "
                      + RegionFile.MAX_PROCESSES
                      + ", "
                      + s.processes().size()
                      + " live slot(s)");
          String fix =
              "Drop slots of dead processes: "
                  + Checks.inExporterPod("cleanup --uid " + c.key().podUid() + " --apply")
                  + "; if the slots are live, the container runs too many CUDA processes for one region."
                  + Checks.applyNeedsWriteMode(c, "--cleanup");
          if (used >= RegionFile.MAX_PROCESSES || used < 0) {
            out.add(
                finding(
                    Severity.FAIL,
                    Checks.container(c),
                    "slot table full: new CUDA processes cannot register (SET_TASK_PID FAILED)",
                    ev,
                    fix));
          } else if (used >= e.thresholds().slotTableWarnRatio() * RegionFile.MAX_PROCESSES) {
            out.add(finding(Severity.WARN, Checks.container(c), "slot table nearly full", ev, fix));
          } else {
            out.add(
                ok(
                    Checks.container(c),
                    "room for " + (RegionFile.MAX_PROCESSES - used) + " more processes",
                    ev));
          }
        });
    return Checks.orSkip(this, out, "no readable regions");
  }
}

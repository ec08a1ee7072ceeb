package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.regioncodec.ProcessSlot;
import java.util.ArrayList;
import java.util.List;

/** 8: slots of processes that are gone (SIGKILLed) still count memory against the limit. */
final class ZombieSlotsCheck implements DoctorCheck {
  @Override
  public int number() {
    return 8;
  }

  @Override
  public String id() {
    return "zombie-slots";
  }

  @Override
  public String title() {
    return "no slots of dead processes holding memory";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    List<Finding> out = new ArrayList<>();
    Checks.eachRegion(
        e,
        (c, r) -> {
          Judgment.Region judged = Judgment.region(e, c, r);
          long bytes = 0;
          List<String> gone = new ArrayList<>();
          List<String> unknown = new ArrayList<>();
          for (Judgment.Slot j : judged.slots()) {
            ProcessSlot slot = j.slot();
            if (j.fate() == NodeEvidence.SlotFate.UNKNOWN) {
              unknown.add(
                  "slot "
                      + slot.slotIndex()
                      + ": container pid "
                      + slot.pid()
                      + " recorded host pid "
                      + slot.hostPid()
                      + " (== pid) and the pod's processes are not visible: UNKNOWN (alive or gone cannot be told)");
            } else if (j.fate() == NodeEvidence.SlotFate.GONE) {
              bytes += slot.totalBytes();
              gone.add(
                  "slot "
                      + slot.slotIndex()
                      + ": container pid "
                      + slot.pid()
                      + " (recorded host pid "
                      + slot.hostPid()
                      + ") is GONE, holds "
                      + Checks.mib(slot.totalBytes()));
            }
          }
          if (gone.isEmpty() && !unknown.isEmpty()) {
            out.add(
                finding(
                    Severity.WARN,
                    Checks.container(c),
                    unknown.size() + " slot(s) UNKNOWN: cannot be judged here (alive or gone)",
                    unknown,
                    "Run the doctor where the host's /proc is visible: in the exporter pod (the chart sets hostPID: true), or on the node with --path.procfs=/proc; check 9 covers the wrong host pid. cleanup keeps UNKNOWN slots."));
            return;
          }
          if (gone.isEmpty()) {
            out.add(
                ok(
                    Checks.container(c),
                    judged.slots().size() + " slot(s), all ALIVE",
                    List.of(r.path().toString())));
            return;
          }
          List<String> ev = new ArrayList<>(gone);
          ev.addAll(unknown);
          String fix =
              "Free them: "
                  + Checks.inExporterPod("cleanup --uid " + c.key().podUid() + " --apply")
                  + "; HAMi-core only compacts when another process starts or hits OOM."
                  + Checks.applyNeedsWriteMode(c, "--cleanup");
          out.add(
              finding(
                  bytes > 0 ? Severity.FAIL : Severity.WARN,
                  Checks.container(c),
                  gone.size()
                      + " slot(s) of GONE processes"
                      + (bytes > 0
                          ? " hold " + Checks.mib(bytes) + " of the limit (false OOMs)"
                          : ""),
                  ev,
                  fix));
        });
    return Checks.orSkip(this, out, "no readable regions");
  }
}

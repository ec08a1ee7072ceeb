package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.regioncodec.ProcessSlot;
import java.util.ArrayList;
import java.util.List;

/** 8: slots of processes that are gone (SIGKILLed) still count memory against the limit. */
public final class ZombieSlotsCheck implements DoctorCheck {
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
          long bytes = 0;
          List<String> ev = new ArrayList<>();
          int dead = 0;
          List<String> unknown = new ArrayList<>();
          for (ProcessSlot slot : Checks.latest(r).processes()) {
            NodeEvidence.SlotFate fate = e.fateOf(c, r, slot);
            if (fate == NodeEvidence.SlotFate.UNKNOWN) {
              unknown.add(
                  "slot "
                      + slot.slotIndex()
                      + ": container pid "
                      + slot.pid()
                      + " recorded host pid "
                      + slot.hostPid()
                      + " (== pid) and the pod's processes are not visible: alive or gone cannot be told");
            } else if (fate == NodeEvidence.SlotFate.GONE) {
              dead++;
              bytes += slot.totalBytes();
              ev.add(
                  "slot "
                      + slot.slotIndex()
                      + ": container pid "
                      + slot.pid()
                      + " (recorded host pid "
                      + slot.hostPid()
                      + ") is gone, holds "
                      + Checks.mib(slot.totalBytes()));
            }
          }
          if (dead == 0 && !unknown.isEmpty()) {
            out.add(
                finding(
                    Severity.WARN,
                    Checks.container(c),
                    unknown.size() + " slot(s) cannot be judged",
                    unknown,
                    "Run the exporter with the host's /proc (hostPID: true) so the pod's processes are visible; check 9 covers the wrong host pid."));
            return;
          }
          if (dead == 0) {
            out.add(
                ok(
                    Checks.container(c),
                    Checks.latest(r).processes().size() + " slot(s), all alive",
                    List.of(r.path().toString())));
            return;
          }
          String fix =
              "`vgpu-exporter cleanup --uid "
                  + c.key().podUid()
                  + " --apply` on the node or `shrreg-tool --cleanup` in the container drops them; HAMi-core only compacts when another process starts or hits OOM.";
          out.add(
              finding(
                  bytes > 0 ? Severity.FAIL : Severity.WARN,
                  Checks.container(c),
                  dead
                      + " slot(s) of dead processes"
                      + (bytes > 0
                          ? " hold " + Checks.mib(bytes) + " of the limit (false OOMs)"
                          : ""),
                  ev,
                  fix));
        });
    return Checks.orSkip(this, out, "no readable regions");
  }
}

package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.LockHolder;
import io.vgpu.exporter.node.NodeEvidence;
import java.util.ArrayList;
import java.util.List;

/** 5: the slot-table lock is recorded as held by a process that no longer exists. */
public final class DeadLockHolderCheck implements DoctorCheck {
  @Override
  public int number() {
    return 5;
  }

  @Override
  public String id() {
    return "lock-dead-holder";
  }

  @Override
  public String title() {
    return "slot-table lock not held by a dead process";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    List<Finding> out = new ArrayList<>();
    Checks.eachRegion(
        e,
        (c, r) -> {
          var holder = LockHolder.of(Checks.latest(r), e.now());
          if (holder.isEmpty()) {
            out.add(ok(Checks.container(c), "lock free", List.of(r.path().toString())));
            return;
          }
          var h = holder.get();
          var live = e.processOfContainerPid(c, r, h.containerPid());
          List<String> ev = new ArrayList<>();
          ev.add(
              r.path()
                  + ": lock holder container pid "
                  + h.containerPid()
                  + " (from "
                  + h.source()
                  + ")");
          if (live.isPresent()) {
            ev.add("holder is alive: host pid " + live.get().hostPid());
            out.add(ok(Checks.container(c), "lock held by a live process", ev));
          } else {
            ev.add(
                "no process of pod "
                    + c.key().podUid()
                    + " that maps this region has container pid "
                    + h.containerPid());
            out.add(
                finding(
                    Severity.FAIL,
                    Checks.container(c),
                    "lock held by a dead process: the container's processes will block (\"Lock shrreg timeout\")",
                    ev,
                    "Release it: `vgpu-exporter unlock --uid "
                        + c.key().podUid()
                        + " --apply` on the node, or `shrreg-tool --force-unlock` in the container; then `cleanup` the dead slots."));
          }
        });
    return Checks.orSkip(this, out, "no readable regions");
  }
}

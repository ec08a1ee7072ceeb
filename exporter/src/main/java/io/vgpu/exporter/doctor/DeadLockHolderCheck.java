package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.LockHolder;
import io.vgpu.exporter.node.NodeEvidence;
import java.util.ArrayList;
import java.util.List;

/** 5: the slot-table lock is recorded as held by a process that no longer exists. */
final class DeadLockHolderCheck implements DoctorCheck {
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
          Judgment.Lock lock = Judgment.lock(e, c, r);
          String unlock =
              "Release it: "
                  + Checks.inExporterPod("unlock --uid " + c.key().podUid() + " --apply")
                  + ", then `cleanup` the dead slots the same way."
                  + Checks.applyNeedsWriteMode(c, "--force-unlock");
          switch (lock.state()) {
            case FREE ->
                out.add(ok(Checks.container(c), "lock free", List.of(r.path().toString())));
            case HELD_LIVE ->
                out.add(
                    ok(
                        Checks.container(c),
                        "lock held by a live process",
                        List.of(
                            holderLine(r, lock.holder().orElseThrow()),
                            "holder is alive: host pid "
                                + lock.liveHolder().orElseThrow().hostPid())));
            case HELD_DEAD ->
                out.add(
                    finding(
                        Severity.FAIL,
                        Checks.container(c),
                        "lock held by a dead process: the container's processes will block (\"Lock shrreg timeout\")",
                        List.of(
                            holderLine(r, lock.holder().orElseThrow()),
                            "no process of pod "
                                + c.key().podUid()
                                + " that maps this region has container pid "
                                + lock.holder().orElseThrow().containerPid()),
                        unlock));
            case TAKEN_NO_HOLDER ->
                out.add(
                    finding(
                        Severity.FAIL,
                        Checks.container(c),
                        "lock "
                            + lock.state().says()
                            + ": the container's processes will block (\"Lock shrreg timeout\")",
                        List.of(
                            r.path()
                                + ": semaphore taken"
                                + (e.window().isZero()
                                    ? ""
                                    : " in both samples " + e.window().toMillis() + " ms apart")
                                + ", owner_pid 0 and no holder record"),
                        unlock
                            + " (shrreg-tool watches the lock for 2 s first and releases it only if"
                            + " it stays taken with no holder.)"));
          }
        });
    return Checks.orSkip(this, out, "no readable regions");
  }

  private static String holderLine(NodeEvidence.Region r, LockHolder h) {
    return r.path()
        + ": lock holder container pid "
        + h.containerPid()
        + " (from "
        + h.source()
        + ")";
  }
}

package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.LockHolder;
import io.vgpu.exporter.node.NodeEvidence;
import java.util.ArrayList;
import java.util.List;

/**
 * 6: a live process has held the slot-table lock too long: from the extension's timestamp, or (for
 * HAMi-core regions, which record no time) held by the same pid at both samples.
 */
final class LongLockHoldCheck implements DoctorCheck {
  @Override
  public int number() {
    return 6;
  }

  @Override
  public String id() {
    return "lock-held-long";
  }

  @Override
  public String title() {
    return "slot-table lock not held too long by a live process";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    List<Finding> out = new ArrayList<>();
    Checks.eachRegion(
        e,
        (c, r) -> {
          var holder = LockHolder.of(Checks.latest(r), e.now());
          if (holder.isEmpty()
              || e.processOfContainerPid(c, r, holder.get().containerPid()).isEmpty()) {
            out.add(ok(Checks.container(c), "no live holder", List.of(r.path().toString())));
            return;
          }
          var h = holder.get();
          var p = e.processOfContainerPid(c, r, h.containerPid()).get();
          List<String> ev = new ArrayList<>();
          ev.add(
              r.path()
                  + ": held by container pid "
                  + h.containerPid()
                  + " (host pid "
                  + p.hostPid()
                  + ")");
          boolean tooLong;
          if (h.heldFor().isPresent()) {
            ev.add(
                "held for "
                    + h.heldFor().get().toMillis() / 1000.0
                    + " s (limit "
                    + e.thresholds().lockHoldMax().toSeconds()
                    + " s)");
            tooLong = h.heldFor().get().compareTo(e.thresholds().lockHoldMax()) > 0;
          } else {
            var before = r.first().flatMap(s -> LockHolder.of(s, e.now()));
            tooLong =
                !e.window().isZero()
                    && before.isPresent()
                    && before.get().containerPid() == h.containerPid();
            ev.add(
                tooLong
                    ? "same holder at both samples "
                        + e.window().toMillis()
                        + " ms apart (HAMi-core holds it for milliseconds)"
                    : "holder changed or was sampled once");
          }
          if (tooLong) {
            out.add(
                finding(
                    Severity.WARN,
                    Checks.container(c),
                    "a live process keeps the slot-table lock",
                    ev,
                    "Do not force-unlock a live holder. Inspect host pid "
                        + p.hostPid()
                        + " on the node (the exporter image has no shell): stuck in a driver call"
                        + " or stopped with SIGSTOP? `cat /proc/"
                        + p.hostPid()
                        + "/stack` as root there; restarting that process releases the lock."));
          } else {
            out.add(ok(Checks.container(c), "lock held briefly", ev));
          }
        });
    return Checks.orSkip(this, out, "no readable regions");
  }
}

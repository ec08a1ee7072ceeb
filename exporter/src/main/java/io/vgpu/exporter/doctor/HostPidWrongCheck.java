package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.regioncodec.ProcessSlot;
import java.util.ArrayList;
import java.util.List;

/**
 * 9: the host pid the library recorded differs from the process's real host pid: HAMi's "hostpid ==
 * pid" bug makes its utilization 0 and silently disables the SM limiter.
 */
final class HostPidWrongCheck implements DoctorCheck {
  @Override
  public int number() {
    return 9;
  }

  @Override
  public String id() {
    return "hostpid-wrong";
  }

  @Override
  public String title() {
    return "recorded host pids are right";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    List<Finding> out = new ArrayList<>();
    Checks.eachRegion(
        e,
        (c, r) -> {
          List<String> wrong = new ArrayList<>();
          List<String> unknown = new ArrayList<>();
          List<String> suspect = new ArrayList<>();
          boolean sameAsPid = false;
          int checked = 0;
          for (ProcessSlot slot : Checks.latest(r).processes()) {
            var p = e.processOfSlot(c, r, slot);
            if (p.isEmpty()) {
              if (e.fateOf(c, r, slot) == NodeEvidence.SlotFate.UNKNOWN) {
                suspect.add(
                    "slot "
                        + slot.slotIndex()
                        + ": recorded host pid "
                        + slot.hostPid()
                        + " equals the container pid, and no process in a nested pid namespace has that host pid");
              }
              continue;
            }
            checked++;
            int real = p.get().hostPid();
            if (slot.hostPid() == 0) {
              unknown.add(
                  "slot "
                      + slot.slotIndex()
                      + ": container pid "
                      + slot.pid()
                      + " has no host pid recorded (real host pid "
                      + real
                      + ")");
            } else if (slot.hostPid() != real) {
              sameAsPid |= slot.hostPid() == slot.pid();
              wrong.add(
                  "slot "
                      + slot.slotIndex()
                      + ": container pid "
                      + slot.pid()
                      + " recorded host pid "
                      + slot.hostPid()
                      + ", real host pid "
                      + real);
            }
          }
          String subject = Checks.container(c);
          if (!wrong.isEmpty()) {
            List<String> ev = new ArrayList<>(wrong);
            ev.addAll(unknown);
            out.add(
                finding(
                    Severity.FAIL,
                    subject,
                    sameAsPid
                        ? "hostpid == container pid (the zero-utilization bug): utilization reads 0 and the SM limit is not enforced"
                        : "recorded host pids point at other processes",
                    ev,
                    "The driver's NVML returned namespaced pids during detection (drivers 535-560). Use libvgpu (it learns host pids from NSpid or from the exporter) or turn on the exporter's host-pid write-back (chart value exporter.writeBack.hostPidRepair=true, flag --attribution.repair-hostpid=true); HAMi-core cannot fix it in place."));
          } else if (!suspect.isEmpty()) {
            out.add(
                finding(
                    Severity.WARN,
                    subject,
                    "hostpid == container pid: probably the zero-utilization bug (the process itself is not visible to confirm)",
                    suspect,
                    "The driver's NVML returned namespaced pids during detection (drivers 535-560). Use libvgpu (host pid from NSpid) or turn on the exporter's host-pid write-back (chart value exporter.writeBack.hostPidRepair=true, flag --attribution.repair-hostpid=true)."));
          } else if (!unknown.isEmpty()) {
            out.add(
                finding(
                    Severity.WARN,
                    subject,
                    "host pid detection did not finish for some processes: their utilization is unknown",
                    unknown,
                    "Look for \"host pid is error\" in the container's logs (CUDA_VISIBLE_DEVICES not starting at the pod's device 0, or concurrent starts); restart the process."));
          } else if (checked > 0) {
            out.add(
                ok(
                    subject,
                    checked + " slot(s) with the right host pid",
                    List.of(r.path().toString())));
          } else {
            out.add(skip(subject, "no live slots to check"));
          }
        });
    return Checks.orSkip(this, out, "no readable regions");
  }
}

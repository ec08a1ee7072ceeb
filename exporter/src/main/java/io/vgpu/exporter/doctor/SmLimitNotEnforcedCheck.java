package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.regioncodec.DeviceHeader;
import io.vgpu.regioncodec.ProcessSlot;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/** 11: the container's SM utilization (NVML, over the sampler's window) is above its SM limit. */
final class SmLimitNotEnforcedCheck implements DoctorCheck {
  @Override
  public int number() {
    return 11;
  }

  @Override
  public String id() {
    return "sm-limit-not-enforced";
  }

  @Override
  public String title() {
    return "SM limit enforced";
  }

  /** The container's SM utilization in percent on one device, empty when NVML cannot tell. */
  static Optional<Double> utilizationPercent(
      NodeEvidence e, NodeEvidence.Container c, NodeEvidence.Region r, DeviceHeader d) {
    Optional<GpuSnapshot> gpu = d.uuid().isEmpty() ? Optional.empty() : e.nvml().byUuid(d.uuid());
    if (gpu.isEmpty() || !gpu.get().processUtilizationAvailable()) {
      return Optional.empty();
    }
    double sum = 0;
    boolean any = false;
    for (ProcessSlot slot : Checks.latest(r).processes()) {
      var p = e.processOfSlot(c, r, slot);
      if (p.isPresent()) {
        var u = gpu.get().smUtilizationOf(p.get().hostPid());
        if (u.isPresent()) {
          sum += u.getAsDouble() * 100;
          any = true;
        }
      }
    }
    return any ? Optional.of(sum) : Optional.empty();
  }

  static boolean limited(DeviceHeader d) {
    return d.smLimitPercent() > 0 && d.smLimitPercent() < 100;
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    List<Finding> out = new ArrayList<>();
    if (!e.nvml().status().up()) {
      return List.of(skip(Checks.NODE, "NVML unavailable: " + e.nvml().status().reason()));
    }
    Checks.eachRegion(
        e,
        (c, r) -> {
          for (DeviceHeader d : Checks.latest(r).devices()) {
            if (!limited(d)) {
              continue;
            }
            var util = utilizationPercent(e, c, r, d);
            if (util.isEmpty()) {
              continue;
            }
            String subject = Checks.container(c) + " device " + d.index();
            List<String> ev =
                List.of(
                    String.format(
                        java.util.Locale.ROOT,
                        "device %d: SM limit %d%%, NVML utilization of the container's processes %.0f%% (window mean)",
                        d.index(),
                        d.smLimitPercent(),
                        util.get()));
            if (util.get() > d.smLimitPercent() + e.thresholds().smOverLimitPoints()) {
              out.add(
                  finding(
                      Severity.FAIL,
                      subject,
                      "utilization persistently above the SM limit",
                      ev,
                      "Check 9 (wrong host pid silently disables HAMi-core's limiter), GPU_CORE_UTILIZATION_POLICY=disable, utilization_switch=0 (monitor lets a lone task run free), CUDA graphs / cooperative launches (not limited by HAMi-core); libvgpu's limiter covers these."));
            } else {
              out.add(ok(subject, "within the limit", ev));
            }
          }
        });
    return Checks.orSkip(this, out, "no SM-limited containers with NVML utilization");
  }
}

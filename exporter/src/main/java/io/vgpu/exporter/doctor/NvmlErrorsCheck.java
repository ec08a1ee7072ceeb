package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import java.util.List;

/** 13: NVML could not be initialised or the driver answered with errors. */
final class NvmlErrorsCheck implements DoctorCheck {
  @Override
  public int number() {
    return 13;
  }

  @Override
  public String id() {
    return "nvml-errors";
  }

  @Override
  public String title() {
    return "NVML and the driver work";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    if (!e.nvmlQueried()) {
      return List.of(skip(Checks.NODE, "NVML not queried"));
    }
    var status = e.nvml().status();
    if (status.notPolledYet()) {
      return List.of(skip(Checks.NODE, "NVML not polled yet (the first poll follows start)"));
    }
    if (status.up()) {
      return List.of(
          ok(
              Checks.NODE,
              "NVML up, " + e.nvml().gpus().size() + " GPU(s)",
              List.of("driver " + status.driverVersion().orElse("?"))));
    }
    return List.of(
        finding(
            Severity.FAIL,
            Checks.NODE,
            "NVML is not usable: usage cannot be reconciled or attributed",
            List.of(
                "reason: " + status.reason(),
                "last error: " + status.lastError().map(Object::toString).orElse("none")),
            "Run nvidia-smi on the node. \"nvml Init err\": the driver is not installed or not mounted into this pod (/dev/nvidia*, libnvidia-ml.so.1); driver/library version mismatch after an upgrade needs a reboot or module reload."));
  }
}

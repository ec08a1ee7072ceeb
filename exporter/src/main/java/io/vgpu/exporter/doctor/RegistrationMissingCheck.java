package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import java.util.List;
import java.util.Optional;

/** 15: the device registration annotation is missing or undecodable (or disagrees with NVML). */
final class RegistrationMissingCheck implements DoctorCheck {
  @Override
  public int number() {
    return 15;
  }

  @Override
  public String id() {
    return "registration-missing";
  }

  @Override
  public String title() {
    return "device registration annotation present";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    Optional<List<Finding>> unreadable = Checks.nodeUnreadable(this, e);
    if (unreadable.isPresent()) {
      return unreadable.get();
    }
    var meta = e.node().orElseThrow();
    String fix =
        "The device plugin writes hami.io/node-nvidia-register after enumerating GPUs: check its logs for \"nvml Init err\" / \"patch node error\", and that scheduler and plugin run the same HAMi version (\"device decode error\").";
    if (meta.registeredDevices().isEmpty()) {
      return List.of(
          finding(
              Severity.FAIL,
              Checks.NODE,
              "hami.io/node-nvidia-register cannot be decoded: the scheduler cannot read this node's devices",
              List.of(),
              fix));
    }
    int registered = meta.registeredDevices().getAsInt();
    List<String> ev = List.of("registered devices: " + registered);
    if (registered == 0) {
      return List.of(
          finding(
              Severity.FAIL,
              Checks.NODE,
              "hami.io/node-nvidia-register is missing or lists no devices: no vGPU can be scheduled here",
              ev,
              fix));
    }
    if (e.nvml().status().up() && e.nvml().gpus().size() != registered) {
      return List.of(
          finding(
              Severity.WARN,
              Checks.NODE,
              "registration lists "
                  + registered
                  + " device(s), NVML sees "
                  + e.nvml().gpus().size(),
              List.of("registered devices: " + registered, "NVML GPUs: " + e.nvml().gpus().size()),
              "A FilterDevice config, an unhealthy GPU or a stale annotation; restart the device plugin on this node if GPUs changed."));
    }
    return List.of(ok(Checks.NODE, registered + " device(s) registered", ev));
  }
}

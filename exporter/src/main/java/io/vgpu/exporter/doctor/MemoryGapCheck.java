package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.nvml.GpuSnapshot;
import io.vgpu.regioncodec.DeviceHeader;
import io.vgpu.regioncodec.ProcessSlot;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * 10: NVML's per-process memory of the container's processes and the region's accounting disagree:
 * allocations the library does not intercept (NCCL, cuDNN workspaces, non-primary contexts), or
 * accounting left behind.
 */
final class MemoryGapCheck implements DoctorCheck {
  @Override
  public int number() {
    return 10;
  }

  @Override
  public String id() {
    return "memory-gap";
  }

  @Override
  public String title() {
    return "NVML and region memory agree";
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
          var s = Checks.latest(r);
          for (DeviceHeader d : s.devices()) {
            Optional<GpuSnapshot> gpu =
                d.uuid().isEmpty() ? Optional.empty() : e.nvml().byUuid(d.uuid());
            if (gpu.isEmpty()) {
              continue;
            }
            long region = 0;
            long nvml = 0;
            int known = 0;
            for (ProcessSlot slot : s.processes()) {
              var p = e.processOfSlot(c, r, slot);
              if (p.isEmpty()) {
                continue;
              }
              region += slot.devices().get(d.index()).totalBytes();
              var m = gpu.get().memoryOf(p.get().hostPid());
              if (m.isPresent()) {
                nvml += m.getAsLong();
                known++;
              }
            }
            if (known == 0) {
              continue;
            }
            long tolerance =
                Math.max(
                    e.thresholds().memoryGapBytes(),
                    (long) (nvml * e.thresholds().memoryGapRatio()));
            List<String> ev =
                List.of(
                    "device "
                        + d.index()
                        + " ("
                        + d.uuid()
                        + "): region counts "
                        + Checks.mib(region)
                        + ", NVML reports "
                        + Checks.mib(nvml)
                        + " for the same "
                        + known
                        + " process(es)",
                    "tolerance " + Checks.mib(tolerance));
            String subject = Checks.container(c) + " device " + d.index();
            if (nvml - region > tolerance) {
              out.add(
                  finding(
                      Severity.WARN,
                      subject,
                      "NVML sees "
                          + Checks.mib(nvml - region)
                          + " more than the region: allocations bypass the memory limit",
                      ev,
                      "Find the untracked allocator (NCCL/cuMemCreate, cuDNN/cuBLAS workspaces, extra contexts); libvgpu counts VMM and pools; raise the request or cap the framework's own pool."));
            } else if (region - nvml > tolerance) {
              out.add(
                  finding(
                      Severity.WARN,
                      subject,
                      "the region counts "
                          + Checks.mib(region - nvml)
                          + " more than NVML sees: accounting drift",
                      ev,
                      "Usually frees the library missed or counted twice; restart the process to reset its slot."));
            } else {
              out.add(ok(subject, "within tolerance", ev));
            }
          }
        });
    return Checks.orSkip(this, out, "no live processes that NVML reports memory for");
  }
}

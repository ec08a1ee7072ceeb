package io.vgpu.exporter.nvml;

import java.util.Objects;

/**
 * Who a GPU is.
 *
 * @param index NVML index (the parent's for a MIG device)
 * @param migIndex MIG device index under the parent, -1 for a physical GPU
 * @param uuid {@code GPU-...} or {@code MIG-...}
 * @param name product name, e.g. "NVIDIA H100 80GB HBM3"
 */
public record GpuIdentity(int index, int migIndex, String uuid, String name) {
  public GpuIdentity {
    Objects.requireNonNull(uuid, "uuid");
    Objects.requireNonNull(name, "name");
    if (index < 0 || migIndex < -1) {
      throw new IllegalArgumentException("bad device index " + index + "/" + migIndex);
    }
  }
}

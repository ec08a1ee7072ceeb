package io.vgpu.exporter.kubelet;

import java.util.Locale;

/**
 * How a container holds a device: the {@code sharing} label of {@code vgpu_container_device_info}.
 */
public enum Sharing {
  /** A HAMi-style vGPU slot (shared region, enforced limits). */
  VGPU,
  /** The whole GPU, alone. */
  WHOLE,
  /** A MIG device. */
  MIG,
  /** A time-slicing replica of a GPU or MIG device. */
  TIMESLICE,
  /** An MPS replica (a resource name that says so; pod-resources alone cannot tell). */
  MPS,
  /** A Dynamic Resource Allocation claim. */
  DRA;

  /** The label value. */
  public String label() {
    return name().toLowerCase(Locale.ROOT);
  }

  /**
   * How a device-plugin assignment holds its device. NVIDIA's {@code ::n} replicas are time-slicing
   * unless the resource name says MPS ({@code nvidia.com/gpu.mps}, …): the id is the same for both.
   */
  public static Sharing of(String resourceName, DeviceId id) {
    return switch (id.form()) {
      case HAMI_SLOT -> VGPU;
      case REPLICA -> resourceName.toLowerCase(Locale.ROOT).contains("mps") ? MPS : TIMESLICE;
      case MIG -> MIG;
      case GPU -> WHOLE;
    };
  }
}

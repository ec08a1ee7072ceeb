package io.vgpu.exporter.nvml;

/**
 * An opaque {@code nvmlDevice_t}, valid until the next {@code nvmlShutdown}.
 *
 * @param address the native handle value
 * @param index NVML index of the physical GPU (of the parent for a MIG device)
 * @param migIndex index of the MIG device under its parent, -1 for a physical GPU
 */
public record DeviceHandle(long address, int index, int migIndex) {
  public DeviceHandle {
    if (index < 0 || migIndex < -1) {
      throw new IllegalArgumentException("bad device index " + index + "/" + migIndex);
    }
  }

  public boolean isMig() {
    return migIndex >= 0;
  }
}

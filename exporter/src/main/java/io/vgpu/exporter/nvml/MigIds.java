package io.vgpu.exporter.nvml;

/**
 * The GPU instance and compute instance a MIG device is ({@code nvmlDeviceGetGpuInstanceId}, {@code
 * nvmlDeviceGetComputeInstanceId}).
 *
 * @param gpuInstanceId the GPU instance id on its parent (0 and up)
 * @param computeInstanceId the compute instance id within that GPU instance (0 and up)
 */
public record MigIds(int gpuInstanceId, int computeInstanceId) {
  /** Ids above this are garbage: a GPU has at most a few dozen instances. */
  public static final int MAX_ID = 1024;

  public MigIds {
    if (gpuInstanceId < 0
        || gpuInstanceId > MAX_ID
        || computeInstanceId < 0
        || computeInstanceId > MAX_ID) {
      throw new IllegalArgumentException(
          "bad MIG instance ids " + gpuInstanceId + "/" + computeInstanceId);
    }
  }
}

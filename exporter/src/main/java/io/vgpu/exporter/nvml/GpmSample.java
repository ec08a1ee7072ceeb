package io.vgpu.exporter.nvml;

/**
 * An NVML GPM sample buffer ({@code nvmlGpmSample_t}) from {@link NvmlClient#gpmSampleAlloc()}:
 * valid until {@link NvmlClient#gpmSampleFree} or {@code nvmlShutdown}, whichever comes first.
 *
 * @param address the native handle
 */
public record GpmSample(long address) {}

package io.vgpu.exporter.nvml;

/**
 * An opaque {@code nvmlEventSet_t}: valid from {@code nvmlEventSetCreate} until {@code
 * nvmlEventSetFree} or {@code nvmlShutdown}, whichever comes first.
 *
 * @param address the native handle value
 */
public record EventSet(long address) {}

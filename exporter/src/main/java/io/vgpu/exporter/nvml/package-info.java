/**
 * NVML through JNA, sampled in the background.
 *
 * <p>{@link io.vgpu.exporter.nvml.NvmlClient} is the narrow NVML surface the exporter needs, with
 * every return code mapped to a typed {@link io.vgpu.exporter.nvml.NvmlResult}; {@link
 * io.vgpu.exporter.nvml.JnaNvmlClient} binds it to {@code libnvidia-ml.so.1} (or to the
 * repository's fake library in tests). {@link io.vgpu.exporter.nvml.NvmlSampler} owns the client:
 * it initialises NVML once, polls at a fixed interval, keeps per-process utilization averaged over
 * a short window, counts errors by return code, and re-initialises with back-off after a failure.
 * Scrapes only read the latest immutable {@link io.vgpu.exporter.nvml.NvmlSnapshot}.
 */
package io.vgpu.exporter.nvml;

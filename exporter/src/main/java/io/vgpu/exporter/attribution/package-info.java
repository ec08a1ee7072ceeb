/**
 * Attribution: who uses which GPU, reconciled from three sources that each lie in their own way.
 *
 * <p>The shared regions say which processes a container has (in-container pids) and what the
 * in-container library measured; the hostpid-resolver maps those pids to host processes through
 * {@code /proc} (NSpid and cgroup, never trusting the hostpid a region records); NVML, sampled on
 * the host, says which host processes use each GPU and how much. {@link
 * io.vgpu.exporter.attribution.Reconciler} joins them per container and device; {@link
 * io.vgpu.exporter.attribution.FeedbackLoop} reproduces HAMi's monitor feedback (priority blocking,
 * utilization switch); {@link io.vgpu.exporter.attribution.RegionWriteBack} performs the audited
 * writes; {@link io.vgpu.exporter.attribution.AttributionService} runs all of it in the background.
 */
package io.vgpu.exporter.attribution;
